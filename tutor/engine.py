"""One turn, end to end: store the learner's words, ask the tutor, keep what came back.

The order matters: the learner message is committed before any model call, so no fault
downstream can lose it; progress is the server's, computed from evidence, never taken on
the model's word alone.
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from collections.abc import Iterable
from typing import Any

from sqlmodel import Session, col, func, select

from tutor import progress as progress_mod
from tutor import prompts
from tutor.contract import Form, ParsedReply, TutorResponse
from tutor.forms import FormInputError, summarize_answers, validate_answers
from tutor.llm.base import ChatMessage, CompletionRequest, LearnerInput, Provider, TurnContext
from tutor.llm.config import LLMSettings
from tutor.llm.policy import PolicyResult, run_turn
from tutor.modules import Library, Module
from tutor.progress import ProgressState
from tutor.settings import MAX_MESSAGE_CHARS
from tutor.store import AuditEvent, Conversation, Learner, Message, ProgressRecord, Store, iso_utc, utcnow
from tutor.views import ConversationSummary, ConversationView, MessageView, ProgressView, TurnResult

log = logging.getLogger(__name__)


class InputError(ValueError):
    """Learner input refused before anything was stored; `message` is for the learner."""

    def __init__(self, message: str, field_id: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field_id = field_id


@dataclass(frozen=True)
class PendingTurn:
    """A learner message that is stored and waits for the tutor's reply."""

    conversation_id: int
    learner: MessageView
    learner_input: LearnerInput
    prompt_text: str  # what the model reads as the learner's turn


# Marks a conversation that still waits for the tutor's opening turn.
_OPENING: Any = object()


class Engine:
    def __init__(
        self, store: Store, provider: Provider, library: Library, settings: LLMSettings
    ) -> None:
        self.store = store
        self.provider = provider
        self.library = library
        self.settings = settings
        self._locks: dict[int, asyncio.Lock] = {}

    # ----------------------------------------------------------------- conversations

    async def open(
        self, learner_key: str, module_id: str, *, new: bool = False, defer_opening: bool = False
    ) -> ConversationView:
        """Resume the learner's active conversation in a module, or start one (new=True:
        start over — the old conversation is archived and the module's progress reset).
        A new conversation begins with the tutor's opening turn; with defer_opening the
        caller asks for it later with respond_pending (so a page never waits on a model)."""
        module = self.library.get(module_id)  # raises ModuleNotServable with the check message
        conversation_id, created = await asyncio.to_thread(
            self._find_or_create, learner_key, module.id, new
        )
        if created and not defer_opening:
            await self.respond_pending(conversation_id)
        return await asyncio.to_thread(self._view, conversation_id)

    def conversations(self, learner_key: str) -> list[ConversationSummary]:
        with self.store.session() as s:
            learner = s.exec(select(Learner).where(Learner.key == learner_key)).first()
            if learner is None:
                return []
            rows = s.exec(
                select(Conversation)
                .where(Conversation.learner_id == learner.id)
                .order_by(col(Conversation.updated_at).desc())
            ).all()
            turns = dict(
                s.exec(
                    select(Message.conversation_id, func.count())
                    .where(
                        col(Message.conversation_id).in_([c.id for c in rows]),
                        Message.role == "learner",
                    )
                    .group_by(Message.conversation_id)
                ).all()
            )
            return [
                ConversationSummary(
                    conv.id or 0, conv.module_id, conv.status, turns.get(conv.id, 0),
                    iso_utc(conv.updated_at),
                )
                for conv in rows
            ]

    def progress_for(self, learner_key: str, module_id: str) -> ProgressView | None:
        module = self.library.get(module_id)
        with self.store.session() as s:
            learner = s.exec(select(Learner).where(Learner.key == learner_key)).first()
            if learner is None:
                return None
            state = _load_progress(s, learner.id or 0, module.id)
        return _progress_view(module, state, None)

    def history(self, conversation_id: int) -> list[MessageView]:
        with self.store.session() as s:
            rows = s.exec(
                select(Message).where(Message.conversation_id == conversation_id).order_by("seq")
            ).all()
            return [MessageView.from_row(r) for r in rows]

    # ------------------------------------------------------------------------- turns

    async def send(self, conversation_id: int, learner_input: LearnerInput) -> TurnResult:
        pending = await self.accept(conversation_id, learner_input)
        return await self.respond(pending)

    async def accept(self, conversation_id: int, learner_input: LearnerInput) -> PendingTurn:
        """Check the learner's input and store it. Refused input raises InputError and
        stores nothing."""
        return await asyncio.to_thread(self._accept, conversation_id, learner_input)

    async def respond(self, pending: PendingTurn) -> TurnResult:
        async with self._lock(pending.conversation_id):
            return await self._respond_to(pending)

    async def respond_pending(self, conversation_id: int) -> TurnResult | None:
        """Answer the conversation's last learner message if it has no reply yet (also
        after a restart cut a turn short). None when there is nothing to answer."""
        async with self._lock(conversation_id):
            pending = await asyncio.to_thread(self._pending, conversation_id)
            if pending is None:
                return None
            if pending is _OPENING:
                conv = await asyncio.to_thread(self._conversation, conversation_id)
                module = self.library.get(conv.module_id)
                return await self._respond(conversation_id, module, None, "", frozenset())
            return await self._respond_to(pending)

    def _lock(self, conversation_id: int) -> asyncio.Lock:
        # One reply at a time per conversation, in order (per process; the database's
        # unique (conversation, seq) guards against a second process).
        return self._locks.setdefault(conversation_id, asyncio.Lock())

    async def _respond_to(self, pending: PendingTurn) -> TurnResult:
        conv = await asyncio.to_thread(self._conversation, pending.conversation_id)
        module = self.library.get(conv.module_id)
        detected = progress_mod.detect_text(module, _evidence_text(pending.learner_input))
        if pending.learner_input.is_form:
            detected |= progress_mod.detect_form(
                module, pending.learner_input.form_id or "", pending.learner_input.answers or {}
            )
        return await self._respond(
            pending.conversation_id, module, pending, pending.prompt_text, frozenset(detected)
        )

    def _pending(self, conversation_id: int) -> PendingTurn | None:
        """The oldest learner message no reply answers yet (a learner may send again while
        the tutor is still answering), or _OPENING for a conversation with no messages."""
        with self.store.session() as s:
            rows = s.exec(
                select(Message.seq, Message.role, Message.reply_to_seq)
                .where(Message.conversation_id == conversation_id)
                .order_by(col(Message.seq))
            ).all()
            if not rows:
                return _OPENING
            seq = _first_unanswered(rows)
            if seq is None:
                return None
            row = s.exec(
                select(Message).where(Message.conversation_id == conversation_id, Message.seq == seq)
            ).one()
            return _pending_from_row(row)

    async def skip_form(self, conversation_id: int, form_id: str) -> bool:
        """The learner chose not to answer an open form (it stays on the page as skipped)."""
        return await asyncio.to_thread(self._skip_form, conversation_id, form_id)

    # -------------------------------------------------------------------- internals

    def _skip_form(self, conversation_id: int, form_id: str) -> bool:
        with self.store.session() as s:
            last_tutor = s.exec(
                select(Message)
                .where(Message.conversation_id == conversation_id, Message.role == "tutor")
                .order_by(col(Message.seq).desc())
            ).first()
            if last_tutor is None or _open_form(last_tutor, form_id) is None:
                return False
            states = last_tutor.form_states
            states[form_id] = {"status": "skipped"}
            last_tutor.form_states_json = json.dumps(states, ensure_ascii=False)
            s.add(last_tutor)
            s.commit()
            return True

    def _accept(self, conversation_id: int, learner_input: LearnerInput) -> PendingTurn:
        with self.store.session() as s:
            conv = s.get(Conversation, conversation_id)
            if conv is None:
                raise InputError("That conversation does not exist.")
            last_tutor = s.exec(
                select(Message)
                .where(Message.conversation_id == conversation_id, Message.role == "tutor")
                .order_by(col(Message.seq).desc())
            ).first()
            if learner_input.is_form:
                form_id = learner_input.form_id or ""
                form = _open_form(last_tutor, form_id)
                if form is None:
                    raise InputError(f"The form {form_id!r} is not open in this conversation.")
                try:
                    answers = validate_answers(form, learner_input.answers or {})
                except FormInputError as exc:
                    raise InputError(exc.message, exc.field_id) from None
                text = summarize_answers(form, answers)
            else:
                text = (learner_input.text or "").strip()
                if not text:
                    raise InputError("Type a message first.")
                if len(text) > MAX_MESSAGE_CHARS:
                    raise InputError(
                        f"That message is {len(text)} characters long; the limit is "
                        f"{MAX_MESSAGE_CHARS}. Please shorten it or split it in two."
                    )
                answers, form_id = None, None
            if last_tutor is not None:
                _close_forms(last_tutor, submitted=form_id, answers=answers)
                s.add(last_tutor)
            row = Message(
                conversation_id=conversation_id,
                seq=_next_seq(s, conversation_id),
                role="learner",
                text=text,
                form_id=form_id,
                answers_json=json.dumps(answers, ensure_ascii=False) if answers else None,
            )
            s.add(row)
            conv.updated_at = utcnow()
            s.add(conv)
            s.commit()
            s.refresh(row)
            return _pending_from_row(row)

    async def _respond(
        self,
        conversation_id: int,
        module: Module,
        pending: PendingTurn | None,
        prompt_text: str,
        detected: frozenset[str],
    ) -> TurnResult:
        # Callers hold self._lock(conversation_id).
        conv, before, history, turn_index, tokens_used = await asyncio.to_thread(
            self._turn_inputs, conversation_id, module, pending
        )
        # Count the learner's evidence, but leave milestones for the reply to celebrate.
        interim = progress_mod.apply_evidence(module, before, detected)
        messages = prompts.build_messages(
            module, interim, history, prompt_text if pending else None
        )
        context = TurnContext(
            module=module,
            progress=interim,
            detected=detected,
            learner=pending.learner_input if pending else None,
            turn_index=turn_index,
        )
        request = CompletionRequest(
            messages=messages,
            temperature=self.settings.temperature,
            max_tokens=self.settings.max_tokens,
            strategy=self.settings.strategy,  # type: ignore[arg-type]
            context=context,
        )
        result = await self._call_policy(request, module, interim, tokens_used)
        claimed = _claimed_topics(result.parsed)
        update = progress_mod.reconcile(module, before, detected, claimed)
        if result.operator_message:
            log.warning("model backend: %s", result.operator_message)
        if update.ignored_claims:
            log.info("ignored non-canonical topic claims: %s", update.ignored_claims)
        shown = _with_server_meta(result.parsed.response, module, update)
        reply = await asyncio.to_thread(
            self._store_reply, conv, module, result, shown, update.state,
            pending.learner.seq if pending else None,
        )
        return TurnResult(
            learner=pending.learner if pending else None,
            reply=reply,
            progress=_progress_view(module, update.state, update.milestone),
            attempts=list(result.attempts),
            operator_message=result.operator_message,
        )

    async def _call_policy(
        self, request: CompletionRequest, module: Module, state: ProgressState, tokens_used: int
    ) -> PolicyResult:
        nxt = progress_mod.next_topic(module, state)
        suggestion = f"Tell me about {nxt.title}" if nxt is not None else None
        try:
            return await run_turn(
                self.provider,
                request,
                self.settings,
                fallback_suggestion=suggestion,
                conversation_tokens_used=tokens_used,
            )
        except Exception as exc:  # the learner must never be stuck on our bug
            log.exception("turn policy failed")
            apology = TutorResponse.model_validate(
                {
                    "content": {
                        "text_blocks": [
                            {
                                "type": "paragraph",
                                "content": "Sorry — something went wrong on my side while "
                                "preparing that answer. Your message is saved; you can "
                                "send it again or carry on.",
                            }
                        ],
                        "next_step": {"suggestions": [suggestion] if suggestion else []},
                    },
                    "meta": {"response_type": "error", "emotion": "supportive"},
                }
            )
            flags = ["engine_error", "needs_review"]
            parsed = ParsedReply("invalid", apology, flags, [type(exc).__name__], "")
            return PolicyResult(parsed, [], flags, None)

    def _find_or_create(self, learner_key: str, module_id: str, new: bool) -> tuple[int, bool]:
        with self.store.session() as s:
            learner = s.exec(select(Learner).where(Learner.key == learner_key)).first()
            if learner is None:
                learner = Learner(key=learner_key)
                s.add(learner)
                s.commit()
                s.refresh(learner)
            active = s.exec(
                select(Conversation)
                .where(
                    Conversation.learner_id == learner.id,
                    Conversation.module_id == module_id,
                    Conversation.status == "active",
                )
                .order_by(col(Conversation.updated_at).desc())
            ).all()
            if active and not new:
                return active[0].id or 0, False
            for conv in active:
                conv.status = "archived"
                s.add(conv)
            if new:
                record = _progress_row(s, learner.id or 0, module_id)
                record.covered_json, record.milestones_json = "[]", "[]"
                record.updated_at = utcnow()
                s.add(record)
            conv = Conversation(learner_id=learner.id or 0, module_id=module_id)
            s.add(conv)
            s.commit()
            s.refresh(conv)
            return conv.id or 0, True

    def _conversation(self, conversation_id: int) -> Conversation:
        with self.store.session() as s:
            conv = s.get(Conversation, conversation_id)
            if conv is None:
                raise InputError("That conversation does not exist.")
            return conv

    def _turn_inputs(
        self, conversation_id: int, module: Module, pending: PendingTurn | None
    ) -> tuple[Conversation, ProgressState, list[ChatMessage], int, int]:
        with self.store.session() as s:
            conv = s.get(Conversation, conversation_id)
            assert conv is not None
            before = _load_progress(s, conv.learner_id, module.id)
            rows = s.exec(
                select(Message).where(Message.conversation_id == conversation_id).order_by("seq")
            ).all()
            tokens_used = s.exec(
                select(func.coalesce(func.sum(AuditEvent.tokens_in + AuditEvent.tokens_out), 0))
                .where(AuditEvent.conversation_id == conversation_id)
            ).one()
        upto = pending.learner.seq if pending else None
        history: list[ChatMessage] = []
        turns = 0
        for row in rows:
            # Everything said before this learner message, and replies to earlier ones
            # that were stored after it; never this message or later learner messages.
            if upto is not None and row.role == "learner" and row.seq >= upto:
                continue
            if upto is not None and row.role == "tutor" and (row.reply_to_seq or -1) >= upto:
                continue
            if row.role == "learner":
                turns += 1
                history.append(ChatMessage("user", row.text))
            elif row.outcome == "invalid" and row.parsed_json:
                # A fail-closed apology: the model should see what the learner saw.
                history.append(ChatMessage("assistant", row.parsed_json))
            elif row.raw:
                history.append(ChatMessage("assistant", row.raw))
        return conv, before, history, turns + (1 if pending else 0), int(tokens_used or 0)

    def _store_reply(
        self,
        conv: Conversation,
        module: Module,
        result: PolicyResult,
        shown: TutorResponse | None,
        state: ProgressState,
        reply_to_seq: int | None,
    ) -> MessageView:
        parsed = result.parsed
        flags = list(dict.fromkeys([*parsed.flags, *result.flags]))
        forms = (shown.content.forms or []) if shown else []
        with self.store.session() as s:
            row = Message(
                conversation_id=conv.id or 0,
                seq=_next_seq(s, conv.id or 0),
                role="tutor",
                raw=parsed.raw,
                parsed_json=json.dumps(shown.to_json_dict(), ensure_ascii=False) if shown else None,
                outcome=parsed.outcome,
                flags_json=json.dumps(flags),
                form_states_json=json.dumps({f.id: {"status": "open"} for f in forms}),
                reply_to_seq=reply_to_seq,
            )
            s.add(row)
            s.flush()
            for attempt in result.attempts:
                s.add(
                    AuditEvent(
                        conversation_id=conv.id or 0,
                        message_id=row.id,
                        attempt=attempt.attempt,
                        provider=attempt.provider,
                        model=attempt.model,
                        strategy=attempt.strategy,
                        latency_ms=attempt.latency_ms,
                        tokens_in=attempt.tokens_in,
                        tokens_out=attempt.tokens_out,
                        outcome=attempt.outcome,
                        flags_json=json.dumps(list(attempt.flags)),
                        error_class=attempt.error_class,
                        detail_json=json.dumps(_attempt_detail(attempt), ensure_ascii=False),
                    )
                )
            record = _progress_row(s, conv.learner_id, module.id)
            payload = state.to_dict()
            record.covered_json = json.dumps(list(payload["covered"]))
            record.milestones_json = json.dumps(list(payload["milestones"]))
            record.updated_at = utcnow()
            s.add(record)
            db_conv = s.get(Conversation, conv.id)
            if db_conv is not None:
                db_conv.updated_at = utcnow()
                s.add(db_conv)
            s.commit()
            s.refresh(row)
            return MessageView.from_row(row)

    def _view(self, conversation_id: int) -> ConversationView:
        with self.store.session() as s:
            conv = s.get(Conversation, conversation_id)
            if conv is None:
                raise InputError("That conversation does not exist.")
            learner = s.get(Learner, conv.learner_id)
            state = _load_progress(s, conv.learner_id, conv.module_id)
        module = self.library.get(conv.module_id)
        messages = self.history(conversation_id)
        unanswered = _first_unanswered((m.seq, m.role, m.reply_to_seq) for m in messages)
        return ConversationView(
            id=conversation_id,
            module_id=conv.module_id,
            learner_key=learner.key if learner else "",
            messages=messages,
            progress=_progress_view(module, state, None),
            awaiting_reply=not messages or unanswered is not None,
        )


# ------------------------------------------------------------------------ helpers


_AUDIT_COLUMNS = {
    "attempt", "provider", "model", "strategy", "latency_ms", "tokens_in", "tokens_out",
    "outcome", "flags", "error_class",
}


def _attempt_detail(attempt: Any) -> dict[str, Any]:
    """What an attempt record knows beyond the audit table's own columns."""
    data = attempt.to_json_dict() if hasattr(attempt, "to_json_dict") else {}
    return {k: v for k, v in data.items() if k not in _AUDIT_COLUMNS}


def _first_unanswered(rows: Iterable[tuple[int, str, int | None]]) -> int | None:
    """The seq of the oldest learner message no reply answers, from (seq, role,
    reply_to_seq) rows in order."""
    rows = list(rows)
    answered = {reply_to for _, role, reply_to in rows if role == "tutor"}
    return next((seq for seq, role, _ in rows if role == "learner" and seq not in answered), None)


def _pending_from_row(row: Message) -> PendingTurn:
    if row.form_id is not None:
        answers = row.answers or {}
        learner_input = LearnerInput(form_id=row.form_id, answers=answers)
        prompt_text = f"{row.text}\n\n(form {row.form_id} answers: {json.dumps(answers)})"
    else:
        learner_input = LearnerInput(text=row.text)
        prompt_text = row.text
    return PendingTurn(row.conversation_id, MessageView.from_row(row), learner_input, prompt_text)


def _next_seq(s: Session, conversation_id: int) -> int:
    last = s.exec(
        select(Message.seq)
        .where(Message.conversation_id == conversation_id)
        .order_by(col(Message.seq).desc())
    ).first()
    return 0 if last is None else last + 1


def _progress_row(s: Session, learner_id: int, module_id: str) -> ProgressRecord:
    row = s.exec(
        select(ProgressRecord).where(
            ProgressRecord.learner_id == learner_id, ProgressRecord.module_id == module_id
        )
    ).first()
    return row or ProgressRecord(learner_id=learner_id, module_id=module_id)


def _load_progress(s: Session, learner_id: int, module_id: str) -> ProgressState:
    row = _progress_row(s, learner_id, module_id)
    return ProgressState.from_dict(
        {"covered": json.loads(row.covered_json), "milestones": json.loads(row.milestones_json)}
    )


def _open_form(last_tutor: Message | None, form_id: str) -> Form | None:
    """The form, if the tutor's latest message offered it and it is still open."""
    if last_tutor is None or not last_tutor.parsed:
        return None
    if last_tutor.form_states.get(form_id, {}).get("status") != "open":
        return None
    response = TutorResponse.model_validate(last_tutor.parsed)
    return next((f for f in response.content.forms or [] if f.id == form_id), None)


def _close_forms(last_tutor: Message, *, submitted: str | None, answers: Any) -> None:
    """A learner turn closes the latest message's open forms: the one answered is
    submitted, the others skipped (typing instead of filling a form is always allowed)."""
    states = last_tutor.form_states
    for form_id, state in states.items():
        if state.get("status") != "open":
            continue
        if form_id == submitted:
            states[form_id] = {"status": "submitted", "answers": answers}
        else:
            states[form_id] = {"status": "skipped"}
    last_tutor.form_states_json = json.dumps(states, ensure_ascii=False)


def _evidence_text(learner_input: LearnerInput) -> str:
    if not learner_input.is_form:
        return learner_input.text or ""
    # Free-text answers count as the learner's own words too.
    return "\n".join(v for v in (learner_input.answers or {}).values() if isinstance(v, str))


def _claimed_topics(parsed: ParsedReply) -> list[str]:
    response = parsed.response
    if response is None or response.meta.progress is None:
        return []
    return list(response.meta.progress.covered_topics or [])


def _with_server_meta(
    response: TutorResponse | None, module: Module, update: progress_mod.ProgressUpdate
) -> TutorResponse | None:
    """The learner sees the server's progress; the model's claim stays in the raw text."""
    if response is None:
        return None
    shown = response.model_copy(deep=True)
    shown.meta.progress = progress_mod.server_progress(module, update)
    shown.meta.module_state = progress_mod.module_state(module, update.state)
    return shown


def _progress_view(module: Module, state: ProgressState, milestone: str | None) -> ProgressView:
    covered = progress_mod.covered_ids(module, state)
    return ProgressView(
        percentage=progress_mod.percentage(module, state),
        covered=covered,
        total=len(module.topic_ids),
        milestone=milestone,
        milestones=list(state.milestones),
        module_state=progress_mod.module_state(module, state).model_dump(exclude_none=True),
    )

