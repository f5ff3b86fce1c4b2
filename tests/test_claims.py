"""One reply per learner message across workers: two engines with their own identities
(two processes, two machines) share one real database, SQLite or PostgreSQL, and two
loopback model servers; a learner message is answered exactly once, a waiting worker
shows the other's reply, and a dead worker's turn is taken over when its lease expires."""

from __future__ import annotations

import asyncio
import time

import pytest
import sqlalchemy
from sqlmodel import select

from tests.fakes.servers import FakeLLMServer, Scripted, settings_for
from tests.fakes.wire import openai_reply, tutor_json
from tutor.content.modules import load_library
from tutor.llm.base import LearnerInput
from tutor.llm.factory import make_provider
from tutor.storage.store import Message, ReplyClaim, Store
from tutor.turns import claims
from tutor.turns.engine import Engine

MODULE = "understanding_anxiety"


@pytest.fixture
def store(store_on_each_database: Store) -> Store:
    """Each test on SQLite and on PostgreSQL (tests/conftest.py)."""
    return store_on_each_database


def worker(store: Store, server: FakeLLMServer, name: str, lease_s: float = 5.0) -> Engine:
    settings = settings_for(server, timeout_s=10.0)
    engine = Engine(store, make_provider(settings), load_library(), settings)
    engine.holder, engine.lease_s = f"worker-{name}", lease_s
    return engine


def tutor_rows(store: Store, conversation_id: int) -> list[Message]:
    with store.session() as s:
        return list(s.exec(select(Message).where(Message.conversation_id == conversation_id,
                                                 Message.role == "tutor").order_by("seq")))


def test_claims_are_exclusive_until_the_lease_expires(store):
    with FakeLLMServer("openai") as server:
        server.default = lambda request: openai_reply(tutor_json())
        view = asyncio.run(worker(store, server, "a").open("kim", MODULE))
    assert claims.claim(store, view.id, 7, 30, "a")
    assert not claims.claim(store, view.id, 7, 30, "b")  # a live claim is a's
    assert claims.claim(store, view.id, 7, 30, "a")  # a renews its own
    assert claims.holder_of(store, view.id, 7) == ("a", True)
    assert claims.claim(store, view.id, 8, 0.2, "a")
    time.sleep(0.4)
    assert claims.claim(store, view.id, 8, 30, "b")  # expired: b takes it over
    with store.connect() as db, pytest.raises(claims.ClaimLost):
        claims.release(db, view.id, 8, "a")  # a can no longer store its reply
    with store.connect() as db:
        claims.release(db, view.id, 8, "b")
        db.commit()
    assert claims.holder_of(store, view.id, 8) is None
    # A renewal still in flight when the reply was stored does not bring the claim back.
    assert not claims.renew(store, view.id, 8, 30, "b")
    assert claims.holder_of(store, view.id, 8) is None
    assert claims.renew(store, view.id, 7, 30, "a") and not claims.renew(store, view.id, 7, 30, "b")


@pytest.mark.parametrize("lease_s, delay_s", [(5.0, 1.5), (0.6, 2.0)], ids=["within-the-lease", "renewed-past-it"])
def test_two_workers_answer_a_message_once_and_the_waiting_one_shows_that_reply(store, lease_s, delay_s):
    # renewed-past-it: the reply takes three leases; the writing worker keeps its claim by
    # renewing it, so the waiting one never takes the message over.
    with FakeLLMServer("openai") as slow, FakeLLMServer("openai") as other:
        slow.default = lambda request: Scripted(200, openai_reply(tutor_json("From worker A.")).body, delay_s=delay_s)
        other.default = lambda request: openai_reply(tutor_json("From worker B."))
        a, b = worker(store, slow, "a", lease_s), worker(store, other, "b", lease_s)
        view = asyncio.run(a.open("lee", MODULE))
        opening_calls = len(slow.requests)

        async def race():
            pending = await a.accept(view.id, LearnerInput(text="What is anxiety?"))
            first = asyncio.create_task(a.respond(pending))
            await asyncio.sleep(0.3)  # a second tab, on another worker, loads the page
            second = await b.respond_pending(view.id)
            return await first, second

        result_a, result_b = asyncio.run(race())
        assert other.requests == []  # worker B never called its model
        assert len(slow.requests) == opening_calls + 1
    assert result_b is not None and result_b.reply.id == result_a.reply.id
    assert result_b.learner is not None and result_b.learner.text == "What is anxiety?"
    replies = tutor_rows(store, view.id)
    assert [r.reply_to_seq for r in replies] == [None, 1]  # the opening and one reply
    with store.session() as s:
        assert s.exec(select(ReplyClaim)).all() == []  # claims end with the stored reply


def test_a_dead_workers_turn_is_answered_by_another_once_its_lease_expires(store):
    with FakeLLMServer("openai") as hanging, FakeLLMServer("openai") as healthy:
        hanging.default = lambda request: Scripted(200, openai_reply(tutor_json("never")).body, delay_s=30)
        healthy.default = lambda request: openai_reply(tutor_json("Worker B took over."))
        b = worker(store, healthy, "b", lease_s=1.0)
        view = asyncio.run(b.open("max", MODULE))
        a = worker(store, hanging, "a", lease_s=1.0)

        async def crash_then_recover():
            pending = await a.accept(view.id, LearnerInput(text="Tell me about breathing"))
            doomed = asyncio.create_task(a.respond(pending))
            await asyncio.sleep(0.5)
            doomed.cancel()  # worker A dies mid-turn: no more heartbeats, its claim stays
            with pytest.raises(asyncio.CancelledError):
                await doomed
            started = time.monotonic()
            result = await b.respond_pending(view.id)
            return result, time.monotonic() - started

        result, waited = asyncio.run(crash_then_recover())
    assert result is not None
    assert result.reply.response["content"]["text_blocks"][0]["content"] == "Worker B took over."
    assert 0.2 <= waited < 10  # B waited for the lease to run out, then answered
    assert [r.reply_to_seq for r in tutor_rows(store, view.id)] == [None, 1]


def test_a_worker_that_lost_its_claim_stores_nothing(store):
    with FakeLLMServer("openai") as slow, FakeLLMServer("openai") as fast:
        slow.default = lambda request: Scripted(200, openai_reply(tutor_json("Late.")).body, delay_s=1.2)
        fast.default = lambda request: openai_reply(tutor_json("On time."))
        a, b = worker(store, slow, "a", lease_s=0.3), worker(store, fast, "b", lease_s=30)
        view = asyncio.run(b.open("ned", MODULE))

        async def stall():
            pending = await a.accept(view.id, LearnerInput(text="What is panic?"))
            late = asyncio.create_task(a.respond(pending))
            await asyncio.sleep(0.1)
            with store.session() as s:  # A's heartbeat stalls (a frozen process): B takes over
                s.execute(sqlalchemy.update(ReplyClaim).values(holder="worker-b"))
                s.commit()
            on_time = await b.respond_pending(view.id)
            return await late, on_time

        late, on_time = asyncio.run(stall())
    assert late.reply.id == on_time.reply.id  # A came back with B's reply, not its own
    texts = [r.parsed["content"]["text_blocks"][0]["content"] for r in tutor_rows(store, view.id)[1:]]
    assert texts == ["On time."]


def _holder_in_child(queue) -> None:
    queue.put(claims.current_holder())


def test_each_forked_worker_is_its_own_holder():
    # The server imports the app once and forks its workers: identities must differ.
    import multiprocessing

    parent = claims.current_holder()
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_holder_in_child, args=(queue,))
    child.start()
    child.join(10)
    assert queue.get(timeout=5) != parent
    assert claims.current_holder() == parent
