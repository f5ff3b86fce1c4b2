"""One reply per learner message, whatever the number of workers, tabs or machines.

Before any model call, a worker claims the right to answer a message in the database
(`ReplyClaim`, unique per conversation and message). The claim is a lease: the holder
renews it while the model writes (`Heartbeat`), and gives it up in the same transaction
that stores the reply (`release`, which refuses if the lease was lost meanwhile — so a
worker that stalled past its lease never stores a second reply). A worker that dies stops
renewing; once the lease has expired, another worker takes the claim over and answers.

Plain synchronous functions over a Store, like tutor.turns.conversations; the engine runs them
in a worker thread. `answer_claimed` is the loop a turn is answered in: claim, answer under
the heartbeat, or wait for another worker's reply.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta, timezone
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, bindparam, delete, or_, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import func, select

from tutor.storage.dbfaults import DatabaseUnavailable, report
from tutor.storage.statements import Statement
from tutor.storage.store import Message, ReplyClaim, Store, utcnow

if TYPE_CHECKING:  # pragma: no cover
    from tutor.turns.turn_store import TurnStart

__all__ = ["OPENING_SEQ", "ClaimLost", "Heartbeat", "answer_claimed", "claim", "claim_or_answered",
           "claim_or_answered_on", "current_holder", "holder_of", "newest_message_id", "release", "release_guard",
           "renew"]

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
    with store.connect() as db:
        taken = _take(db, conversation_id, seq, lease_s, holder or current_holder())
        db.commit()
    return taken


def renew(store: Store, conversation_id: int, seq: int, lease_s: float, holder: str) -> bool:
    """Extend our own claim; False once it is gone (our reply stored, or another worker took
    it over). Never creates one: a renewal still in flight when the reply is stored must
    not bring the claim back."""
    with store.connect() as db:
        renewed = _RENEW.run(db, {"b_conv": conversation_id, "b_seq": seq, "b_holder": holder,
                                  "b_until": utcnow() + timedelta(seconds=lease_s)}).rowcount
        db.commit()
    return bool(renewed)


def claim_or_answered(
    store: Store, conversation_id: int, seq: int, lease_s: float, holder: str | None = None
) -> tuple[bool, int | None]:
    """One trip to the database for a turn about to be answered: claim message `seq`, then
    look for a stored reply — in that order, so a reply stored before our claim is seen and
    none can be stored after it (the claim is ours). (True, None): answer it; (False, id):
    already answered (our claim, if we took one, is dropped); (False, None): another worker
    is writing the reply."""
    with store.connect() as db:
        return claim_or_answered_on(db, conversation_id, seq, lease_s, holder or current_holder())


def claim_or_answered_on(db: Connection, conversation_id: int, seq: int, lease_s: float,
                         holder: str) -> tuple[bool, int | None]:
    """claim_or_answered on a connection, committed (one transaction: the claim is seen by
    others only with its answer)."""
    got = _take(db, conversation_id, seq, lease_s, holder)
    stored = _reply_id(db, conversation_id, seq)
    if stored is not None and got:
        release(db, conversation_id, seq, holder)
        got = False
    db.commit()
    return got, stored


# Built once (tutor.turns.conversations does the same for the turn's hot statements): building
# and caching statements per call cost more CPU than running them.
_CLAIMS, _MESSAGES = ReplyClaim.__table__, Message.__table__


def _upsert(dialect_insert: Any) -> Any:
    """Claim or renew in one statement: insert the claim, or take the row over when it is
    ours or its lease has expired; no row changes (rowcount 0) while another holds it."""
    new = dialect_insert(_CLAIMS).values(conversation_id=bindparam("b_conv"), learner_seq=bindparam("b_seq"),
                                         holder=bindparam("b_holder"), lease_until=bindparam("b_until"),
                                         created_at=bindparam("b_now"))
    return new.on_conflict_do_update(
        index_elements=[_CLAIMS.c.conversation_id, _CLAIMS.c.learner_seq],
        set_={"holder": new.excluded.holder, "lease_until": new.excluded.lease_until},
        where=or_(_CLAIMS.c.holder == new.excluded.holder, _CLAIMS.c.lease_until < new.excluded.created_at),
    )


# Run on the driver's cursor (tutor.storage.statements): every turn takes and drops a claim.
_TAKE = {"sqlite": Statement(_upsert(sqlite.insert)), "postgresql": Statement(_upsert(postgresql.insert))}
_RENEW = Statement(update(_CLAIMS)
                   .where(_CLAIMS.c.conversation_id == bindparam("b_conv"), _CLAIMS.c.learner_seq == bindparam("b_seq"),
                          _CLAIMS.c.holder == bindparam("b_holder"))
                   .values(lease_until=bindparam("b_until")))
_DROP = Statement(delete(_CLAIMS).where(_CLAIMS.c.conversation_id == bindparam("b_conv"),
                                        _CLAIMS.c.learner_seq == bindparam("b_seq"),
                                        _CLAIMS.c.holder == bindparam("b_holder")))
_REPLY_TO = Statement(select(_MESSAGES.c.id)
                      .where(_MESSAGES.c.conversation_id == bindparam("b_conv"), _MESSAGES.c.role == "tutor",
                             _MESSAGES.c.reply_to_seq == bindparam("b_seq"))
                      .limit(1))
_OPENING_REPLY = Statement(select(_MESSAGES.c.id)
                           .where(_MESSAGES.c.conversation_id == bindparam("b_conv"), _MESSAGES.c.role == "tutor",
                                  _MESSAGES.c.reply_to_seq.is_(None))
                           .limit(1))
_NEWEST = Statement(select(func.max(_MESSAGES.c.id)).where(_MESSAGES.c.conversation_id == bindparam("b_conv")))


def _take(db: Connection, conversation_id: int, seq: int, lease_s: float, holder: str) -> bool:
    now = utcnow()
    until = now + timedelta(seconds=lease_s)
    return bool(_TAKE[db.dialect.name].run(db, {"b_conv": conversation_id, "b_seq": seq, "b_holder": holder,
                                                "b_now": now, "b_until": until}).rowcount)


def release(db: Connection, conversation_id: int, seq: int, holder: str | None = None) -> None:
    """Inside the transaction that stores the reply (on its connection): drop our claim,
    or raise ClaimLost (the transaction then rolls back and nothing is stored)."""
    holder = holder or current_holder()
    gone = _DROP.run(db, {"b_conv": conversation_id, "b_seq": seq, "b_holder": holder})
    if not gone.rowcount:
        raise ClaimLost(f"conversation {conversation_id}: message {seq} was taken over by another worker")


def _reply_id(db: Connection, conversation_id: int, seq: int) -> int | None:
    query = _OPENING_REPLY if seq == OPENING_SEQ else _REPLY_TO
    return query.run(db, {"b_conv": conversation_id, "b_seq": seq}).scalar()


def newest_message_id(store: Store, conversation_id: int) -> int | None:
    """The id of the conversation's newest message: a page that lacks it is behind."""
    with store.connect(read_only=True) as db:  # after every turn of every tab: on the driver's cursor
        return _NEWEST.run(db, {"b_conv": conversation_id}).scalar()


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
    """Renews a claim every third of its lease while a reply is being written. Most turns
    end before the first renewal: until then it is a timer, not a task."""

    def __init__(self, store: Store, conversation_id: int, seq: int, lease_s: float, holder: str | None = None) -> None:
        self.store, self.conversation_id, self.seq, self.lease_s = store, conversation_id, seq, lease_s
        self.holder = holder or current_holder()
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task | None = None

    async def __aenter__(self) -> Heartbeat:
        self._timer = asyncio.get_running_loop().call_later(self.lease_s / 3, self._start)
        return self

    def _start(self) -> None:
        self._timer = None
        self._task = asyncio.get_running_loop().create_task(self._beat())

    async def __aexit__(self, *exc) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def _beat(self) -> None:
        while True:
            try:
                renewed = await self.store.run(renew, self.store, self.conversation_id, self.seq, self.lease_s,
                                               self.holder)
            except DatabaseUnavailable as fault:  # the next beat tries again
                report(fault, log, f"conversation {self.conversation_id}: reply claim not renewed")
                renewed = True
            if not renewed:  # our reply was just stored, or another worker took over
                log.info("conversation %s: the claim on message %s is gone", self.conversation_id, self.seq)
                return
            await asyncio.sleep(self.lease_s / 3)


CLAIM_POLL_S = 0.5  # how often a worker waiting on another's reply looks for it


async def answer_claimed(store: Store, conversation_id: int, seq: int, lease_s: float, holder: str,
                         answer: Callable[[Any], Awaitable[Any]], stored_result: Callable[[int, int], Any],
                         start: TurnStart | None = None) -> Any:
    """Answer message `seq` only while holding its claim: another worker (another tab, another
    machine) answering it meanwhile is waited for, and its stored reply returned
    (`stored_result(conversation_id, reply_id)`, run in the store's thread); a dead worker's
    claim is taken over once its lease expires. `start`: the first look, already taken by
    turn_store.begin (with the turn's reads, handed to `answer`; later tries read again)."""
    while True:
        if start is not None:
            got, stored, reads, start = start.got, start.stored, start.reads, None
        else:
            got, stored = await store.run(
                claim_or_answered, store, conversation_id, seq, lease_s, holder)
            reads = None
        if stored is not None:  # answered while we looked: show that reply
            return await store.run(stored_result, conversation_id, stored)
        if got:
            try:
                async with Heartbeat(store, conversation_id, seq, lease_s, holder):
                    return await answer(reads)
            except ClaimLost:
                log.warning("conversation %s: reply to %s discarded, another worker answered it",
                            conversation_id, seq)
                continue
        await asyncio.sleep(CLAIM_POLL_S)


def release_guard(conversation_id: int, upto: int | None, holder: str) -> Callable[[Connection], None]:
    """store_reply's guard: the reply is stored only while we still hold its claim."""
    seq = OPENING_SEQ if upto is None else upto
    return lambda session: release(session, conversation_id, seq, holder)
