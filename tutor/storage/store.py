"""Tables and the few queries the app needs. Schema changes go through alembic migrations."""

from __future__ import annotations

import contextvars
import functools
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any, TypeVar

import sqlalchemy
from sqlmodel import Field, Session, SQLModel, create_engine, select

from tutor.settings import REPO_ROOT, ConfigError, EnvReader, database_url
from tutor.storage import dbfaults
from tutor.storage.db_workers import Workers

ALEMBIC_INI = REPO_ROOT / "alembic.ini"


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def iso_utc(moment: datetime) -> str:
    if moment.tzinfo is None:  # SQLite hands naive values back
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Learner(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    key: str = Field(index=True, unique=True, max_length=128)  # browser token or CLI name
    created_at: datetime = Field(default_factory=utcnow)


class Conversation(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    learner_id: int = Field(foreign_key="learner.id", index=True)
    module_id: str = Field(index=True, max_length=128)
    status: str = Field(default="active", max_length=16)  # active | archived
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class Message(SQLModel, table=True):
    __table_args__ = (
        sqlalchemy.UniqueConstraint("conversation_id", "seq"),
        # A learner message's id made in the browser: a double click, a retry after a
        # reconnect or a second tab never stores the same message twice.
        sqlalchemy.Index("ix_message_conversation_client", "conversation_id", "client_id", unique=True),
    )

    id: int | None = Field(default=None, primary_key=True)
    conversation_id: int = Field(foreign_key="conversation.id", index=True)
    seq: int  # position in the conversation, from 0
    role: str = Field(max_length=16)  # learner | tutor
    # Learner: the text typed, or a readable summary of form answers. Tutor: unused.
    text: str = ""
    form_id: str | None = Field(default=None, max_length=128)
    answers_json: str | None = None
    # Tutor: the model's raw text exactly as received, what we made of it, and how.
    raw: str | None = None
    parsed_json: str | None = None  # the reply as shown, server meta applied; null if invalid
    outcome: str | None = Field(default=None, max_length=16)  # valid | repaired | invalid
    flags_json: str = "[]"
    form_states_json: str = "{}"  # form id -> {"status": open|submitted|skipped, "answers": {...}}
    # Tutor: the seq of the learner message this reply answers (None: the opening turn).
    reply_to_seq: int | None = None
    # Learner: the id the browser made for this send (null: CLI, older rows).
    client_id: str | None = Field(default=None, max_length=64)
    created_at: datetime = Field(default_factory=utcnow)

    @property
    def flags(self) -> list[str]:
        return json.loads(self.flags_json or "[]")

    @property
    def parsed(self) -> dict[str, Any] | None:
        return json.loads(self.parsed_json) if self.parsed_json else None

    @property
    def answers(self) -> dict[str, Any] | None:
        return json.loads(self.answers_json) if self.answers_json else None

    @property
    def form_states(self) -> dict[str, dict[str, Any]]:
        return json.loads(self.form_states_json or "{}")


class ProgressRecord(SQLModel, table=True):
    """Server-verified coverage, per learner and module."""

    __table_args__ = (sqlalchemy.UniqueConstraint("learner_id", "module_id"),)

    id: int | None = Field(default=None, primary_key=True)
    learner_id: int = Field(foreign_key="learner.id", index=True)
    module_id: str = Field(index=True, max_length=128)
    covered_json: str = "[]"
    milestones_json: str = "[]"
    updated_at: datetime = Field(default_factory=utcnow)


class AuditEvent(SQLModel, table=True):
    """One row per model attempt (seed 003): what was asked, what came back, how long."""

    id: int | None = Field(default=None, primary_key=True)
    conversation_id: int = Field(foreign_key="conversation.id", index=True)
    message_id: int | None = Field(default=None, foreign_key="message.id", index=True)
    attempt: int
    provider: str = Field(max_length=32)
    model: str = Field(max_length=128)
    strategy: str = Field(max_length=32)
    latency_ms: float
    tokens_in: int = 0
    tokens_out: int = 0
    outcome: str = Field(max_length=16)
    flags_json: str = "[]"
    error_class: str | None = Field(default=None, max_length=64)
    # The rest of the attempt: kind (first/retry/reask), temperature, finish_reason,
    # http_status, the error message.
    detail_json: str = "{}"
    created_at: datetime = Field(default_factory=utcnow)


class RiskEvent(SQLModel, table=True):
    """A learner message the safety screen flagged, for an operator to review (seed 003:
    a canonical label, a confidence, and evidence as offsets plus SHA-256 of the learner's
    text, never a copy of it). `label` is "screen_failed" when the model screen could not
    answer and the turn failed closed."""

    id: int | None = Field(default=None, primary_key=True)
    conversation_id: int = Field(foreign_key="conversation.id", index=True)
    message_id: int = Field(foreign_key="message.id", index=True)  # the learner's message
    reply_id: int | None = Field(default=None, foreign_key="message.id")  # what the learner was shown
    module_id: str = Field(index=True, max_length=128)
    label: str = Field(index=True, max_length=64)
    confidence: float = 0.0
    source: str = Field(max_length=16)  # the layer that raised it: offline (phrases) | semantic | model
    severity: str = Field(default="", max_length=16)  # imminent | serious ("" for screen_failed)
    # [{"field": form field id or null, "start": int, "end": int, "sha256": hex}]
    evidence_json: str = "[]"
    created_at: datetime = Field(default_factory=utcnow, index=True)
    alerted_at: datetime | None = None  # when the imminent-risk alert was delivered (TUTOR_SAFETY_ALERT_URL)
    reviewed_at: datetime | None = None
    reviewed_by: str | None = Field(default=None, max_length=128)
    review_note: str | None = None

    @property
    def evidence(self) -> list[dict[str, Any]]:
        return json.loads(self.evidence_json or "[]")


class ReplyClaim(SQLModel, table=True):
    """The right to answer one learner message (seq -1: the opening turn), held by one
    worker until `lease_until`; the holder renews it while the model writes, and drops it
    in the transaction that stores the reply. Another worker takes over an expired lease."""

    __table_args__ = (sqlalchemy.UniqueConstraint("conversation_id", "learner_seq"),)

    id: int | None = Field(default=None, primary_key=True)
    conversation_id: int = Field(foreign_key="conversation.id", index=True)
    learner_seq: int
    holder: str = Field(max_length=96)
    lease_until: datetime
    created_at: datetime = Field(default_factory=utcnow)


class CheckAttempt(SQLModel, table=True):
    """One judged answer to a check of understanding (seed 004): who answered what, and
    the score. `score` is null when the judge failed (the turn is flagged for review).
    Mastery is read from these rows: a topic is mastered in a conversation when each of its
    checks has a score at or above its threshold there."""

    id: int | None = Field(default=None, primary_key=True)
    conversation_id: int = Field(foreign_key="conversation.id", index=True)
    message_id: int = Field(foreign_key="message.id", index=True)  # the learner's answer
    reply_id: int | None = Field(default=None, foreign_key="message.id")  # the reply that showed the score
    module_id: str = Field(max_length=128)
    topic_id: str = Field(max_length=128)
    check_id: str = Field(max_length=128)
    score: int | None = None  # 0-10
    criteria_json: str = "{}"  # criterion name -> 0-10 (the rubric's names only)
    feedback: str = ""
    source: str = Field(max_length=16)  # builtin | model
    created_at: datetime = Field(default_factory=utcnow)


class Account(SQLModel, table=True):
    """A person who signs in (TUTOR_AUTH=accounts or header). Their conversations and
    progress are their learner's: `learner_id` links the account to the learner rows."""

    id: int | None = Field(default=None, primary_key=True)
    username: str = Field(index=True, unique=True, max_length=64)  # stored lower-case
    password_hash: str | None = None  # argon2; null for accounts made from a proxy header
    role: str = Field(default="learner", max_length=16)  # learner | operator
    learner_id: int = Field(foreign_key="learner.id", unique=True)
    disabled: bool = False
    created_at: datetime = Field(default_factory=utcnow)
    last_sign_in_at: datetime | None = None


class AuthSession(SQLModel, table=True):
    """A signed-in browser: the SHA-256 of the session cookie's token, never the token."""

    id: int | None = Field(default=None, primary_key=True)
    token_hash: str = Field(index=True, unique=True, max_length=64)
    account_id: int = Field(foreign_key="account.id", index=True)
    created_at: datetime = Field(default_factory=utcnow)
    expires_at: datetime
    last_seen_at: datetime = Field(default_factory=utcnow)


class TurnReview(SQLModel, table=True):
    """An operator's "reviewed" mark on a tutor turn that needed review (failed closed,
    truncated, stopped, judge failed). Risk flags keep theirs on RiskEvent."""

    id: int | None = Field(default=None, primary_key=True)
    message_id: int = Field(foreign_key="message.id", unique=True)
    reviewed_at: datetime = Field(default_factory=utcnow)
    reviewed_by: str = Field(max_length=128)
    note: str | None = None


TABLES = (Learner, Conversation, Message, ProgressRecord, AuditEvent, RiskEvent, ReplyClaim, CheckAttempt,
          Account, AuthSession, TurnReview)


# Database calls at once: a server's round trips overlap; SQLite writes one at a time and
# every call holds the GIL for most of its time, so more threads only add contention.
DEFAULT_DB_THREADS = 8
DEFAULT_SQLITE_THREADS = 2
# A pooled PostgreSQL connection idle this long is pinged before use and replaced if the
# server has gone (pool_pre_ping pinged at every checkout: a round trip per session). One
# used more recently is not: if the server went away meanwhile, the first statement on it
# fails like any statement in flight (dbfaults tells the learner), and SQLAlchemy replaces
# it and every pooled connection older than the failure.
PING_AFTER_IDLE_S = 1.0
SQLITE_NEEDED = (3, 35)  # RETURNING

T = TypeVar("T")


def db_threads(env: Any = None, *, sqlite: bool = False) -> int:
    """TUTOR_DB_THREADS: database calls one process runs at once (threads, and the pooled
    connections they use). A value that is not a whole number of at least 1 raises
    ConfigError (a ValueError) naming the variable and a value that works."""
    default = DEFAULT_SQLITE_THREADS if sqlite else DEFAULT_DB_THREADS
    return EnvReader(os.environ if env is None else env).integer("TUTOR_DB_THREADS", default, low=1)


class Store:
    """A database: the engine plus sessions, and the threads that call it. One per process."""

    def __init__(self, url: str | None = None, *, threads: int | None = None) -> None:
        self.url = url or database_url()
        sqlite = self.url.startswith("sqlite")
        if sqlite and sqlite3.sqlite_version_info < SQLITE_NEEDED:
            # A turn's statements use INSERT … RETURNING (tutor.turns.turn_store, conversations).
            raise ConfigError(f"SQLite {sqlite3.sqlite_version} is too old: Tutor needs SQLite "
                              f"{'.'.join(map(str, SQLITE_NEEDED))} or newer (Python 3.11+ from python.org bundles "
                              "one), or set TUTOR_DATABASE_URL to a PostgreSQL server")
        self.threads = threads or db_threads(sqlite=sqlite)
        options: dict[str, Any] = {"connect_args": {"check_same_thread": False}} if sqlite else {}
        if not (sqlite and _in_memory(self.url)):  # a file or a server: a QueuePool
            options.update(pool_size=self.threads, max_overflow=10)
        self.engine = create_engine(self.url, **options)
        # Reads on a server go through connections in autocommit: no BEGIN and ROLLBACK round
        # trips around them. Each statement still sees committed data only, as it does inside
        # a READ COMMITTED transaction. (SQLite's driver opens no transaction for a read.)
        self._reader = None if sqlite else create_engine(self.url, isolation_level="AUTOCOMMIT", **options)
        if sqlite:
            sqlalchemy.event.listen(self.engine, "connect", _sqlite_pragmas)
        for engine in (self.engine, self._reader) if self._reader is not None else ():
            sqlalchemy.event.listen(engine.pool, "checkin", _note_checkin)
            sqlalchemy.event.listen(engine.pool, "checkout", functools.partial(_ping_if_idle, engine))
        self._workers = Workers(self.threads, "tutor-db")

    async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """`fn(*args, **kwargs)` in one of the store's threads (asyncio.to_thread, but on
        threads sized to the database's pool: the loop's default executor has cores + 4
        threads, six here, and 200 learners' calls queued behind them)."""
        return await self._workers.run(functools.partial(contextvars.copy_context().run, fn, *args, **kwargs))

    @contextmanager
    def session(self, *, read_only: bool = False) -> Iterator[Session]:
        """A session; a database that cannot be used raises dbfaults.DatabaseUnavailable
        (cause and fix for the operator), any other error passes through unchanged.
        read_only: for reads only (on PostgreSQL every statement commits by itself)."""
        with self._faults(), Session(self._engine_for(read_only), expire_on_commit=False) as session:
            yield session

    @contextmanager
    def connect(self, *, read_only: bool = False) -> Iterator[sqlalchemy.Connection]:
        """A Core connection, for the calls every turn makes (tutor.turns.turn_store, claims,
        conversations): a session's bookkeeping costs more CPU than their statements. Its
        transaction begins with the first statement; commit() keeps what was written, and
        anything not committed is rolled back at the end. Faults and read_only as session()."""
        with self._faults(), self._engine_for(read_only).connect() as connection:
            yield connection

    def _engine_for(self, read_only: bool) -> sqlalchemy.Engine:
        return self._reader if read_only and self._reader is not None else self.engine

    @contextmanager
    def _faults(self) -> Iterator[None]:
        try:
            yield
        except Exception as exc:
            fault = dbfaults.classify(exc, self.url)
            if fault is None or fault is exc:
                raise
            raise fault from exc

    def migrate(self) -> None:
        """Bring the schema to the newest migration (alembic upgrade head)."""
        from alembic.config import Config

        from alembic import command

        config = Config(str(ALEMBIC_INI))
        config.set_main_option("script_location", str(REPO_ROOT / "alembic"))
        with self.engine.begin() as connection:
            config.attributes["connection"] = connection
            config.attributes["configure_logger"] = False  # keep the app's logging as it is
            command.upgrade(config, "head")

    def create_all(self) -> None:
        """For throwaway databases only (tests of code that is not about migrations)."""
        SQLModel.metadata.create_all(self.engine)

    def dispose(self) -> None:
        self._workers.shutdown()
        self.engine.dispose()
        if self._reader is not None:
            self._reader.dispose()


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA journal_mode=WAL")
    # In WAL mode NORMAL syncs at checkpoints, not at every commit: a commit survives the app
    # crashing and the file is never corrupted, but a power cut may lose the last ones (the
    # SQLite docs' advice for WAL). FULL cost an fsync per commit, three a turn, each one
    # holding the only write lock. PostgreSQL keeps every commit on disk.
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA busy_timeout=5000")
    # Deleted rows are overwritten with zeros, not left in free pages: a learner whose data
    # is deleted leaves no words in the file (tutor.console.learner_data also empties the WAL).
    cursor.execute("PRAGMA secure_delete=ON")
    cursor.close()


def _in_memory(url: str) -> bool:
    database = sqlalchemy.make_url(url).database
    return not database or database == ":memory:" or "mode=memory" in url


def _note_checkin(_dbapi_connection: Any, record: Any) -> None:
    if record is not None:
        record.info["checked_in"] = time.monotonic()


def _ping_if_idle(engine: Any, dbapi_connection: Any, record: Any, _proxy: Any) -> None:
    """Pessimistic disconnect handling for connections that sat idle: SQLAlchemy's own ping
    (pool_pre_ping), but not on every checkout, where it cost one round trip per session."""
    since = record.info.get("checked_in")
    if since is None or time.monotonic() - since < PING_AFTER_IDLE_S:
        return
    try:
        engine.dialect.do_ping(dbapi_connection)
    except engine.dialect.loaded_dbapi.Error as exc:
        if engine.dialect.is_disconnect(exc, dbapi_connection, None):
            raise sqlalchemy.exc.InvalidatePoolError(str(exc)) from exc  # reconnect, every connection
        raise


__all__ = [
    "AuditEvent",
    "CheckAttempt",
    "Conversation",
    "Learner",
    "Message",
    "ProgressRecord",
    "ReplyClaim",
    "RiskEvent",
    "Store",
    "TABLES",
    "select",
    "iso_utc",
    "utcnow",
]
