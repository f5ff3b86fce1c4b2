"""What one learner turn costs the database, on SQLite and PostgreSQL: at 200 learners the
hand-overs to the database threads and the statements cost more CPU than the rest of the
turn (benchmarks/load_bench.py), so a change that adds a trip or a handful of statements
to every turn shows here, not only in a benchmark nobody runs."""

from __future__ import annotations

import asyncio

import pytest
import sqlalchemy

from tests.fakes.servers import FakeLLMServer, settings_for
from tests.fakes.wire import openai_reply, tutor_json
from tutor.access.usage import UsageLimits, UsageSettings
from tutor.content.modules import load_library
from tutor.llm.base import LearnerInput
from tutor.llm.factory import make_provider
from tutor.storage.store import Store
from tutor.turns.engine import Engine

MODULE = "understanding_anxiety"


class Counted:
    """Statements the database ran, and calls handed to the store's threads."""

    def __init__(self, store: Store) -> None:
        self.statements: list[str] = []
        self.trips: list[str] = []
        for engine in (store.engine, getattr(store, "_reader", None)):
            if engine is not None:
                sqlalchemy.event.listen(engine, "before_cursor_execute", self._statement)
        run = store.run

        async def counted_run(fn, /, *args, **kwargs):
            self.trips.append(getattr(fn, "__name__", "?"))
            return await run(fn, *args, **kwargs)

        store.run = counted_run  # type: ignore[method-assign]

    def _statement(self, _conn, _cursor, statement: str, *_args) -> None:
        self.statements.append(" ".join(statement.split())[:80])

    def take(self) -> tuple[list[str], list[str]]:
        out = (self.trips, self.statements)
        self.trips, self.statements = [], []
        return out


@pytest.fixture
def server():
    with FakeLLMServer("openai") as s:
        s.default = lambda request: openai_reply(tutor_json())
        yield s


def test_a_learner_turn_takes_three_trips_and_few_statements(store_on_each_database: Store, server) -> None:
    store = store_on_each_database
    settings = settings_for(server)
    # As the web page sends: usage limits on (their defaults), each send with its client id.
    engine = Engine(store, make_provider(settings), load_library(), settings, usage=UsageLimits(UsageSettings()))
    counted = Counted(store)

    async def turns() -> list[tuple[list[str], list[str]]]:
        view = await engine.open("learner-1", MODULE, defer_opening=True)
        await engine.respond_pending(view.id)
        out = []
        for n, text in enumerate(("What does anxiety do in the body?", "Why does my heart race?")):
            counted.take()
            await engine.accept(view.id, LearnerInput(text=text), client_id=f"send-{n}")
            result = await engine.respond_pending(view.id)
            assert result is not None and result.reply.outcome == "valid"
            out.append(counted.take())
        await engine.provider.aclose()
        return out

    for trips, statements in asyncio.run(turns()):
        # accept (the resend check and the turn limits inside); what is owed + its claim +
        # what the model reads; the reply with its audit row and the learner's progress
        assert trips == ["accept", "begin", "store_reply"], trips
        assert len(statements) <= 14, "\n".join(statements)
