"""Mastery as the database records it: which checks a conversation's tutor messages asked
(and which one the learner is answering), every judged score in order, and the topics
those scores master, read from the judged attempts of one conversation (Start over
begins mastery again; checks an author has since removed do not count). tutor.teach.teaching
plans the turn with it; the engine and the operator console read it."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import bindparam
from sqlmodel import col, select

from tutor.content.modules import Module
from tutor.progress import ProgressState
from tutor.storage.statements import Statement
from tutor.storage.store import CheckAttempt, Conversation, Learner, Message, Store
from tutor.teach.feedback import check_id_of

__all__ = [
    "CheckHistory", "check_history", "learner_state", "mastered_from", "read_history", "read_scores",
    "with_mastery", "with_scores",
]

@dataclass(frozen=True)
class CheckHistory:
    """A conversation's checks: which the tutor asked (check id -> seq of the latest
    message asking it), which it asked in the message the learner is answering, and every
    judged score in order."""

    asked: dict[str, int] = field(default_factory=dict)
    last_asked: str | None = None
    scored: tuple[tuple[str, int | None], ...] = ()

    def best(self, check_id: str) -> int:
        return max((s for c, s in self.scored if c == check_id and s is not None), default=-1)

    def with_score(self, check_id: str, score: int | None) -> CheckHistory:
        return replace(self, scored=(*self.scored, (check_id, score)))


# Built once: read on every turn (see tutor.turns.conversations on hot statements).
_TUTOR_FORMS = (select(Message.seq, Message.form_states_json)
                .where(Message.conversation_id == bindparam("b_conv"), Message.role == "tutor")
                .order_by(col(Message.seq)))
# Read on every turn: run on the driver's cursor (tutor.storage.statements).
_SCORED = Statement(select(CheckAttempt.check_id, CheckAttempt.score)
                    .where(CheckAttempt.conversation_id == bindparam("b_conv")).order_by(col(CheckAttempt.id)))


def read_history(store: Store, conversation_id: int, upto: int | None) -> CheckHistory:
    with store.connect(read_only=True) as db:
        tutor_rows = db.execute(_TUTOR_FORMS, {"b_conv": conversation_id}).all()
        scored = _SCORED.run(db, {"b_conv": conversation_id}).rows
    return check_history(tutor_rows, scored, upto)


def read_scores(db: Any, conversation_id: int) -> list[tuple[str, int | None]]:
    """Every judged score of the conversation, in order (on a connection)."""
    return _SCORED.run(db, {"b_conv": conversation_id}).rows


def check_history(tutor_rows: Iterable[tuple[int, str | None]], scored: Iterable[tuple[str, int | None]],
                  upto: int | None) -> CheckHistory:
    """From the tutor's messages as (seq, form_states_json) in order, and the scores."""
    asked: dict[str, int] = {}
    last: str | None = None
    for seq, states in tutor_rows:
        ids = [c for c in (check_id_of(f) for f in json.loads(states or "{}")) if c]
        for check_id in ids:
            asked[check_id] = seq
        if upto is not None and seq < upto:
            last = ids[-1] if ids else None
    return CheckHistory(asked, last, tuple((c, s) for c, s in scored))


def mastered_from(module: Module, scored: Iterable[tuple[str, int | None]]) -> tuple[str, ...]:
    """Topics whose every check has a score at or above its threshold, in the order they
    got there (checks an author has since removed do not count)."""
    best: dict[str, int] = {}
    order: list[str] = []
    for check_id, score in scored:
        found = module.find_check(check_id)
        if score is None or found is None:
            continue
        best[check_id] = max(best.get(check_id, -1), score)
        topic = found[0]
        if topic.id not in order and all(best.get(c.id, -1) >= c.threshold for c in topic.checks):
            order.append(topic.id)
    return tuple(order)


def with_mastery(store: Store, conversation_id: int, module: Module, state: ProgressState) -> ProgressState:
    """`state` (as the progress record keeps it) with the topics mastered in this
    conversation. Start over begins a new conversation: mastery starts again with it, and
    the judged attempts of the old one stay on record."""
    with store.connect(read_only=True) as db:
        return with_scores(module, state, read_scores(db, conversation_id))


def with_scores(module: Module, state: ProgressState, scored: Iterable[tuple[str, int | None]]) -> ProgressState:
    """`state` with the topics mastered by the conversation's judged scores (read_scores)."""
    return replace(state, mastered=mastered_from(module, scored))


def learner_state(store: Store, learner_key: str, module: Module, state: ProgressState) -> ProgressState:
    """`with_mastery` for the learner's active conversation in the module."""
    with store.session() as s:
        conv = s.exec(
            select(Conversation.id).join(Learner, col(Learner.id) == Conversation.learner_id)
            .where(Learner.key == learner_key, Conversation.module_id == module.id, Conversation.status == "active")
            .order_by(col(Conversation.updated_at).desc())
        ).first()
    return state if conv is None else with_mastery(store, conv, module, state)
