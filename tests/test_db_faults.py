"""Database faults (tutor.storage.dbfaults): real databases made unavailable, never a mocked driver.

PostgreSQL: a database made for the test, then closed to connections (ALLOW_CONNECTIONS
false, its backends terminated) and opened again. SQLite: a file another connection keeps
locked past the busy timeout, a folder that went away. Start-up: a server port nobody
listens on, a database that does not exist, a folder that cannot be made.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy
from sqlmodel import select

from tests.fakes.servers import FakeLLMServer, settings_for
from tests.fakes.wire import openai_reply, tutor_json
from tutor.content.modules import REPO_ROOT, load_library
from tutor.llm.base import LearnerInput
from tutor.llm.config import LLMSettings
from tutor.llm.factory import make_provider
from tutor.storage import dbfaults
from tutor.storage.dbfaults import DatabaseUnavailable, open_database
from tutor.storage.store import Message, Store
from tutor.turns.engine import Engine

MODULE = "understanding_anxiety"
PG_ADMIN = "postgresql+psycopg2://postgres@127.0.0.1:5432/postgres"
CLOSED_PORT = "postgresql+psycopg2://postgres:s3cret-pw@127.0.0.1:1/tutor"


# --------------------------------------------------------------------------- helpers


class PgDatabase:
    """A PostgreSQL database of this test's own, which the test can close and reopen."""

    def __init__(self) -> None:
        self.name = "tutor_faults_" + uuid.uuid4().hex[:8]
        self.url = f"postgresql+psycopg2://postgres@127.0.0.1:5432/{self.name}"
        self.admin = sqlalchemy.create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
        self._sql(f'CREATE DATABASE "{self.name}"')

    def _sql(self, statement: str) -> None:
        with self.admin.connect() as c:
            c.execute(sqlalchemy.text(statement))

    def down(self) -> None:
        """No new connections, and every open one cut (as a stopped server would)."""
        self._sql(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS false')
        self._sql(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{self.name}'")

    def up(self) -> None:
        self._sql(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS true')

    def drop(self) -> None:
        self.up()
        self._sql(f'DROP DATABASE "{self.name}" WITH (FORCE)')
        self.admin.dispose()


@pytest.fixture
def pg() -> Iterator[PgDatabase]:
    db = PgDatabase()
    try:
        yield db
    finally:
        db.drop()


@pytest.fixture
def pg_store(pg: PgDatabase) -> Iterator[Store]:
    store = open_database(pg.url)
    yield store
    store.dispose()


def learner_rows(store: Store, conversation_id: int) -> list[Message]:
    with store.session() as s:
        return list(s.exec(select(Message).where(Message.conversation_id == conversation_id).order_by("seq")))


def model_engine(store: Store, server: FakeLLMServer, **overrides) -> Engine:
    settings = settings_for(server, timeout_s=10.0, **overrides)
    return Engine(store, make_provider(settings), load_library(), settings)


async def wait_for(condition, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.02)


def fault_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "database unavailable" in r.getMessage()]


# ----------------------------------------------------------------- operator lines


def test_closed_port_names_the_cause_the_fix_and_never_the_password():
    with pytest.raises(DatabaseUnavailable) as caught:
        open_database(CLOSED_PORT)
    line = caught.value.operator_line
    assert line.startswith("database unavailable (connection refused at 127.0.0.1:1): ")
    assert "check that PostgreSQL is running" in line
    assert "TUTOR_DATABASE_URL=postgresql+psycopg2://postgres:***@127.0.0.1:1/tutor" in line
    assert "s3cret" not in line and "s3cret" not in dbfaults.startup_message(caught.value)
    assert "\n" not in line


def test_a_database_that_does_not_exist_says_how_to_create_it():
    name = "tutor_missing_" + uuid.uuid4().hex[:8]
    with pytest.raises(DatabaseUnavailable) as caught:
        open_database(f"postgresql+psycopg2://postgres@127.0.0.1:5432/{name}")
    assert f'database "{name}" does not exist at 127.0.0.1:5432' in caught.value.cause
    assert f"createdb -h 127.0.0.1 -p 5432 -U postgres {name}" in caught.value.fix


def test_a_missing_sqlite_folder_is_made_and_one_that_cannot_be_made_is_named(tmp_path):
    store = open_database(f"sqlite:///{tmp_path / 'new' / 'deeper' / 'tutor.db'}")
    assert (tmp_path / "new" / "deeper" / "tutor.db").is_file()
    store.dispose()
    (tmp_path / "a-file").write_text("not a folder")
    with pytest.raises(DatabaseUnavailable) as caught:
        open_database(f"sqlite:///{tmp_path / 'a-file' / 'sub' / 'tutor.db'}")
    assert f"the folder {tmp_path / 'a-file' / 'sub'} for the SQLite file cannot be created" in caught.value.cause
    assert "TUTOR_DATABASE_URL=sqlite:///" in caught.value.fix


def test_other_database_errors_pass_through_unchanged(tmp_path):
    store = open_database(f"sqlite:///{tmp_path / 'tutor.db'}")
    with pytest.raises(sqlalchemy.exc.OperationalError, match="syntax error"):
        with store.session() as s:
            s.execute(sqlalchemy.text("SELEC nonsense"))
    with pytest.raises(sqlalchemy.exc.IntegrityError):
        with store.session() as s:
            s.execute(sqlalchemy.text("INSERT INTO message (id, conversation_id, seq, role) VALUES (1, 999, 0, 'x')"))
            s.commit()
    store.dispose()


def test_an_unmigrated_database_says_run_tutor_db_migrate(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'empty.db'}")
    engine = Engine(store, make_provider(LLMSettings()), load_library(), LLMSettings())
    with pytest.raises(DatabaseUnavailable, match="run `tutor db migrate`"):
        asyncio.run(engine.open("ann", MODULE))
    store.dispose()


def test_report_logs_one_line_and_keeps_repeats_quiet(caplog):
    fault = DatabaseUnavailable(f"test cause {uuid.uuid4().hex}", "the fix")
    again = DatabaseUnavailable(fault.cause, fault.fix)
    caplog.set_level(logging.WARNING)
    logger = logging.getLogger("t")
    dbfaults.report(fault, logger, "conversation 1: message not saved")
    dbfaults.report(fault, logger, "the same fault, caught higher up")  # logged once already
    dbfaults.report(again, logger, "conversation 2: message not saved")  # the same failure, another learner
    dbfaults.report(DatabaseUnavailable(fault.cause, fault.fix), logger, "home page")
    assert [r.getMessage() for r in caplog.records] == [
        f"conversation 1: message not saved: database unavailable ({fault.cause}): the fix",
        f"home page: database unavailable ({fault.cause}): the fix",
    ]
    assert all(r.exc_info is None for r in caplog.records)  # the traceback is at debug only


# ------------------------------------------------------------ PostgreSQL goes away


def test_a_send_while_postgresql_is_down_stores_nothing_and_works_once_it_is_back(pg, pg_store):
    settings = LLMSettings()
    engine = Engine(pg_store, make_provider(settings), load_library(), settings)
    view = asyncio.run(engine.open("ann", MODULE))
    before = learner_rows(pg_store, view.id)
    pg.down()
    with pytest.raises(DatabaseUnavailable) as caught:
        asyncio.run(engine.accept(view.id, LearnerInput(text="What is anxiety?")))
    assert "127.0.0.1:5432" in caught.value.cause and "TUTOR_DATABASE_URL=" in caught.value.fix
    with pytest.raises(DatabaseUnavailable):  # page loads too (the home page's queries)
        engine.conversations("ann")
    pg.up()
    assert len(learner_rows(pg_store, view.id)) == len(before)  # nothing half-stored
    result = asyncio.run(engine.send(view.id, LearnerInput(text="What is anxiety?")))
    rows = learner_rows(pg_store, view.id)
    assert [r.role for r in rows[len(before):]] == ["learner", "tutor"]
    assert rows[-2].text == "What is anxiety?" and result.reply.id == rows[-1].id


def test_the_model_reply_is_stored_when_the_database_is_back_within_the_deadline(pg, pg_store, caplog):
    caplog.set_level(logging.INFO, logger="tutor")
    with FakeLLMServer("openai") as server:
        server.script(openai_reply(tutor_json("Welcome.")),
                      dataclasses.replace(openai_reply(tutor_json("Kept through the outage.")), delay_s=1.5))
        engine = model_engine(pg_store, server, deadline_s=30.0)

        async def turn():
            view = await engine.open("ann", MODULE)
            task = asyncio.create_task(engine.send(view.id, LearnerInput(text="Tell me about breathing")))
            await wait_for(lambda: len(server.requests) == 2)  # the model is writing
            await asyncio.to_thread(pg.down)
            await asyncio.sleep(3.0)  # the reply arrives meanwhile and cannot be stored
            assert not task.done()
            await asyncio.to_thread(pg.up)
            return view.id, await asyncio.wait_for(task, 20)

        conversation_id, result = asyncio.run(turn())
    assert "Kept through the outage." in result.reply.raw
    tutor = [r for r in learner_rows(pg_store, conversation_id) if r.role == "tutor"]
    assert len(tutor) == 2 and tutor[-1].id == result.reply.id and tutor[-1].reply_to_seq == 1
    assert len(server.requests) == 2  # one model call for the turn, not a second one
    assert any("the tutor's reply: saved after the database was back" in r.getMessage() for r in caplog.records)


def test_past_the_deadline_the_reply_is_given_up_with_one_line_and_the_message_is_still_owed(pg, pg_store, caplog):
    caplog.set_level(logging.INFO, logger="tutor")
    with FakeLLMServer("openai") as server:
        server.script(openai_reply(tutor_json("Welcome.")),
                      dataclasses.replace(openai_reply(tutor_json("Lost to the outage.")), delay_s=0.8),
                      openai_reply(tutor_json("Answered after all.")))
        engine = model_engine(pg_store, server, deadline_s=2.0)

        async def turn():
            view = await engine.open("ann", MODULE)
            task = asyncio.create_task(engine.send(view.id, LearnerInput(text="Tell me about breathing")))
            await wait_for(lambda: len(server.requests) == 2)
            await asyncio.to_thread(pg.down)
            with pytest.raises(DatabaseUnavailable):
                await asyncio.wait_for(task, 20)
            await asyncio.to_thread(pg.up)
            return view.id, await engine.respond_pending(view.id)  # what a reload or the next send does

        conversation_id, result = asyncio.run(turn())
    [line] = fault_lines(caplog)
    assert line.startswith(f"conversation {conversation_id}: the tutor's reply: gave up after 2 s: database unavailable (")
    assert "TUTOR_DATABASE_URL=" in line
    rows = learner_rows(pg_store, conversation_id)
    assert [r.role for r in rows] == ["tutor", "learner", "tutor"]  # the learner's message was kept
    assert rows[1].text == "Tell me about breathing" and "Answered after all." in result.reply.raw


# --------------------------------------------------------------- SQLite goes away


def test_a_sqlite_file_locked_past_the_busy_timeout_refuses_calmly_then_works(tmp_path):
    path = tmp_path / "tutor.db"
    store = open_database(f"sqlite:///{path}")
    # The store waits 5 s for a lock; this test waits 0.2 s (same fault, sooner).
    sqlalchemy.event.listen(store.engine, "connect", lambda c, _r: c.execute("PRAGMA busy_timeout=200"))
    store.engine.dispose()
    engine = Engine(store, make_provider(LLMSettings()), load_library(), LLMSettings())
    view = asyncio.run(engine.open("ann", MODULE))
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(DatabaseUnavailable) as caught:
            asyncio.run(engine.accept(view.id, LearnerInput(text="Hello")))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert f"the SQLite file {path} stayed locked" in caught.value.cause
    assert "TUTOR_DATABASE_URL=postgresql" in caught.value.fix
    assert [r.role for r in learner_rows(store, view.id)] == ["tutor"]
    asyncio.run(engine.send(view.id, LearnerInput(text="Hello")))
    assert [r.role for r in learner_rows(store, view.id)] == ["tutor", "learner", "tutor"]
    store.dispose()


def test_a_sqlite_folder_that_went_away_is_named(tmp_path):
    folder = tmp_path / "data"
    store = open_database(f"sqlite:///{folder / 'tutor.db'}")
    store.engine.dispose()  # the next session opens the file again
    folder.rename(tmp_path / "moved")
    with pytest.raises(DatabaseUnavailable) as caught:
        with store.session() as s:
            s.execute(sqlalchemy.text("SELECT count(*) FROM learner"))
    assert caught.value.cause == f"the folder {folder} for the SQLite file does not exist"
    assert f"mkdir -p {folder}" in caught.value.fix
    store.dispose()


# ---------------------------------------------------------------- start-up (CLI)


def _cli(tmp_path: Path, *args: str, url: str, stdin: str = "") -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT), "TUTOR_DATABASE_URL": url,
           "TUTOR_DATA_DIR": str(tmp_path / "data")}
    return subprocess.run([sys.executable, "-m", "tutor.cli", *args], input=stdin, capture_output=True,
                          text=True, cwd=tmp_path, env=env, timeout=120)


@pytest.mark.parametrize("command", [("db", "migrate"), ("prepare",), ("chat", "--module", MODULE, "--json")])
def test_start_up_with_an_unreachable_database_says_what_to_set(tmp_path, command):
    done = _cli(tmp_path, *command, url=CLOSED_PORT, stdin="hello\n")
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and "s3cret" not in done.stderr + done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 2, done.stderr
    assert "database unavailable (connection refused at 127.0.0.1:1)" in lines[0]
    assert "TUTOR_DATABASE_URL=postgresql+psycopg2://postgres:***@127.0.0.1:1/tutor" in lines[0]
    # ... and a value that works: it does.
    working = lines[1].split("TUTOR_DATABASE_URL=", 1)[1].split()[0]
    assert working == f"sqlite:///{tmp_path / 'data' / 'tutor.db'}"
    assert _cli(tmp_path, "db", "migrate", url=working).returncode == 0


def test_start_up_with_a_missing_database_names_it_and_a_missing_sqlite_folder_is_made(tmp_path):
    name = "tutor_missing_" + uuid.uuid4().hex[:8]
    done = _cli(tmp_path, "db", "migrate", url=f"postgresql+psycopg2://postgres@127.0.0.1:5432/{name}")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f'database "{name}" does not exist' in done.stderr and "TUTOR_DATABASE_URL=" in done.stderr
    made = _cli(tmp_path, "db", "migrate", url=f"sqlite:///{tmp_path / 'new' / 'tutor.db'}")
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "new" / "tutor.db").is_file()


def test_prepare_migrates_then_readies_the_semantic_layer_in_one_process(tmp_path):
    # scripts/run.sh's one step before serving: the schema, the safety screen and teaching.
    done = _cli(tmp_path, "prepare", url=f"sqlite:///{tmp_path / 'new' / 'tutor.db'}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("database is up to date: sqlite:///")
    assert "safety screen ready: 10 classes" in done.stderr and "teaching ready: 2 module(s)" in done.stderr
    with sqlalchemy.create_engine(f"sqlite:///{tmp_path / 'new' / 'tutor.db'}").connect() as c:
        assert c.execute(sqlalchemy.text("SELECT count(*) FROM learner")).scalar() == 0
