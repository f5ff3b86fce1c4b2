"""The database half of a conversation: what is stored, and the few reads a turn needs.

Plain synchronous functions over a `Store`; the engine runs them in a worker thread so the
event loop never waits on the database. Rules kept here:

- a learner message is stored (with the forms it closes) before any model call;
- the tutor owes a reply to every learner message no reply answers (`reply_to_seq`);
- what the model reads of the past is what the learner saw, never a failed raw reply.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session, col, func, select

from tutor.contract import Form, TutorResponse
from tutor.forms import FormInputError, summarize_answers, validate_answers
from tutor.llm.base import ChatMessage, LearnerInput
from tutor.progress import ProgressState
from tutor.settings import MAX_MESSAGE_CHARS
from tutor.store import (
    AuditEvent, Conversation, Learner, Message, ProgressRecord, RiskEvent, Store, iso_utc, utcnow,
)
from tutor.views import ConversationSummary, MessageView

# What the model reads in place of a reply that could not be shown as a lesson: short,
# honest, and in the shape the model is asked to write.
UNSHOWN_REPLY = json.dumps(
    {"content": {"text_blocks": [{"type": "paragraph", "content": "(My previous reply could not be shown.)"}]},
     "meta": {"response_type": "error"}}
)


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
OPENING: Any = object()


# ------------------------------------------------------------------- conversations


def find_or_create(store: Store, learner_key: str, module_id: str, new: bool) -> tuple[int, bool]:
    """The learner's active conversation in a module, or a new one (new=True archives the
    old one and resets the module's progress). Returns (id, created)."""
    with store.session() as s:
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
            record = progress_row(s, learner.id or 0, module_id)
            record.covered_json, record.milestones_json = "[]", "[]"
            record.updated_at = utcnow()
            s.add(record)
        conv = Conversation(learner_id=learner.id or 0, module_id=module_id)
        s.add(conv)
        s.commit()
        s.refresh(conv)
        return conv.id or 0, True


def get_conversation(store: Store, conversation_id: int) -> Conversation:
    with store.session() as s:
        conv = s.get(Conversation, conversation_id)
        if conv is None:
            raise InputError("That conversation does not exist.")
        return conv


def summaries(store: Store, learner_key: str) -> list[ConversationSummary]:
    with store.session() as s:
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
                .where(col(Message.conversation_id).in_([c.id for c in rows]), Message.role == "learner")
                .group_by(Message.conversation_id)
            ).all()
        )
        return [
            ConversationSummary(conv.id or 0, conv.module_id, conv.status, turns.get(conv.id, 0), iso_utc(conv.updated_at))
            for conv in rows
        ]


def learner_progress(store: Store, learner_key: str, module_id: str) -> ProgressState | None:
    with store.session() as s:
        learner = s.exec(select(Learner).where(Learner.key == learner_key)).first()
        return None if learner is None else load_progress(s, learner.id or 0, module_id)


def history(store: Store, conversation_id: int) -> list[MessageView]:
    with store.session() as s:
        rows = s.exec(select(Message).where(Message.conversation_id == conversation_id).order_by("seq")).all()
        return [MessageView.from_row(r) for r in rows]


def conversation_state(store: Store, conversation_id: int) -> tuple[Conversation, str, ProgressState, list[MessageView]]:
    """(conversation, learner key, progress, messages) for a page that opens it."""
    with store.session() as s:
        conv = s.get(Conversation, conversation_id)
        if conv is None:
            raise InputError("That conversation does not exist.")
        learner = s.get(Learner, conv.learner_id)
        state = load_progress(s, conv.learner_id, conv.module_id)
    return conv, (learner.key if learner else ""), state, history(store, conversation_id)


# ------------------------------------------------------------------ learner turns


def accept(store: Store, conversation_id: int, learner_input: LearnerInput) -> PendingTurn:
    """Check the learner's input and store it. Refused input raises InputError and stores
    nothing."""
    with store.session() as s:
        conv = s.get(Conversation, conversation_id)
        if conv is None:
            raise InputError("That conversation does not exist.")
        last_tutor = _last_tutor(s, conversation_id)
        if learner_input.is_form:
            form_id = learner_input.form_id or ""
            form = open_form(last_tutor, form_id)
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


def skip_form(store: Store, conversation_id: int, form_id: str) -> bool:
    """The learner chose not to answer an open form (it stays on the page as skipped)."""
    with store.session() as s:
        last_tutor = _last_tutor(s, conversation_id)
        if last_tutor is None or open_form(last_tutor, form_id) is None:
            return False
        states = last_tutor.form_states
        states[form_id] = {"status": "skipped"}
        last_tutor.form_states_json = json.dumps(states, ensure_ascii=False)
        s.add(last_tutor)
        s.commit()
        return True


def pending(store: Store, conversation_id: int) -> PendingTurn | None:
    """The oldest learner message no reply answers yet (a learner may send again while
    the tutor is still answering), OPENING for a conversation with no messages, or None."""
    with store.session() as s:
        rows = s.exec(
            select(Message.seq, Message.role, Message.reply_to_seq)
            .where(Message.conversation_id == conversation_id)
            .order_by(col(Message.seq))
        ).all()
        if not rows:
            return OPENING
        seq = first_unanswered(rows)
        if seq is None:
            return None
        row = s.exec(select(Message).where(Message.conversation_id == conversation_id, Message.seq == seq)).one()
        return _pending_from_row(row)


def first_unanswered(rows: Iterable[tuple[int, str, int | None]]) -> int | None:
    """The seq of the oldest learner message no reply answers, from (seq, role,
    reply_to_seq) rows in order."""
    rows = list(rows)
    answered = {reply_to for _, role, reply_to in rows if role == "tutor"}
    return next((seq for seq, role, _ in rows if role == "learner" and seq not in answered), None)


# ------------------------------------------------------------------ tutor turns


@dataclass(frozen=True)
class TurnInputs:
    conversation: Conversation
    progress: ProgressState
    history: list[ChatMessage]  # what the model reads of the past
    turn_index: int
    tokens_used: int  # by this conversation so far (budgets)


def turn_inputs(store: Store, conversation_id: int, module_id: str, upto: int | None) -> TurnInputs:
    """Everything said before learner message `upto` (and replies to earlier messages that
    were stored after it); never that message or later learner messages."""
    with store.session() as s:
        conv = s.get(Conversation, conversation_id)
        assert conv is not None
        before = load_progress(s, conv.learner_id, module_id)
        rows = s.exec(select(Message).where(Message.conversation_id == conversation_id).order_by("seq")).all()
        tokens_used = s.exec(
            select(func.coalesce(func.sum(AuditEvent.tokens_in + AuditEvent.tokens_out), 0))
            .where(AuditEvent.conversation_id == conversation_id)
        ).one()
    past: list[ChatMessage] = []
    turns = 0
    for row in rows:
        if upto is not None and row.role == "learner" and row.seq >= upto:
            continue
        if upto is not None and row.role == "tutor" and (row.reply_to_seq or -1) >= upto:
            continue
        if row.role == "learner":
            turns += 1
            past.append(ChatMessage("user", row.text))
        else:
            past.append(ChatMessage("assistant", model_memory(row)))
    return TurnInputs(conv, before, past, turns + (1 if upto is not None else 0), int(tokens_used or 0))


def model_memory(row: Message) -> str:
    """What the model reads of one of its past replies: the reply as the learner saw it
    (compact JSON), or a one-line stand-in for raw text that could not be shown — a failed
    reply read back word for word costs hundreds of tokens and teaches the model its
    mistake."""
    if row.parsed_json:
        return json.dumps(json.loads(row.parsed_json), ensure_ascii=False, separators=(",", ":"))
    return UNSHOWN_REPLY


def store_reply(
    store: Store,
    conv: Conversation,
    module_id: str,
    *,
    raw: str,
    shown: TutorResponse | None,
    outcome: str,
    flags: list[str],
    attempts: list[Any],
    state: ProgressState,
    reply_to_seq: int | None,
    risks: Iterable[RiskEvent] = (),
    guard: Callable[[Session], None] | None = None,
) -> MessageView:
    """The tutor's reply, one audit row per model call, the learner's progress, and the
    safety screen's flags for review, in one transaction. `guard` runs first in that
    transaction and may raise to store nothing (tutor.claims.release: the reply claim)."""
    forms = (shown.content.forms or []) if shown else []
    with store.session() as s:
        if guard is not None:
            guard(s)
        row = Message(
            conversation_id=conv.id or 0,
            seq=_next_seq(s, conv.id or 0),
            role="tutor",
            raw=raw,
            parsed_json=json.dumps(shown.to_json_dict(), ensure_ascii=False) if shown else None,
            outcome=outcome,
            flags_json=json.dumps(flags),
            form_states_json=json.dumps({f.id: {"status": "open"} for f in forms}),
            reply_to_seq=reply_to_seq,
        )
        s.add(row)
        s.flush()
        for attempt in attempts:
            s.add(_audit_row(conv.id or 0, row.id, attempt))
        for risk in risks:
            risk.reply_id = row.id
            s.add(risk)
        record = progress_row(s, conv.learner_id, module_id)
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


# ------------------------------------------------------------------------ helpers

_AUDIT_COLUMNS = {
    "attempt", "provider", "model", "strategy", "latency_ms", "tokens_in", "tokens_out",
    "outcome", "flags", "error_class",
}


def _audit_row(conversation_id: int, message_id: int | None, attempt: Any) -> AuditEvent:
    data = attempt.to_json_dict() if hasattr(attempt, "to_json_dict") else {}
    detail = {k: v for k, v in data.items() if k not in _AUDIT_COLUMNS}
    return AuditEvent(
        conversation_id=conversation_id,
        message_id=message_id,
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
        detail_json=json.dumps(detail, ensure_ascii=False),
    )


def _last_tutor(s: Session, conversation_id: int) -> Message | None:
    return s.exec(
        select(Message)
        .where(Message.conversation_id == conversation_id, Message.role == "tutor")
        .order_by(col(Message.seq).desc())
    ).first()


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
        select(Message.seq).where(Message.conversation_id == conversation_id).order_by(col(Message.seq).desc())
    ).first()
    return 0 if last is None else last + 1


def progress_row(s: Session, learner_id: int, module_id: str) -> ProgressRecord:
    row = s.exec(
        select(ProgressRecord).where(ProgressRecord.learner_id == learner_id, ProgressRecord.module_id == module_id)
    ).first()
    return row or ProgressRecord(learner_id=learner_id, module_id=module_id)


def load_progress(s: Session, learner_id: int, module_id: str) -> ProgressState:
    row = progress_row(s, learner_id, module_id)
    return ProgressState.from_dict(
        {"covered": json.loads(row.covered_json), "milestones": json.loads(row.milestones_json)}
    )


def open_form(last_tutor: Message | None, form_id: str) -> Form | None:
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
        states[form_id] = {"status": "submitted", "answers": answers} if form_id == submitted else {"status": "skipped"}
    last_tutor.form_states_json = json.dumps(states, ensure_ascii=False)
