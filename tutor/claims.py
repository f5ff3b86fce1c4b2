"""One reply per learner message, whatever the number of workers, tabs or machines.

Before any model call, a worker claims the right to answer a message in the database
(`ReplyClaim`, unique per conversation and message). The claim is a lease: the holder
renews it while the model writes (`Heartbeat`), and gives it up in the same transaction
that stores the reply (`release`, which refuses if the lease was lost meanwhile — so a
worker that stalled past its lease never stores a second reply). A worker that dies stops
renewing; once the lease has expired, another worker takes the claim over and answers.

Plain synchronous functions over a Store, like tutor.conversations; the engine runs them
in a worker thread.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from datetime import timedelta, timezone

from sqlalchemy import bindparam, delete, insert, or_, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, func, select

from tutor.dbfaults import DatabaseUnavailable, report
from tutor.store import Message, ReplyClaim, Store, utcnow

__all__ = ["OPENING_SEQ", "ClaimLost", "Heartbeat", "claim", "claim_or_answered", "current_holder", "holder_of", "newest_message_id", "release"]

log = logging.getLogger(__name__)

_holder = ("", 0)


def current_holder() -> str:
    """This process in the database: host and pid, unique across restarts. Computed per
    process: the server imports the app once and forks its workers from that, so a value
    fixed at import would be shared by every worker."""
    global _holder
    pid = os.getpid()
    if _holder[1] != pid:
        _holder = (f"{socket.gethostname()[:48]}:{pid}:{uuid.uuid4().hex[:8]}", pid)
    return _holder[0]

OPENING_SEQ = -1  # the opening turn answers no learner message


class ClaimLost(RuntimeError):
    """Another worker took this message over (our lease expired): our reply is not stored."""


def claim(store: Store, conversation_id: int, seq: int, lease_s: float, holder: str | None = None) -> bool:
    """Claim the right to answer message `seq` (or renew our own claim). False while
    another worker holds an unexpired lease."""
    with store.session() as s:
        return _claim(s, conversation_id, seq, lease_s, holder or current_holder())


def claim_or_answered(
    store: Store, conversation_id: int, seq: int, lease_s: float, holder: str | None = None
) -> tuple[bool, int | None]:
    """One trip to the database for a turn about to be answered: claim message `seq`, then
    look for a stored reply — in that order, so a reply stored before our claim is seen and
    none can be stored after it (the claim is ours). (True, None): answer it; (False, id):
    already answered (our claim, if we took one, is dropped); (False, None): another worker
    is writing the reply."""
    holder = holder or current_holder()
    with store.session() as s:
        got = _claim(s, conversation_id, seq, lease_s, holder)
        stored = _reply_id(s, conversation_id, seq)
        if stored is not None and got:
            release(s, conversation_id, seq, holder)
            s.commit()
            got = False
    return got, stored


# Built once (tutor.conversations does the same for the turn's hot statements): building
# and caching statements per call cost more CPU than running them.
_CLAIMS, _MESSAGES = ReplyClaim.__table__, Message.__table__
_TAKE = (update(_CLAIMS)
         .where(_CLAIMS.c.conversation_id == bindparam("b_conv"), _CLAIMS.c.learner_seq == bindparam("b_seq"),
                or_(_CLAIMS.c.holder == bindparam("b_holder"), _CLAIMS.c.lease_until < bindparam("b_now")))
         .values(holder=bindparam("b_holder"), lease_until=bindparam("b_until")))
_NEW = insert(_CLAIMS)
_DROP = delete(_CLAIMS).where(_CLAIMS.c.conversation_id == bindparam("b_conv"),
                              _CLAIMS.c.learner_seq == bindparam("b_seq"), _CLAIMS.c.holder == bindparam("b_holder"))
_REPLY_TO = (select(_MESSAGES.c.id).where(_MESSAGES.c.conversation_id == bindparam("b_conv"),
                                          _MESSAGES.c.role == "tutor", _MESSAGES.c.reply_to_seq == bindparam("b_seq"))
             .limit(1))
_OPENING_REPLY = (select(_MESSAGES.c.id).where(_MESSAGES.c.conversation_id == bindparam("b_conv"),
                                               _MESSAGES.c.role == "tutor", _MESSAGES.c.reply_to_seq.is_(None))
                  .limit(1))


def _claim(s: Session, conversation_id: int, seq: int, lease_s: float, holder: str) -> bool:
    now = utcnow()
    until = now + timedelta(seconds=lease_s)
    db = s.connection()
    taken = db.execute(_TAKE, {"b_conv": conversation_id, "b_seq": seq, "b_holder": holder, "b_now": now,
                               "b_until": until})
    if taken.rowcount:
        s.commit()
        return True
    try:
        db.execute(_NEW, {"conversation_id": conversation_id, "learner_seq": seq, "holder": holder,
                          "lease_until": until, "created_at": now})
        s.commit()
    except IntegrityError:  # someone else's live claim
        s.rollback()
        return False
    return True


def release(session: Session, conversation_id: int, seq: int, holder: str | None = None) -> None:
    """Inside the transaction that stores the reply: drop our claim, or raise ClaimLost
    (the transaction then rolls back and nothing is stored)."""
    holder = holder or current_holder()
    gone = session.connection().execute(_DROP, {"b_conv": conversation_id, "b_seq": seq, "b_holder": holder})
    if not gone.rowcount:
        raise ClaimLost(f"conversation {conversation_id}: message {seq} was taken over by another worker")


def _reply_id(s: Session, conversation_id: int, seq: int) -> int | None:
    query = _OPENING_REPLY if seq == OPENING_SEQ else _REPLY_TO
    return s.connection().execute(query, {"b_conv": conversation_id, "b_seq": seq}).scalar()


def newest_message_id(store: Store, conversation_id: int) -> int | None:
    """The id of the conversation's newest message: a page that lacks it is behind."""
    with store.session() as s:
        return s.exec(select(func.max(Message.id)).where(Message.conversation_id == conversation_id)).first()


def holder_of(store: Store, conversation_id: int, seq: int) -> tuple[str, bool] | None:
    """(holder, lease still live) of a message's claim, or None when unclaimed."""
    with store.session() as s:
        row = s.exec(select(ReplyClaim).where(ReplyClaim.conversation_id == conversation_id,
                                              ReplyClaim.learner_seq == seq)).first()
    if row is None:
        return None
    until = row.lease_until if row.lease_until.tzinfo else row.lease_until.replace(tzinfo=timezone.utc)
    return row.holder, until >= utcnow()


class Heartbeat:
    """Renews a claim every third of its lease while a reply is being written."""

    def __init__(self, store: Store, conversation_id: int, seq: int, lease_s: float, holder: str | None = None) -> None:
        self.store, self.conversation_id, self.seq, self.lease_s = store, conversation_id, seq, lease_s
        self.holder = holder or current_holder()
        self._task: asyncio.Task | None = None

    async def __aenter__(self) -> Heartbeat:
        self._task = asyncio.create_task(self._beat())
        return self

    async def __aexit__(self, *exc) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.lease_s / 3)
            try:
                renewed = await self.store.run(claim, self.store, self.conversation_id, self.seq, self.lease_s,
                                               self.holder)
            except DatabaseUnavailable as fault:  # the next beat tries again
                report(fault, log, f"conversation {self.conversation_id}: reply claim not renewed")
                continue
            if not renewed:
                log.warning("conversation %s: message %s was taken over by another worker",
                            self.conversation_id, self.seq)
                return
