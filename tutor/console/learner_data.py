"""A learner's data request: delete one learner and everything that belongs to them, in
one transaction (all or nothing): their messages, the model calls' audit rows, safety
flags, reply claims, judged answers, progress, review marks, conversations, sign-in
sessions, account and the learner row itself. Other learners' rows are never touched.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from sqlalchemy import delete
from sqlmodel import col, select

from tutor.console.console import LearnerRef, find_learner
from tutor.storage.store import (
    Account,
    AuditEvent,
    AuthSession,
    CheckAttempt,
    Conversation,
    Learner,
    Message,
    ProgressRecord,
    ReplyClaim,
    RiskEvent,
    Store,
    TurnReview,
)

log = logging.getLogger(__name__)

__all__ = ["Deleted", "delete_learner", "find_learner", "LearnerRef"]


@dataclass(frozen=True)
class Deleted:
    learner_key: str
    username: str
    rows: dict[str, int]  # table -> rows deleted

    @property
    def total(self) -> int:
        return sum(self.rows.values())


def delete_learner(store: Store, learner_id: int) -> Deleted | None:
    """Delete the learner with this id and all their rows; None when there is no such learner."""
    with store.session() as s:
        learner = s.get(Learner, learner_id)
        if learner is None:
            return None
        account = s.exec(select(Account).where(Account.learner_id == learner_id)).first()
        conversations = select(Conversation.id).where(Conversation.learner_id == learner_id)
        messages = select(Message.id).where(col(Message.conversation_id).in_(conversations))
        in_conversations = lambda table: col(table.conversation_id).in_(conversations)  # noqa: E731
        steps = [
            ("turn_review", delete(TurnReview).where(col(TurnReview.message_id).in_(messages))),
            ("audit_event", delete(AuditEvent).where(in_conversations(AuditEvent))),
            ("risk_event", delete(RiskEvent).where(in_conversations(RiskEvent))),
            ("check_attempt", delete(CheckAttempt).where(in_conversations(CheckAttempt))),
            ("reply_claim", delete(ReplyClaim).where(in_conversations(ReplyClaim))),
            ("message", delete(Message).where(in_conversations(Message))),
            ("conversation", delete(Conversation).where(Conversation.learner_id == learner_id)),
            ("progress_record", delete(ProgressRecord).where(ProgressRecord.learner_id == learner_id)),
        ]
        if account is not None:
            steps += [
                ("auth_session", delete(AuthSession).where(AuthSession.account_id == account.id)),
                ("account", delete(Account).where(Account.id == account.id)),
            ]
        steps.append(("learner", delete(Learner).where(Learner.id == learner_id)))
        db = s.connection()
        rows = {name: db.execute(statement).rowcount for name, statement in steps}
        s.commit()
        deleted = Deleted(learner.key, account.username if account else "", rows)
    if store.url.startswith("sqlite"):
        _empty_the_wal(store)
    return deleted


def _empty_the_wal(store: Store) -> None:
    """SQLite's write-ahead log still holds the pages as they were before the delete (the
    learner's words, several times over): copy what it holds into the file (where deleted
    rows are zeroed, secure_delete) and truncate it to nothing. A reader holding an old
    snapshot can make a checkpoint wait: tried for a few seconds, then logged."""
    for _ in range(50):
        with store.engine.connect() as db:
            busy, _, _ = db.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").one()
        if not busy:
            return
        time.sleep(0.1)
    log.warning("the database's write-ahead log could not be emptied after deleting a learner (a long read "
                "was open); it is emptied at the next checkpoint")
