"""The database half of a conversation: what is stored, and the few reads a turn needs.

Plain synchronous functions over a `Store`; the engine runs them in a worker thread so the
event loop never waits on the database. Rules kept here:

- a learner message is stored (with the forms it closes) before any model call;
- the tutor owes a reply to every learner message no reply answers (`reply_to_seq`);
- what the model reads of the past is what the learner saw, never a failed raw reply.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, bindparam, insert, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, func, select

from tutor.i18n import Phrase
from tutor.llm.base import LearnerInput
from tutor.progress import ProgressState
from tutor.render import forms
from tutor.render.forms import FormInputError, summarize_answers, validate_answers
from tutor.render.views import ConversationSummary, MessageView
from tutor.settings import MAX_MESSAGE_CHARS
from tutor.storage.statements import Statement
from tutor.storage.message_rows import StoredMessage
from tutor.storage.store import (
    Conversation,
    Learner,
    Message,
    ProgressRecord,
    Store,
    iso_utc,
    utcnow,
)


class InputError(ValueError):
    """Learner input refused before anything was stored; `message` is for the learner
    (a tutor.i18n.Phrase: English, and `localize` renders it in the conversation's language)."""

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
    duplicate: bool = False  # already stored by an earlier send with the same client id


# Marks a conversation that still waits for the tutor's opening turn.
OPENING: Any = object()


# A turn reads and writes a handful of rows; building ORM objects and statements for them
# cost more CPU than the database itself (benchmarks/load_bench.py). The hot paths below
# run these statements, built once, on a Core connection (Store.connect), and read messages as
# StoredMessage rows.
_MESSAGE, _CONVERSATION = Message.__table__, Conversation.__table__
_MESSAGE_COLUMNS = tuple(_MESSAGE.c.keys())


_GET_CONVERSATION = select(_CONVERSATION).where(_CONVERSATION.c.id == bindparam("b_conversation"))
# Run on the driver's cursor (tutor.storage.statements): every turn runs these.
_CONVERSATION_EXISTS = Statement(select(_CONVERSATION.c.id).where(_CONVERSATION.c.id == bindparam("b_conversation")))
_HISTORY = Statement(select(_MESSAGE).where(_MESSAGE.c.conversation_id == bindparam("b_conversation"))
                     .order_by(_MESSAGE.c.seq))
_LAST_MESSAGE = Statement(select(_MESSAGE).where(_MESSAGE.c.conversation_id == bindparam("b_conversation"))
                          .order_by(_MESSAGE.c.seq.desc()).limit(1))
_LAST_TUTOR = Statement(select(_MESSAGE).where(_MESSAGE.c.conversation_id == bindparam("b_conversation"),
                                               _MESSAGE.c.role == "tutor")
                        .order_by(_MESSAGE.c.seq.desc()).limit(1))
_BY_CLIENT_ID = Statement(select(_MESSAGE).where(_MESSAGE.c.conversation_id == bindparam("b_conversation"),
                                                 _MESSAGE.c.client_id == bindparam("b_client")))
_NEW_COLUMNS = tuple(k for k in _MESSAGE_COLUMNS if k != "id")
_INSERT_MESSAGE = Statement(insert(_MESSAGE).returning(_MESSAGE.c.id), keys=_NEW_COLUMNS)
_LEARNER, _PROGRESS = Learner.__table__, ProgressRecord.__table__
_LEARNER_ID = select(_LEARNER.c.id).where(_LEARNER.c.key == bindparam("b_key"))
_INSERT_LEARNER, _INSERT_CONVERSATION = insert(_LEARNER), insert(_CONVERSATION)
_ACTIVE = (select(_CONVERSATION.c.id)
           .where(_CONVERSATION.c.learner_id == bindparam("b_learner"), _CONVERSATION.c.module_id == bindparam("b_module"),
                  _CONVERSATION.c.status == "active")
           .order_by(_CONVERSATION.c.updated_at.desc()))
_ARCHIVE = update(_CONVERSATION).values(status="archived")
_RESET_PROGRESS = (update(_PROGRESS)
                   .where(_PROGRESS.c.learner_id == bindparam("b_learner"), _PROGRESS.c.module_id == bindparam("b_module"))
                   .values(covered_json="[]", milestones_json="[]", updated_at=bindparam("b_now")))
_LEARNER_PROGRESS = (
    select(_PROGRESS.c.covered_json, _PROGRESS.c.milestones_json)
    .select_from(_LEARNER.outerjoin(_PROGRESS, and_(_PROGRESS.c.learner_id == _LEARNER.c.id,
                                                    _PROGRESS.c.module_id == bindparam("b_module"))))
    .where(_LEARNER.c.key == bindparam("b_key"))
)
_CONVERSATION_STATE = (
    select(*_CONVERSATION.c, _LEARNER.c.key.label("learner_key"), _PROGRESS.c.covered_json, _PROGRESS.c.milestones_json)
    .join(_LEARNER, _LEARNER.c.id == _CONVERSATION.c.learner_id)
    .outerjoin(_PROGRESS, and_(_PROGRESS.c.learner_id == _CONVERSATION.c.learner_id,
                               _PROGRESS.c.module_id == _CONVERSATION.c.module_id))
    .where(_CONVERSATION.c.id == bindparam("b_conversation"))
)
_SET_FORM_STATES = Statement(update(_MESSAGE).where(_MESSAGE.c.id == bindparam("b_message"))
                              .values(form_states_json=bindparam("b_states")))
TOUCH_CONVERSATION = Statement(update(_CONVERSATION).where(_CONVERSATION.c.id == bindparam("b_conversation"))
                                .values(updated_at=bindparam("b_now")))


# ------------------------------------------------------------------- conversations


def find_or_create(store: Store, learner_key: str, module_id: str, new: bool) -> tuple[int, bool]:
    """The learner's active conversation in a module, or a new one (new=True archives the
    old one and resets the module's progress). Returns (id, created)."""
    with store.connect() as db:
        learner_id = db.execute(_LEARNER_ID, {"b_key": learner_key}).scalar()
        if learner_id is None:
            learner_id = db.execute(_INSERT_LEARNER, defaults_of(Learner) | {"key": learner_key}).inserted_primary_key[0]
        active = db.execute(_ACTIVE, {"b_learner": learner_id, "b_module": module_id}).scalars().all()
        if active and not new:
            return active[0], False
        if active:
            db.execute(_ARCHIVE.where(_CONVERSATION.c.id.in_(active)))
        if new:  # a missing record is empty progress already
            db.execute(_RESET_PROGRESS, {"b_learner": learner_id, "b_module": module_id, "b_now": utcnow()})
        values = defaults_of(Conversation) | {"learner_id": learner_id, "module_id": module_id}
        conversation_id = db.execute(_INSERT_CONVERSATION, values).inserted_primary_key[0]
        db.commit()
        return conversation_id, True


def get_conversation(store: Store, conversation_id: int) -> Conversation:
    with store.connect(read_only=True) as db:
        row = db.execute(_GET_CONVERSATION, {"b_conversation": conversation_id}).mappings().first()
    if row is None:
        raise InputError(Phrase("That conversation does not exist."))
    return Conversation(**row)


def learner_key(store: Store, conversation_id: int) -> str:
    """Whose conversation this is (usage limits count per learner, not per conversation)."""
    with store.session(read_only=True) as s:
        key = s.exec(select(Learner.key).join(Conversation, col(Conversation.learner_id) == Learner.id)
                     .where(Conversation.id == conversation_id)).first()
    if key is None:
        raise InputError(Phrase("That conversation does not exist."))
    return key


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
    """The learner's progress in a module (empty if none is recorded), or None for an
    unknown learner."""
    with store.connect(read_only=True) as db:
        row = db.execute(_LEARNER_PROGRESS, {"b_key": learner_key, "b_module": module_id}).first()
    return None if row is None else progress_state(row.covered_json or "[]", row.milestones_json or "[]")


def history(store: Store, conversation_id: int) -> list[MessageView]:
    with store.connect(read_only=True) as db:
        return _history(db, conversation_id)


def _history(db: Any, conversation_id: int) -> list[MessageView]:
    rows = _HISTORY.run(db, {"b_conversation": conversation_id}).rows
    return [MessageView.from_row(StoredMessage.from_tuple(r)) for r in rows]  # type: ignore[arg-type]


def conversation_state(db: Any, conversation_id: int) -> tuple[Conversation, str, ProgressState, list[MessageView]]:
    """(conversation, learner key, progress, messages) for a page that opens it, on a
    connection."""
    row = db.execute(_CONVERSATION_STATE, {"b_conversation": conversation_id}).mappings().first()
    if row is None:
        raise InputError(Phrase("That conversation does not exist."))
    conv = Conversation(**{name: row[name] for name in _CONVERSATION.c.keys()})
    state = progress_state(row["covered_json"] or "[]", row["milestones_json"] or "[]")
    messages = [MessageView.from_row(StoredMessage.from_tuple(r))  # type: ignore[arg-type]
                for r in _HISTORY.run(db, {"b_conversation": conversation_id}).rows]
    return conv, row["learner_key"], state, messages


# ------------------------------------------------------------------ learner turns


def accept(
    store: Store, conversation_id: int, learner_input: LearnerInput, client_id: str | None = None,
    language: str | None = None, admit: Callable[[], None] | None = None,
) -> PendingTurn:
    """Check the learner's input and store it. Refused input raises InputError and stores
    nothing. `client_id` (made by the browser for one send) makes this idempotent: a message
    whose id is already stored is not stored again, and the stored one comes back with
    `duplicate=True` (a double click, a retry after a reconnect, a second tab). `admit`
    (tutor.access.usage: the learner's turn limits) runs once a message is found new and valid,
    before anything is written; it may raise to store nothing."""
    client_id = _clean_client_id(client_id)
    for attempt in range(ACCEPT_TRIES):
        try:
            return _accept_once(store, conversation_id, learner_input, client_id, language, admit)
        except IntegrityError:
            # Another accept got in first: the same send (the unique index on the client id
            # decided; the lookup in the next try finds it), or another message that took
            # this seq. The turn was admitted already: it is not counted again.
            if attempt == ACCEPT_TRIES - 1:
                raise
            admit = None
    raise AssertionError("unreachable")


ACCEPT_TRIES = 5
CLIENT_ID_CHARS = 64  # Message.client_id's column size


def _clean_client_id(client_id: str | None) -> str | None:
    """The browser's id for a send, or None; one that cannot be stored is refused."""
    if client_id is None or not str(client_id).strip():
        return None
    client_id = str(client_id).strip()
    if len(client_id) > CLIENT_ID_CHARS or not client_id.isprintable():
        raise InputError(Phrase("This message could not be sent. Please reload the page and try again."))
    return client_id


def _by_client_id(db: Any, conversation_id: int, client_id: str) -> PendingTurn | None:
    rows = _BY_CLIENT_ID.run(db, {"b_conversation": conversation_id, "b_client": client_id}).rows
    if not rows:
        return None
    return dataclasses.replace(_pending_from_row(StoredMessage.from_tuple(rows[0])), duplicate=True)


def _accept_once(
    store: Store, conversation_id: int, learner_input: LearnerInput, client_id: str | None,
    language: str | None = None, admit: Callable[[], None] | None = None,
) -> PendingTurn:
    with store.connect() as db:
        if client_id is not None and (stored := _by_client_id(db, conversation_id, client_id)) is not None:
            return stored
        last = _last_message(db, conversation_id)
        if last is None and _CONVERSATION_EXISTS.run(db, {"b_conversation": conversation_id}).scalar() is None:
            raise InputError(Phrase("That conversation does not exist."))
        last_tutor = last if last is None or last.role == "tutor" else _last_tutor(db, conversation_id)
        if learner_input.is_form:
            form_id = learner_input.form_id or ""
            form = forms.open_form(last_tutor, form_id)
            if form is None:
                raise InputError(Phrase("The form {form_id!r} is not open in this conversation.", form_id=form_id))
            try:
                answers = validate_answers(form, learner_input.answers or {})
            except FormInputError as exc:
                raise InputError(exc.message, exc.field_id) from None
            text = summarize_answers(form, answers, language)
        else:
            text = (learner_input.text or "").strip()
            if not text:
                raise InputError(Phrase("Type a message first."))
            if len(text) > MAX_MESSAGE_CHARS:
                raise InputError(Phrase(
                    "That message is {length} characters long; the limit is {limit}. "
                    "Please shorten it or split it in two.", length=len(text), limit=MAX_MESSAGE_CHARS,
                ))
            answers, form_id = None, None
        if admit is not None:
            admit()  # before the first write: a refusal stores nothing (nor holds SQLite's write lock)
        if last_tutor is not None:
            before = last_tutor.form_states_json
            forms.close_forms(last_tutor, submitted=form_id, answers=answers)
            if last_tutor.form_states_json != before:
                _SET_FORM_STATES.run(db, {"b_message": last_tutor.id, "b_states": last_tutor.form_states_json})
        row = new_message(
            db,
            conversation_id=conversation_id,
            seq=0 if last is None else last.seq + 1,
            role="learner",
            text=text,
            form_id=form_id,
            answers_json=json.dumps(answers, ensure_ascii=False) if answers else None,
            client_id=client_id,
        )
        TOUCH_CONVERSATION.run(db, {"b_conversation": conversation_id, "b_now": utcnow()})
        db.commit()
        return _pending_from_row(row)


def skip_form(store: Store, conversation_id: int, form_id: str) -> bool:
    """The learner chose not to answer an open form (it stays on the page as skipped)."""
    with store.connect() as db:
        last_tutor = _last_tutor(db, conversation_id)
        if last_tutor is None or forms.open_form(last_tutor, form_id) is None:
            return False
        states = last_tutor.form_states
        states[form_id] = {"status": "skipped"}
        _SET_FORM_STATES.run(db, {"b_message": last_tutor.id, "b_states": json.dumps(states, ensure_ascii=False)})
        db.commit()
        return True


def read_messages(db: Any, conversation_id: int) -> list[StoredMessage]:
    """Every message of the conversation in order, on a connection."""
    return [StoredMessage.from_tuple(row) for row in _HISTORY.run(db, {"b_conversation": conversation_id}).rows]


def owed_in(messages: list[StoredMessage]) -> PendingTurn | None:
    """What the conversation is owed, from its messages in order (read_messages): the
    oldest learner message no reply answers yet (a learner may send again while the tutor
    is still answering), OPENING for a conversation with no messages, or None."""
    if not messages:
        return OPENING
    seq = first_unanswered((m.seq, m.role, m.reply_to_seq) for m in messages)
    return None if seq is None else _pending_from_row(next(m for m in messages if m.seq == seq))


def first_unanswered(rows: Iterable[tuple[int, str, int | None]]) -> int | None:
    """The seq of the oldest learner message no reply answers, from (seq, role,
    reply_to_seq) rows in order."""
    rows = list(rows)
    answered = {reply_to for _, role, reply_to in rows if role == "tutor"}
    return next((seq for seq, role, _ in rows if role == "learner" and seq not in answered), None)


# ------------------------------------------------------------------------ helpers

def defaults_of(model: Any) -> dict[str, Any]:
    """A table model's field defaults (its factories called), as a new row would have them."""
    return {name: field.default_factory() if field.default_factory is not None else field.default
            for name, field in model.model_fields.items()
            if name != "id" and (field.default_factory is not None or not field.is_required())}


def new_message(db: Any, **values: Any) -> StoredMessage:
    """Insert a message (model defaults for what is not given) and return it as stored."""
    values = defaults_of(Message) | values
    values["id"] = _INSERT_MESSAGE.run(db, values).scalar()
    return StoredMessage(values)


def _last_message(db: Any, conversation_id: int) -> StoredMessage | None:
    rows = _LAST_MESSAGE.run(db, {"b_conversation": conversation_id}).rows
    return StoredMessage.from_tuple(rows[0]) if rows else None


def _last_tutor(db: Any, conversation_id: int) -> StoredMessage | None:
    rows = _LAST_TUTOR.run(db, {"b_conversation": conversation_id}).rows
    return StoredMessage.from_tuple(rows[0]) if rows else None


def _pending_from_row(row: Message | StoredMessage) -> PendingTurn:
    if row.form_id is not None:
        answers = row.answers or {}
        learner_input = LearnerInput(form_id=row.form_id, answers=answers)
        prompt_text = f"{row.text}\n\n(form {row.form_id} answers: {json.dumps(answers)})"
    else:
        learner_input = LearnerInput(text=row.text)
        prompt_text = row.text
    return PendingTurn(row.conversation_id, MessageView.from_row(row), learner_input, prompt_text)  # type: ignore[arg-type]


def progress_state(covered_json: str, milestones_json: str) -> ProgressState:
    return ProgressState.from_dict({"covered": json.loads(covered_json), "milestones": json.loads(milestones_json)})
