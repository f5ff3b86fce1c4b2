"""Schema changes go through migrations, on SQLite and on PostgreSQL."""

from __future__ import annotations

import concurrent.futures
import sqlite3
import time
import uuid

import pytest
import sqlalchemy
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlmodel import SQLModel, select

from tutor.llm.base import LearnerInput
from tutor.progress import ProgressState
from tutor.settings import ConfigError, database_url
from tutor.storage.store import Conversation, Learner, Message, Store, db_threads
from tutor.turns import conversations, turn_store

TABLES = {"learner", "conversation", "message", "progressrecord", "auditevent", "riskevent", "replyclaim",
          "checkattempt", "account", "authsession", "turnreview", "alembic_version"}
PG_ADMIN = "postgresql+psycopg2://postgres@127.0.0.1:5432/postgres"


def _roundtrip(store: Store) -> None:
    store.migrate()
    store.migrate()  # idempotent
    assert TABLES <= set(sqlalchemy.inspect(store.engine).get_table_names())
    # The migrations build exactly the tables the code declares (a column added to a model
    # without a migration shows up here, not as a crash in front of a learner).
    with store.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": False})
        assert compare_metadata(context, SQLModel.metadata) == []
    with store.session() as s:
        learner = Learner(key="k-" + uuid.uuid4().hex)
        s.add(learner)
        s.commit()
        conv = Conversation(learner_id=learner.id, module_id="m")
        s.add(conv)
        s.commit()
        s.add(Message(conversation_id=conv.id, seq=0, role="tutor", raw="{}", outcome="invalid",
                      flags_json='["invalid_json"]'))
        s.commit()
        row = s.exec(select(Message).where(Message.conversation_id == conv.id)).one()
        assert row.flags == ["invalid_json"] and row.parsed is None and row.raw == "{}"


def test_sqlite_migrations(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'a.db'}")
    _roundtrip(store)
    store.dispose()


def test_postgresql_migrations():
    name = "tutor_test_" + uuid.uuid4().hex[:8]
    admin = sqlalchemy.create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"'))
    try:
        store = Store(f"postgresql+psycopg2://postgres@127.0.0.1:5432/{name}")
        _roundtrip(store)
        store.dispose()
    finally:
        with admin.connect() as c:
            c.execute(sqlalchemy.text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        admin.dispose()


def test_database_url_defaults_to_a_sqlite_file_in_the_data_dir(monkeypatch, tmp_path):
    monkeypatch.delenv("TUTOR_DATABASE_URL", raising=False)
    monkeypatch.setattr("tutor.settings.DATA_DIR", tmp_path / "data")
    assert database_url() == f"sqlite:///{tmp_path / 'data' / 'tutor.db'}"
    monkeypatch.setenv("TUTOR_DATABASE_URL", "postgresql://x@h/db")
    assert database_url() == "postgresql://x@h/db"


def test_database_threads_default_per_database_and_follow_the_setting():
    assert db_threads({}) == 8 and db_threads({}, sqlite=True) == 2
    assert db_threads({"TUTOR_DB_THREADS": " "}, sqlite=True) == 2  # blank counts as unset
    assert db_threads({"TUTOR_DB_THREADS": "24"}) == 24 and db_threads({"TUTOR_DB_THREADS": "1"}, sqlite=True) == 1


@pytest.mark.parametrize("raw", ["many", "2.5", "0", "-3"])
def test_a_database_thread_count_that_cannot_work_names_the_variable_and_a_value_that_does(raw):
    with pytest.raises(ConfigError, match=r"TUTOR_DB_THREADS=.*set .*TUTOR_DB_THREADS=8"):
        db_threads({"TUTOR_DB_THREADS": raw})
    with pytest.raises(ValueError):  # what the setting raised before: callers catching it still do
        db_threads({"TUTOR_DB_THREADS": raw}, sqlite=True)


def test_a_reply_numbered_at_the_same_moment_as_a_learner_message_takes_the_next_seq(store_on_each_database):
    """A reply takes its seq in its own INSERT. On PostgreSQL a learner message stored at
    the same moment can take that seq first: the reply's transaction tries again with the
    next one instead of failing the turn."""
    store = store_on_each_database
    conversation_id, _ = conversations.find_or_create(store, "kim", "understanding_anxiety", False)
    asked = conversations.accept(store, conversation_id, LearnerInput(text="What is anxiety?"))
    conv = conversations.get_conversation(store, conversation_id)
    rival = store.engine.connect()  # another worker's accept, written but not yet committed
    conversations.new_message(rival, conversation_id=conversation_id, seq=asked.learner.seq + 1, role="learner",
                              text="and panic?")
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        reply = pool.submit(turn_store.store_reply, store, conv, "understanding_anxiety", raw="{}", shown=None,
                            outcome="valid", flags=[], attempts=[], state=ProgressState(),
                            reply_to_seq=asked.learner.seq)
        time.sleep(0.3)  # PostgreSQL: the reply's INSERT waits on the rival's row; SQLite: on its lock
        rival.commit()
        rival.close()
        stored = reply.result(timeout=10)
    seqs = [(m.role, m.seq) for m in conversations.history(store, conversation_id)]
    assert seqs == [("learner", 0), ("learner", 1), ("tutor", 2)] and stored.seq == 2


def test_a_sqlite_too_old_for_returning_is_named_with_what_would_work(monkeypatch, tmp_path):
    monkeypatch.setattr(sqlite3, "sqlite_version_info", (3, 31, 1))
    monkeypatch.setattr(sqlite3, "sqlite_version", "3.31.1")
    with pytest.raises(ConfigError, match=r"SQLite 3\.31\.1 is too old: Tutor needs SQLite 3\.35.*TUTOR_DATABASE_URL"):
        Store(f"sqlite:///{tmp_path / 'tutor.db'}")
