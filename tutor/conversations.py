"""The database half of a conversation: what is stored, and the few reads a turn needs.

Plain synchronous functions over a `Store`; the engine runs them in a worker thread so the
event loop never waits on the database. Rules kept here:

- a learner message is stored (with the forms it closes) before any model call;
- the tutor owes a reply to every learner message no reply answers (`reply_to_seq`);
- what the model reads of the past is what the learner saw, never a failed raw reply.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, bindparam, insert, update
from sqlmodel import Session, col, func, select

from tutor.contract import Form, TutorResponse
from tutor.forms import FormInputError, summarize_answers, validate_answers
from tutor.llm.base import ChatMessage, LearnerInput
from tutor.llm.errors import scrub, scrub_data
from tutor.progress import ProgressState
from tutor.settings import MAX_MESSAGE_CHARS
from tutor.store import (
    AuditEvent, CheckAttempt, Conversation, Learner, Message, ProgressRecord, RiskEvent, Store, iso_utc, utcnow,
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


# A turn reads and writes a handful of rows; building ORM objects and statements for them
# cost more CPU than the database itself (benchmarks/load_bench.py). The hot paths below
# run these statements, built once, on the session's connection, and read messages as
# StoredMessage rows.
_MESSAGE, _CONVERSATION = Message.__table__, Conversation.__table__
_MESSAGE_COLUMNS = tuple(_MESSAGE.c.keys())


class StoredMessage:
    """One stored message as a plain row: Message's columns and its JSON readers."""

    __slots__ = _MESSAGE_COLUMNS
    flags, parsed, answers, form_states = Message.flags, Message.parsed, Message.answers, Message.form_states

    def __init__(self, values: Any) -> None:
        for name in _MESSAGE_COLUMNS:
            setattr(self, name, values[name])


_GET_CONVERSATION = select(_CONVERSATION).where(_CONVERSATION.c.id == bindparam("b_conversation"))
_CONVERSATION_EXISTS = select(_CONVERSATION.c.id).where(_CONVERSATION.c.id == bindparam("b_conversation"))
_HISTORY = (select(_MESSAGE).where(_MESSAGE.c.conversation_id == bindparam("b_conversation"))
            .order_by(_MESSAGE.c.seq))
_LAST_MESSAGE = (select(_MESSAGE).where(_MESSAGE.c.conversation_id == bindparam("b_conversation"))
                 .order_by(_MESSAGE.c.seq.desc()).limit(1))
_LAST_TUTOR = (select(_MESSAGE).where(_MESSAGE.c.conversation_id == bindparam("b_conversation"),
                                      _MESSAGE.c.role == "tutor")
               .order_by(_MESSAGE.c.seq.desc()).limit(1))
_LAST_SEQ = select(func.max(_MESSAGE.c.seq)).where(_MESSAGE.c.conversation_id == bindparam("b_conversation"))
_ANSWERING = (select(_MESSAGE.c.seq, _MESSAGE.c.role, _MESSAGE.c.reply_to_seq)
              .where(_MESSAGE.c.conversation_id == bindparam("b_conversation")).order_by(_MESSAGE.c.seq))
_MESSAGE_AT = select(_MESSAGE).where(_MESSAGE.c.conversation_id == bindparam("b_conversation"),
                                     _MESSAGE.c.seq == bindparam("b_seq"))
_MEMORY = (select(_MESSAGE.c.seq, _MESSAGE.c.role, _MESSAGE.c.text, _MESSAGE.c.reply_to_seq, _MESSAGE.c.parsed_json)
           .where(_MESSAGE.c.conversation_id == bindparam("b_conversation")).order_by(_MESSAGE.c.seq))
_INSERT_MESSAGE = insert(_MESSAGE)
_PROGRESS, _AUDIT = ProgressRecord.__table__, AuditEvent.__table__
# A turn's conversation row, the learner's progress in the module, and the tokens spent.
_TURN_STATE = (
    select(*_CONVERSATION.c, _PROGRESS.c.covered_json.label("covered"), _PROGRESS.c.milestones_json.label("milestones"),
           select(func.coalesce(func.sum(_AUDIT.c.tokens_in + _AUDIT.c.tokens_out), 0))
           .where(_AUDIT.c.conversation_id == _CONVERSATION.c.id).scalar_subquery().label("tokens"))
    .outerjoin(_PROGRESS, and_(_PROGRESS.c.learner_id == _CONVERSATION.c.learner_id,
                               _PROGRESS.c.module_id == bindparam("b_module")))
    .where(_CONVERSATION.c.id == bindparam("b_conversation"))
)
_SET_FORM_STATES = (update(_MESSAGE).where(_MESSAGE.c.id == bindparam("b_message"))
                    .values(form_states_json=bindparam("b_states")))
_TOUCH_CONVERSATION = (update(_CONVERSATION).where(_CONVERSATION.c.id == bindparam("b_conversation"))
                       .values(updated_at=bindparam("b_now")))
_INSERT_AUDIT = insert(AuditEvent.__table__)
_SET_PROGRESS = (update(ProgressRecord.__table__)
                 .where(ProgressRecord.__table__.c.learner_id == bindparam("b_learner"),
                        ProgressRecord.__table__.c.module_id == bindparam("b_module"))
                 .values(covered_json=bindparam("b_covered"), milestones_json=bindparam("b_milestones"),
                         updated_at=bindparam("b_now")))
_INSERT_PROGRESS = insert(ProgressRecord.__table__)


# ------------------------------------------------------------------- conversations


def find_or_create(store: Store, learner_key: str, module_id: str, new: bool) -> tuple[int, bool]:
    """The learner's active conversation in a module, or a new one (new=True archives the
    old one and resets the module's progress). Returns (id, created)."""
    with store.session() as s:
        learner = s.exec(select(Learner).where(Learner.key == learner_key)).first()
        if learner is None:
            learner = Learner(key=learner_key)
            s.add(learner)
            s.commit()  # its id is known from the insert (expire_on_commit=False): no read back
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
        return conv.id or 0, True


def get_conversation(store: Store, conversation_id: int) -> Conversation:
    with store.session(read_only=True) as s:
        row = s.connection().execute(_GET_CONVERSATION, {"b_conversation": conversation_id}).mappings().first()
    if row is None:
        raise InputError("That conversation does not exist.")
    return Conversation(**row)


def summaries(store: Store, learner_key: str) -> list[ConversationSummary]:
    with store.session(read_only=True) as s:
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
    with store.session(read_only=True) as s:
        learner = s.exec(select(Learner).where(Learner.key == learner_key)).first()
        return None if learner is None else load_progress(s, learner.id or 0, module_id)


def history(store: Store, conversation_id: int) -> list[MessageView]:
    with store.session(read_only=True) as s:
        return _history(s, conversation_id)


def _history(s: Session, conversation_id: int) -> list[MessageView]:
    rows = s.connection().execute(_HISTORY, {"b_conversation": conversation_id}).mappings()
    return [MessageView.from_row(StoredMessage(r)) for r in rows]  # type: ignore[arg-type]


def conversation_state(store: Store, conversation_id: int) -> tuple[Conversation, str, ProgressState, list[MessageView]]:
    """(conversation, learner key, progress, messages) for a page that opens it."""
    with store.session(read_only=True) as s:
        conv = s.get(Conversation, conversation_id)
        if conv is None:
            raise InputError("That conversation does not exist.")
        learner = s.get(Learner, conv.learner_id)
        state = load_progress(s, conv.learner_id, conv.module_id)
        messages = _history(s, conversation_id)
    return conv, (learner.key if learner else ""), state, messages


# ------------------------------------------------------------------ learner turns


def accept(store: Store, conversation_id: int, learner_input: LearnerInput) -> PendingTurn:
    """Check the learner's input and store it. Refused input raises InputError and stores
    nothing."""
    with store.session() as s:
        db = s.connection()
        last = _last_message(s, conversation_id)
        if last is None and db.execute(_CONVERSATION_EXISTS, {"b_conversation": conversation_id}).first() is None:
            raise InputError("That conversation does not exist.")
        last_tutor = last if last is None or last.role == "tutor" else _last_tutor(s, conversation_id)
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
            before = last_tutor.form_states_json
            _close_forms(last_tutor, submitted=form_id, answers=answers)
            if last_tutor.form_states_json != before:
                db.execute(_SET_FORM_STATES, {"b_message": last_tutor.id, "b_states": last_tutor.form_states_json})
        row = _new_message(
            db,
            conversation_id=conversation_id,
            seq=0 if last is None else last.seq + 1,
            role="learner",
            text=text,
            form_id=form_id,
            answers_json=json.dumps(answers, ensure_ascii=False) if answers else None,
        )
        db.execute(_TOUCH_CONVERSATION, {"b_conversation": conversation_id, "b_now": utcnow()})
        s.commit()
        return _pending_from_row(row)


def skip_form(store: Store, conversation_id: int, form_id: str) -> bool:
    """The learner chose not to answer an open form (it stays on the page as skipped)."""
    with store.session() as s:
        last_tutor = _last_tutor(s, conversation_id)
        if last_tutor is None or open_form(last_tutor, form_id) is None:
            return False
        states = last_tutor.form_states
        states[form_id] = {"status": "skipped"}
        s.connection().execute(_SET_FORM_STATES, {"b_message": last_tutor.id,
                                                  "b_states": json.dumps(states, ensure_ascii=False)})
        s.commit()
        return True


def pending(store: Store, conversation_id: int) -> PendingTurn | None:
    """The oldest learner message no reply answers yet (a learner may send again while
    the tutor is still answering), OPENING for a conversation with no messages, or None."""
    with store.session(read_only=True) as s:
        db = s.connection()
        rows = db.execute(_ANSWERING, {"b_conversation": conversation_id}).all()
        if not rows:
            return OPENING
        seq = first_unanswered(rows)
        if seq is None:
            return None
        row = db.execute(_MESSAGE_AT, {"b_conversation": conversation_id, "b_seq": seq}).mappings().one()
        return _pending_from_row(StoredMessage(row))


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
    with store.session(read_only=True) as s:
        db = s.connection()
        found = db.execute(_TURN_STATE, {"b_conversation": conversation_id, "b_module": module_id}).mappings().first()
        assert found is not None
        rows = db.execute(_MEMORY, {"b_conversation": conversation_id}).all()
    conv = Conversation(**{name: found[name] for name in _CONVERSATION.c.keys()})
    before = _progress_state(found["covered"] or "[]", found["milestones"] or "[]")
    tokens_used = found["tokens"]
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


def model_memory(row: Any) -> str:
    """What the model reads of one of its past replies (a Message, or a row with its
    `parsed_json`): the reply as the learner saw it (compact JSON), or a one-line stand-in
    for raw text that could not be shown — a failed reply read back word for word costs
    hundreds of tokens and teaches the model its mistake."""
    if row.parsed_json:
        return _compact(row.parsed_json)
    return UNSHOWN_REPLY


@functools.lru_cache(maxsize=4096)
def _compact(parsed_json: str) -> str:
    # Stored replies never change, and every turn reads them all again.
    return json.dumps(json.loads(parsed_json), ensure_ascii=False, separators=(",", ":"))


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
    checks: Iterable[dict[str, Any]] = (),
) -> MessageView:
    """The tutor's reply, one audit row per model call, the learner's progress, the
    safety screen's flags for review and the judged answers (CheckAttempt fields, plain
    data), in one transaction. `guard` runs first in that
    transaction and may raise to store nothing (tutor.claims.release: the reply claim)."""
    forms = (shown.content.forms or []) if shown else []
    conversation_id = conv.id or 0
    with store.session() as s:
        if guard is not None:
            guard(s)
        db = s.connection()
        last_seq = db.execute(_LAST_SEQ, {"b_conversation": conversation_id}).scalar()
        row = _new_message(
            db,
            conversation_id=conversation_id,
            seq=0 if last_seq is None else last_seq + 1,
            role="tutor",
            raw=raw,
            parsed_json=json.dumps(shown.to_json_dict(), ensure_ascii=False) if shown else None,
            outcome=outcome,
            flags_json=json.dumps(flags),
            form_states_json=json.dumps({f.id: {"status": "open"} for f in forms}),
            reply_to_seq=reply_to_seq,
        )
        if attempts:
            db.execute(_INSERT_AUDIT, [_audit_values(conversation_id, row.id, a) for a in attempts])
        for risk in risks:
            risk.reply_id = row.id
            s.add(risk)
        for judged in checks:
            s.add(CheckAttempt(**judged, reply_id=row.id))
        payload = state.to_dict()
        covered, milestones = json.dumps(list(payload["covered"])), json.dumps(list(payload["milestones"]))
        now = utcnow()
        if not db.execute(_SET_PROGRESS, {"b_learner": conv.learner_id, "b_module": module_id, "b_covered": covered,
                                          "b_milestones": milestones, "b_now": now}).rowcount:
            db.execute(_INSERT_PROGRESS, {"learner_id": conv.learner_id, "module_id": module_id,
                                          "covered_json": covered, "milestones_json": milestones, "updated_at": now})
        db.execute(_TOUCH_CONVERSATION, {"b_conversation": conversation_id, "b_now": utcnow()})
        s.commit()
        return MessageView.from_row(row)  # type: ignore[arg-type]


# ------------------------------------------------------------------------ helpers

_AUDIT_COLUMNS = {
    "attempt", "provider", "model", "strategy", "latency_ms", "tokens_in", "tokens_out",
    "outcome", "flags", "error_class",
}


def _audit_values(conversation_id: int, message_id: int | None, attempt: Any) -> dict[str, Any]:
    data = attempt.to_json_dict() if hasattr(attempt, "to_json_dict") else {}
    # Error text may quote what an endpoint sent back (a 401 echoing the key): scrubbed here,
    # the one way into the audit table, whatever the caller already did.
    detail = scrub_data({k: v for k, v in data.items() if k not in _AUDIT_COLUMNS})
    return _defaults(AuditEvent) | dict(
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
        error_class=scrub(attempt.error_class) if attempt.error_class else attempt.error_class,
        detail_json=json.dumps(detail, ensure_ascii=False),
    )


def _defaults(model: Any) -> dict[str, Any]:
    """A table model's field defaults (its factories called), as a new row would have them."""
    return {name: field.default_factory() if field.default_factory is not None else field.default
            for name, field in model.model_fields.items()
            if name != "id" and (field.default_factory is not None or not field.is_required())}


def _new_message(db: Any, **values: Any) -> StoredMessage:
    """Insert a message (model defaults for what is not given) and return it as stored."""
    values = _defaults(Message) | values
    inserted = db.execute(_INSERT_MESSAGE, {k: v for k, v in values.items() if k != "id"})
    values["id"] = inserted.inserted_primary_key[0]  # RETURNING on PostgreSQL, lastrowid on SQLite
    return StoredMessage(values)


def _last_message(s: Session, conversation_id: int) -> StoredMessage | None:
    row = s.connection().execute(_LAST_MESSAGE, {"b_conversation": conversation_id}).mappings().first()
    return None if row is None else StoredMessage(row)


def _last_tutor(s: Session, conversation_id: int) -> StoredMessage | None:
    row = s.connection().execute(_LAST_TUTOR, {"b_conversation": conversation_id}).mappings().first()
    return None if row is None else StoredMessage(row)


def _pending_from_row(row: Message | StoredMessage) -> PendingTurn:
    if row.form_id is not None:
        answers = row.answers or {}
        learner_input = LearnerInput(form_id=row.form_id, answers=answers)
        prompt_text = f"{row.text}\n\n(form {row.form_id} answers: {json.dumps(answers)})"
    else:
        learner_input = LearnerInput(text=row.text)
        prompt_text = row.text
    return PendingTurn(row.conversation_id, MessageView.from_row(row), learner_input, prompt_text)  # type: ignore[arg-type]


def progress_row(s: Session, learner_id: int, module_id: str) -> ProgressRecord:
    row = s.exec(
        select(ProgressRecord).where(ProgressRecord.learner_id == learner_id, ProgressRecord.module_id == module_id)
    ).first()
    return row or ProgressRecord(learner_id=learner_id, module_id=module_id)


def load_progress(s: Session, learner_id: int, module_id: str) -> ProgressState:
    row = progress_row(s, learner_id, module_id)
    return _progress_state(row.covered_json, row.milestones_json)


def _progress_state(covered_json: str, milestones_json: str) -> ProgressState:
    return ProgressState.from_dict({"covered": json.loads(covered_json), "milestones": json.loads(milestones_json)})


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
