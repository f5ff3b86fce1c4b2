"""The database half of a tutor turn: what the model reads of the past, and the reply
stored with everything that belongs to it — one audit row per model call, the learner's
progress, the safety screen's flags and the judged answers — in one transaction.

Plain synchronous functions over a `Store`, run by the engine in a worker thread, with
statements built once (see tutor.turns.conversations).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, and_, bindparam, insert, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import func, select

from tutor.content.modules import Module
from tutor.contract import TutorResponse
from tutor.llm.base import ChatMessage
from tutor.llm.redact import scrub, scrub_data
from tutor.progress import ProgressState
from tutor.render.views import MessageView
from tutor.risk.turn import FAILED_LABEL, TurnScreen
from tutor.storage.message_rows import StoredMessage
from tutor.storage.statements import Statement
from tutor.storage.store import (
    AuditEvent,
    CheckAttempt,
    Conversation,
    Message,
    ProgressRecord,
    RiskEvent,
    Store,
    utcnow,
)
from tutor.teach import mastery
from tutor.turns import claims, conversations
from tutor.turns.conversations import (
    OPENING,
    TOUCH_CONVERSATION,
    PendingTurn,
    defaults_of,
    progress_state,
)
from tutor.turns.fallback_lesson import FALLBACK_FLAG

__all__ = ["LESSON_STAND_IN", "SAFETY_PAUSE", "UNSHOWN_REPLY", "TurnInputs", "TurnStart", "begin", "model_memory",
           "risk_rows", "store_reply", "turn_inputs", "turn_reads", "view_state"]

# What the model reads in place of a reply that could not be shown as a lesson: short,
# honest, and in the shape the model is asked to write.
SAFETY_PAUSE = json.dumps(
    {"content": {"text_blocks": [{"type": "paragraph", "content": (
        "(The lesson paused here: the app showed the learner its own safety message with support "
        "resources. Do not repeat it; be warm and follow the learner's lead.)")}]},
     "meta": {"response_type": "conversational"}}
)
UNSHOWN_REPLY = json.dumps(
    {"content": {"text_blocks": [{"type": "paragraph", "content": "(My previous reply could not be shown.)"}]},
     "meta": {"response_type": "error"}}
)
LESSON_STAND_IN = json.dumps(
    {"content": {"text_blocks": [{"type": "paragraph", "content": (
        "(My previous reply could not be shown, so the app answered the learner from the module's own material "
        "instead; the topics it covered are marked in the module context. Carry on from there.)")}]},
     "meta": {"response_type": "conversational"}}
)

_MESSAGE, _CONVERSATION = Message.__table__, Conversation.__table__
# Run on the driver's cursor (tutor.storage.statements), as tutor.turns.conversations runs its own.
# A reply's row, numbered in its INSERT: the conversation's next seq (no read before it).
_INSERT_REPLY = Statement(insert(_MESSAGE)
                          .values(seq=select(func.coalesce(func.max(_MESSAGE.c.seq), -1) + 1)
                                  .where(_MESSAGE.c.conversation_id == bindparam("b_conversation")).scalar_subquery())
                          .returning(_MESSAGE.c.id, _MESSAGE.c.seq),
                          keys=[k for k in _MESSAGE.c.keys() if k not in ("id", "seq")])
_MEMORY = (select(_MESSAGE.c.seq, _MESSAGE.c.role, _MESSAGE.c.text, _MESSAGE.c.reply_to_seq, _MESSAGE.c.parsed_json,
                  _MESSAGE.c.flags_json, _MESSAGE.c.outcome)
           .where(_MESSAGE.c.conversation_id == bindparam("b_conversation")).order_by(_MESSAGE.c.seq))
_PROGRESS, _AUDIT = ProgressRecord.__table__, AuditEvent.__table__
# A turn's conversation row, the learner's progress in the module, and the tokens spent.
_TURN_STATE = Statement(
    select(*_CONVERSATION.c, _PROGRESS.c.covered_json.label("covered"), _PROGRESS.c.milestones_json.label("milestones"),
           select(func.coalesce(func.sum(_AUDIT.c.tokens_in + _AUDIT.c.tokens_out), 0))
           .where(_AUDIT.c.conversation_id == _CONVERSATION.c.id).scalar_subquery().label("tokens"))
    .outerjoin(_PROGRESS, and_(_PROGRESS.c.learner_id == _CONVERSATION.c.learner_id,
                               _PROGRESS.c.module_id == _CONVERSATION.c.module_id))
    .where(_CONVERSATION.c.id == bindparam("b_conversation"))
)
_INSERT_AUDIT = Statement(insert(_AUDIT), keys=[k for k in _AUDIT.c.keys() if k != "id"])
_SET_PROGRESS = Statement(update(_PROGRESS)
                          .where(_PROGRESS.c.learner_id == bindparam("b_learner"),
                                 _PROGRESS.c.module_id == bindparam("b_module"))
                          .values(covered_json=bindparam("b_covered"), milestones_json=bindparam("b_milestones"),
                                  updated_at=bindparam("b_now")))
_INSERT_PROGRESS = insert(ProgressRecord.__table__)
_INSERT_RISK, _INSERT_CHECK = insert(RiskEvent.__table__), insert(CheckAttempt.__table__)


@dataclass(frozen=True)
class TurnInputs:
    conversation: Conversation
    progress: ProgressState
    history: list[ChatMessage]  # what the model reads of the past
    turn_index: int
    tokens_used: int  # by this conversation so far (budgets)


def turn_inputs(store: Store, conversation_id: int, upto: int | None) -> TurnInputs:
    """Everything said before learner message `upto` (and replies to earlier messages that
    were stored after it); never that message or later learner messages."""
    with store.connect(read_only=True) as db:
        found = _turn_state(db, conversation_id)
        rows = db.execute(_MEMORY, {"b_conversation": conversation_id}).all()
    return _inputs(found, rows, upto)


def _turn_state(db: Any, conversation_id: int) -> Any:
    found = _TURN_STATE.run(db, {"b_conversation": conversation_id}).first()
    assert found is not None
    return found


def _inputs(found: Any, rows: Iterable[Any], upto: int | None) -> TurnInputs:
    """TurnInputs from the turn's state row and the conversation's messages in order
    (rows with seq, role, text, reply_to_seq, parsed_json and flags_json)."""
    conv = Conversation(**{name: found[name] for name in _CONVERSATION.c.keys()})
    before = progress_state(found["covered"] or "[]", found["milestones"] or "[]")
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
    `parsed_json`, `flags_json` and `outcome`): the reply as the learner saw it (compact
    JSON), or a one-line stand-in — the one place that decides which words the model is
    told it wrote. Stand-ins replace:

    - raw text that could not be shown: read back word for word it costs hundreds of tokens
      and teaches the model its mistake;
    - the author's safety replies, the app's apologies (a reply that failed closed, took too
      long, was stopped before any text, or met our own error) and the built-in tutor's
      lesson given in a model's place: none are the model's words, and read back as its
      own, a small model copies them onto the next turns (after a server restart, the two
      turns that followed repeated the apology). An `invalid` outcome never carries the
      model's structure (tutor.contract.parse), so whatever was shown for it is the app's."""
    flags = row.flags_json or ""
    if '"risk:' in flags:
        return SAFETY_PAUSE
    if f'"{FALLBACK_FLAG}"' in flags:
        return LESSON_STAND_IN
    if row.parsed_json and row.outcome != "invalid":
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
    guard: Callable[[Connection], None] | None = None,
    checks: Iterable[dict[str, Any]] = (),
    typed_answer: tuple[str, int | None] | None = None,
) -> MessageView:
    """The tutor's reply, one audit row per model call, the learner's progress, the
    safety screen's flags for review and the judged answers (CheckAttempt fields, plain
    data), in one transaction; a check answered in the message box (`typed_answer`: its form
    id and score) shows as answered, with its score, in the message that asked it. `guard` runs first in that transaction and may raise to
    store nothing (tutor.turns.claims.release: the reply claim). The reply takes the next seq in
    its own INSERT; a learner message stored at the same moment with that seq (PostgreSQL
    runs both at once) makes the transaction try again."""
    risks, checks = list(risks), list(checks)
    for attempt in range(STORE_TRIES):
        try:
            return _store_reply_once(store, conv, module_id, raw, shown, outcome, flags, attempts, state,
                                     reply_to_seq, risks, guard, checks, typed_answer)
        except IntegrityError:
            if attempt == STORE_TRIES - 1:
                raise
    raise AssertionError("unreachable")


STORE_TRIES = 5


def _store_reply_once(store: Store, conv: Conversation, module_id: str, raw: str, shown: TutorResponse | None,
                      outcome: str, flags: list[str], attempts: list[Any], state: ProgressState,
                      reply_to_seq: int | None, risks: list[RiskEvent], guard: Callable[[Connection], None] | None,
                      checks: list[dict[str, Any]], typed_answer: tuple[str, int | None] | None) -> MessageView:
    forms = (shown.content.forms or []) if shown else []
    conversation_id = conv.id or 0
    with store.connect() as db:
        if guard is not None:
            guard(db)
        values = defaults_of(Message) | dict(
            conversation_id=conversation_id,
            role="tutor",
            raw=raw,
            parsed_json=json.dumps(shown.to_json_dict(), ensure_ascii=False) if shown else None,
            outcome=outcome,
            flags_json=json.dumps(flags),
            form_states_json=json.dumps({f.id: {"status": "open"} for f in forms}),
            reply_to_seq=reply_to_seq,
        )
        values["id"], values["seq"] = _INSERT_REPLY.run(db, values | {"b_conversation": conversation_id}).rows[0]
        row = StoredMessage(values)
        if attempts:
            _INSERT_AUDIT.run_many(db, [_audit_values(conversation_id, row.id, a) for a in attempts])
        flagged = [risk.model_dump(exclude={"id"}) | {"reply_id": row.id} for risk in risks]
        if flagged:
            db.execute(_INSERT_RISK, flagged)
        judged = [CheckAttempt(**check, reply_id=row.id).model_dump(exclude={"id"}) for check in checks]
        if judged:
            db.execute(_INSERT_CHECK, judged)
        if typed_answer is not None and reply_to_seq is not None:
            _mark_answered(db, conversation_id, reply_to_seq, *typed_answer)
        payload = state.to_dict()
        covered, milestones = json.dumps(list(payload["covered"])), json.dumps(list(payload["milestones"]))
        now = utcnow()
        if not _SET_PROGRESS.run(db, {"b_learner": conv.learner_id, "b_module": module_id, "b_covered": covered,
                                      "b_milestones": milestones, "b_now": now}).rowcount:
            db.execute(_INSERT_PROGRESS, {"learner_id": conv.learner_id, "module_id": module_id,
                                          "covered_json": covered, "milestones_json": milestones, "updated_at": now})
        TOUCH_CONVERSATION.run(db, {"b_conversation": conversation_id, "b_now": utcnow()})
        db.commit()
        return MessageView.from_row(row)  # type: ignore[arg-type]


def _mark_answered(db: Connection, conversation_id: int, before_seq: int, form_id: str, score: int | None) -> None:
    """The check form a typed answer answered: in the tutor's latest message before it, the
    form reads answered (with the score) instead of the "skipped" the send closed it with."""
    asking = db.execute(select(_MESSAGE.c.id, _MESSAGE.c.form_states_json)
                        .where(_MESSAGE.c.conversation_id == conversation_id, _MESSAGE.c.role == "tutor",
                               _MESSAGE.c.seq < before_seq)
                        .order_by(_MESSAGE.c.seq.desc()).limit(1)).first()
    states = json.loads(asking.form_states_json or "{}") if asking is not None else {}
    if form_id not in states:
        return
    states[form_id] = {"status": "answered", "score": score}
    db.execute(update(_MESSAGE).where(_MESSAGE.c.id == asking.id)
               .values(form_states_json=json.dumps(states, ensure_ascii=False)))


_AUDIT_COLUMNS = {
    "attempt", "provider", "model", "strategy", "latency_ms", "tokens_in", "tokens_out",
    "outcome", "flags", "error_class",
}


def _audit_values(conversation_id: int, message_id: int | None, attempt: Any) -> dict[str, Any]:
    data = attempt.to_json_dict() if hasattr(attempt, "to_json_dict") else {}
    # Error text may quote what an endpoint sent back (a 401 echoing the key): scrubbed here,
    # the one way into the audit table, whatever the caller already did.
    detail = scrub_data({k: v for k, v in data.items() if k not in _AUDIT_COLUMNS})
    return defaults_of(AuditEvent) | dict(
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


def turn_reads(store: Store, conversation_id: int, upto: int | None):
    """A turn's reads in one database trip: what the model reads, and the checks so far."""
    return turn_inputs(store, conversation_id, upto), mastery.read_history(store, conversation_id, upto)


@dataclass(frozen=True)
class TurnStart:
    """What `begin` found: the message owed (a PendingTurn, OPENING, or None when nothing
    is), its module, whether its claim is ours, the id of a reply already stored for it,
    and, when the claim is ours, the turn's reads (turn_reads), good while it is held."""
    pending: Any
    module_id: str = ""
    got: bool = False
    stored: int | None = None
    reads: tuple[TurnInputs, mastery.CheckHistory] | None = None


def begin(store: Store, conversation_id: int, lease_s: float, holder: str) -> TurnStart:
    """A turn's first trip to the database's threads: what is owed (the oldest unanswered
    learner message, or the opening), its reply claim (claims.claim_or_answered) and what
    the model reads (turn_reads). One trip and five statements where three trips took ten:
    at 200 learners the hand-overs to a thread and the statements cost more CPU than the
    rest of the turn. The reads come before the claim: whatever is stored meanwhile comes
    with a reply to this very message, which the claim's own check finds. One connection
    for both (on PostgreSQL the reads join the claim's transaction: no round trip more)."""
    with store.connect() as db:
        messages = conversations.read_messages(db, conversation_id)
        found = _turn_state(db, conversation_id)
        scored = mastery.read_scores(db, conversation_id)
        pending = conversations.owed_in(messages)
        if pending is None:
            return TurnStart(None)
        seq = claims.OPENING_SEQ if pending is OPENING else pending.learner.seq
        got, stored = claims.claim_or_answered_on(db, conversation_id, seq, lease_s, holder)
    if not got:
        return TurnStart(pending, found["module_id"], got, stored)
    upto = None if pending is OPENING else seq
    checks = mastery.check_history(((m.seq, m.form_states_json) for m in messages if m.role == "tutor"), scored, upto)
    return TurnStart(pending, found["module_id"], got, stored, (_inputs(found, messages, upto), checks))


def view_state(store: Store, conversation_id: int) -> tuple[Conversation, str, ProgressState, list[MessageView],
                                                             list[tuple[str, int | None]]]:
    """A page's view of a conversation on one connection: conversations.conversation_state
    and the judged scores (mastery)."""
    with store.connect(read_only=True) as db:
        return (*conversations.conversation_state(db, conversation_id), mastery.read_scores(db, conversation_id))


def risk_rows(pending: PendingTurn, module: Module, screened: TurnScreen) -> list[RiskEvent]:
    """The screen's flags for the review list (low-confidence model flags included), and a
    row saying the screen failed closed."""
    rows = [
        RiskEvent(conversation_id=pending.conversation_id, message_id=pending.learner.id, module_id=module.id,
                  label=f.flag.label, confidence=f.flag.confidence, source=f.flag.source,
                  severity=f.flag.severity, evidence_json=json.dumps(f.evidence_dicts()))
        for f in screened.flags
    ]
    if screened.failed:
        rows.append(RiskEvent(conversation_id=pending.conversation_id, message_id=pending.learner.id,
                              module_id=module.id, label=FAILED_LABEL, source="model"))
    return rows
