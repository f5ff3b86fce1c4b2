"""The database is unavailable: recognise it in one place, and say so calmly.

`classify(exc, url)` turns a driver's "cannot reach / cannot use the database" error
(SQLAlchemy OperationalError, InterfaceError, DisconnectionError, a pool timeout, a psycopg2
connection error, SQLite's "unable to open database file" or "database is locked" after its
busy timeout, a schema that was never migrated) into `DatabaseUnavailable`, whose
`operator_line` names the cause and the fix, with TUTOR_DATABASE_URL and never a password.
Anything else (a bug, a constraint) is not ours to reword: classify returns None.

Learners see the calm texts below, never the operator line; the operator gets one log
line per fault (`report`), with the traceback only at debug level.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import sqlalchemy
import sqlalchemy.exc

from tutor import settings
from tutor.i18n import N_

__all__ = [
    "DatabaseUnavailable", "FORM_NOT_SAVED", "MESSAGE_NOT_SAVED", "REPLY_NOT_SAVED", "UNAVAILABLE",
    "classify", "open_database", "redact", "report", "retry_until",
]

log = logging.getLogger(__name__)
T = TypeVar("T")

# What the learner reads (no causes, no addresses: those are the operator's).
# Catalogue msgids: the page shows them in the learner's language (tutor.i18n.localize).
MESSAGE_NOT_SAVED = N_("We couldn't save your message just now — it's still in the box. Please try again in a moment.")
FORM_NOT_SAVED = N_("We couldn't save your answers just now — they're still in the form. Please try again in a moment.")
REPLY_NOT_SAVED = N_("We couldn't save the tutor's reply just now. Your message is saved — send another message "
                     "or reload the page in a moment, and the tutor will answer it.")
UNAVAILABLE = N_("Tutor is unavailable right now. Please try again in a few minutes.")

PG_EXAMPLE = "postgresql+psycopg2://tutor:PASSWORD@127.0.0.1:5432/tutor"
REPEAT_S = 30.0  # the same operator line is logged at most once this often (a fault hits every learner)


class DatabaseUnavailable(Exception):
    """The database cannot be used right now. str() is the operator's line."""

    def __init__(self, cause: str, fix: str) -> None:
        self.cause = cause
        self.fix = fix
        self.logged = False  # report() logs a fault once, however many layers it crosses
        super().__init__(self.operator_line)

    @property
    def operator_line(self) -> str:
        return f"database unavailable ({self.cause}): {self.fix}"


# ---------------------------------------------------------------------------- classify


def classify(exc: BaseException, url: str | None = None) -> DatabaseUnavailable | None:
    """`exc` as DatabaseUnavailable when it means the database cannot be used; else None."""
    if isinstance(exc, DatabaseUnavailable):
        return exc
    orig = exc.orig if isinstance(exc, sqlalchemy.exc.DBAPIError) else exc
    if not isinstance(exc, sqlalchemy.exc.SQLAlchemyError) and not isinstance(orig, sqlite3.Error) \
            and not _is_psycopg2(orig):
        return None  # ours or the caller's (InputError, ClaimLost, ...): not a database fault
    url = url or _configured_url()
    where = _Where(url)
    if isinstance(exc, sqlalchemy.exc.TimeoutError):  # the pool: every connection busy
        return DatabaseUnavailable(
            f"no free database connection within the pool timeout at {where.place}",
            "the database is slow or overloaded: check it, or raise TUTOR_DB_THREADS "
            "(connections per process) if the database has room for more")
    if isinstance(exc, sqlalchemy.exc.DisconnectionError):
        return DatabaseUnavailable(f"the connection to {where.place} was lost", where.check_running())
    message = _first_line(str(orig))
    if isinstance(orig, sqlite3.Error):
        return _sqlite(orig, message, where)
    if _is_psycopg2(orig):
        return _postgres(orig, message, where)
    if isinstance(exc, sqlalchemy.exc.DBAPIError) and exc.connection_invalidated:
        return DatabaseUnavailable(f"the connection to {where.place} was lost ({message})", where.check_running())
    if isinstance(exc, (sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError)):
        return DatabaseUnavailable(message or type(orig).__name__, where.check_running())
    return None


def _sqlite(orig: sqlite3.Error, message: str, where: _Where) -> DatabaseUnavailable | None:
    lowered = message.lower()
    path = where.sqlite_path
    if "no such table" in lowered:
        return _unmigrated(where)
    if not isinstance(orig, sqlite3.OperationalError):
        return None
    if "unable to open database file" in lowered:
        folder = path.parent if path else None
        if folder is not None and not folder.is_dir():
            return DatabaseUnavailable(
                f"the folder {folder} for the SQLite file does not exist",
                f"create it (mkdir -p {folder}), or set TUTOR_DATABASE_URL=sqlite:///{_default_sqlite()} "
                "(the default when the variable is unset)")
        return DatabaseUnavailable(
            f"cannot open the SQLite file {path}",
            f"check that {path} and its folder can be read and written by this user, or set "
            f"TUTOR_DATABASE_URL=sqlite:///{_default_sqlite()}")
    if "database is locked" in lowered or "database table is locked" in lowered:
        return DatabaseUnavailable(
            f"the SQLite file {path} stayed locked by another writer past its busy timeout",
            f"find what holds it (fuser {path}); for many learners use PostgreSQL: TUTOR_DATABASE_URL={PG_EXAMPLE}")
    if "readonly" in lowered or "read-only" in lowered:
        return DatabaseUnavailable(f"the SQLite file {path} is read-only",
                                   f"make {path} and its folder writable by this user")
    if "disk i/o error" in lowered or "disk is full" in lowered or "malformed" in lowered:
        return DatabaseUnavailable(f"{message} on the SQLite file {path}",
                                   f"check the disk that holds {path} (space, errors)")
    return None


_PG_CAUSES: list[tuple[str, str, str]] = [  # (pattern in the driver's message, cause, fix kind)
    (r"connection refused", "connection refused at {place}", "running"),
    (r'database "[^"]*" does not exist', 'database "{db}" does not exist at {place}', "create"),
    (r"not currently accepting connections", 'database "{db}" is not accepting connections at {place}', "running"),
    (r"password authentication failed|no password supplied|role \"[^\"]*\" does not exist|pg_hba\.conf",
     'login refused for user "{user}" at {place}', "login"),
    (r"could not translate host name|name or service not known", 'host "{host}" not found', "host"),
    (r"timeout expired|timed out", "no answer from {place}", "running"),
    (r"too many clients|remaining connection slots", "too many connections at {place}", "slots"),
    (r"starting up|shutting down|in recovery mode|terminating connection|server closed the connection"
     r"|connection already closed|ssl connection has been closed|could not receive data|could not send data"
     r"|connection not open|no connection to the server",
     "the connection to {place} was closed", "running"),
]


def _postgres(orig: BaseException, message: str, where: _Where) -> DatabaseUnavailable | None:
    code = getattr(orig, "pgcode", None) or ""
    if code == "42P01":  # undefined_table
        return _unmigrated(where)
    if code.startswith("40"):  # serialization failure, deadlock: a conflict, not an outage
        return None
    kind = type(orig).__name__
    names = {c.__name__ for c in type(orig).__mro__}
    if not names & {"OperationalError", "InterfaceError"}:
        return None  # a constraint, a syntax error: a bug to see in full, not an outage
    for pattern, cause, fix in _PG_CAUSES:
        if re.search(pattern, message, re.IGNORECASE):
            return DatabaseUnavailable(cause.format(place=where.place, db=where.database, user=where.user,
                                                    host=where.host), where.fix(fix))
    return DatabaseUnavailable(f"{message or kind} at {where.place}", where.check_running())


def _unmigrated(where: _Where) -> DatabaseUnavailable:
    return DatabaseUnavailable(f"the database at {where.place} has no Tutor tables (not migrated)",
                               f"run `tutor db migrate` with TUTOR_DATABASE_URL={where.shown}")


def _is_psycopg2(exc: BaseException) -> bool:
    return type(exc).__module__.split(".")[0] in {"psycopg2", "psycopg"}


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    line = lines[0] if lines else ""
    line = re.sub(r'^connection to server at "[^"]*"(, port \d+)? failed:\s*', "", line)
    line = re.sub(r"^(FATAL|ERROR):\s*", "", line)
    return line[:200]


class _Where:
    """The configured database, for messages: address, names, the URL without a password."""

    def __init__(self, url: str) -> None:
        self.shown = redact(url)
        try:
            parsed = sqlalchemy.make_url(url)
        except Exception:  # not a URL at all: say what we were given
            parsed = None
        self.sqlite = bool(parsed and parsed.get_backend_name() == "sqlite")
        self.database = (parsed.database if parsed else None) or ""
        self.user = (parsed.username if parsed else None) or ""
        self.host = (parsed.host if parsed else None) or "localhost"
        self.port = (parsed.port if parsed else None) or 5432
        self.sqlite_path = Path(self.database).resolve() if self.sqlite and _is_file(self.database) else None
        self.place = f"{self.sqlite_path or 'memory'}" if self.sqlite else f"{self.host}:{self.port}"

    def check_running(self) -> str:
        if self.sqlite:
            return f"check the SQLite file {self.sqlite_path} (TUTOR_DATABASE_URL={self.shown})"
        return f"check that PostgreSQL is running and accepting connections at {self.place} and that " \
               f"TUTOR_DATABASE_URL={self.shown} is right"

    def fix(self, kind: str) -> str:
        if kind == "create":
            return (f"create it (createdb -h {self.host} -p {self.port}{f' -U {self.user}' if self.user else ''} "
                    f"{self.database}), or set TUTOR_DATABASE_URL to a database that exists (now {self.shown})")
        if kind == "login":
            return f"check the user and password in TUTOR_DATABASE_URL={self.shown}"
        if kind == "host":
            return f"check the host in TUTOR_DATABASE_URL={self.shown}"
        if kind == "slots":
            return "lower TUTOR_DB_THREADS (connections per process) or raise max_connections in PostgreSQL"
        return self.check_running()


def _is_file(database: str) -> bool:
    return bool(database) and database != ":memory:" and not database.startswith("file::memory:")


def redact(url: str) -> str:
    """The URL without its password (never log or print one)."""
    try:
        return sqlalchemy.make_url(url).render_as_string(hide_password=True)
    except Exception:
        return re.sub(r"(://[^:/@]*):[^@]*@", r"\1:***@", url)


def _configured_url() -> str:
    try:
        return settings.database_url()
    except OSError:
        return f"sqlite:///{_default_sqlite()}"


def _default_sqlite() -> Path:
    return settings.DATA_DIR / "tutor.db"


# ------------------------------------------------------------------ report and retry

_last_logged: dict[tuple[str, str], tuple[float, int]] = {}  # (what, line) -> (when logged, repeats since)
_log_lock = threading.Lock()


def report(fault: DatabaseUnavailable, logger: logging.Logger, what: str) -> None:
    """One warning line for the operator: what failed, the cause and the fix. The same kind
    of failure (`what` without its numbers) with the same line is not repeated within
    REPEAT_S seconds (the next line says how many it stood for); the traceback goes to debug."""
    if fault.logged:
        return
    fault.logged = True
    line = fault.operator_line
    key = (re.sub(r"\d+", "#", what), line)
    now = time.monotonic()
    with _log_lock:
        when, repeats = _last_logged.get(key, (None, 0))
        if when is not None and now - when < REPEAT_S:
            _last_logged[key] = (when, repeats + 1)
            quiet = True
        else:
            _last_logged[key] = (now, 0)
            quiet = False
    if not quiet:
        more = f" ({repeats} more like this in the last {REPEAT_S:.0f} s)" if repeats else ""
        logger.warning("%s: %s%s", what, line, more)
    logger.debug("%s: database fault", what, exc_info=fault)


async def retry_until(call: Callable[[], Awaitable[T]], window_s: float, what: str,
                      logger: logging.Logger = log) -> T:
    """`await call()` again while the database is unavailable, backing off (0.25 s doubling
    to 4 s), for up to `window_s` seconds from the first failure; then the fault is reported
    (one line) and raised."""
    started: float | None = None
    delay = 0.25
    while True:
        try:
            result = await call()
        except DatabaseUnavailable as fault:
            now = time.monotonic()
            started = now if started is None else started
            left = window_s - (now - started)
            if left <= 0:
                report(fault, logger, f"{what}: gave up after {window_s:.0f} s")
                raise
            await asyncio.sleep(min(delay, left))
            delay = min(delay * 2, 4.0)
            continue
        if started is not None:
            logger.info("%s: saved after the database was back (%.1f s)", what, time.monotonic() - started)
        return result


# ---------------------------------------------------------------------------- start-up


def open_database(url: str | None = None, *, migrate: bool = True):
    """Start-up: the Store for TUTOR_DATABASE_URL, its SQLite folder made if missing, its
    schema migrated (or, with migrate=False, one connection made). An unusable database
    raises DatabaseUnavailable naming TUTOR_DATABASE_URL; `startup_message` adds a value
    that works."""
    from tutor.storage.store import Store  # the store imports this module

    try:
        url = url or settings.database_url()
    except OSError as exc:
        raise DatabaseUnavailable(
            f"cannot create the data folder {settings.DATA_DIR} ({exc.strerror or exc})",
            "set TUTOR_DATA_DIR to a writable folder, or TUTOR_DATABASE_URL to a database") from exc
    _make_sqlite_folder(url)
    try:
        store = Store(url)
    except (sqlalchemy.exc.ArgumentError, sqlalchemy.exc.NoSuchModuleError) as exc:
        scheme = url.partition("://")[0]
        hint = " (PostgreSQL URLs start postgresql+psycopg2://)" if scheme.startswith("postgres") else ""
        raise DatabaseUnavailable(
            f"TUTOR_DATABASE_URL={redact(url)} is not a database URL this app can use: {_first_line(str(exc))}",
            f"set e.g. TUTOR_DATABASE_URL={PG_EXAMPLE}{hint}") from exc
    try:
        if migrate:
            store.migrate()
        else:
            with store.engine.connect() as connection:
                connection.execute(sqlalchemy.text("SELECT 1"))
    except Exception as exc:
        store.dispose()
        fault = classify(exc, url)
        if fault is None:
            raise
        raise fault from exc
    return store


def startup_message(fault: DatabaseUnavailable) -> str:
    """The operator line and a value of TUTOR_DATABASE_URL that works without a server."""
    default = f"sqlite:///{_default_sqlite()}"
    if default in fault.fix:
        return fault.operator_line
    return (f"{fault.operator_line}\n"
            f"  A value that works without a database server: TUTOR_DATABASE_URL={default} "
            "(the default when TUTOR_DATABASE_URL is unset)")


def _make_sqlite_folder(url: str) -> None:
    where = _Where(url)
    if where.sqlite_path is None or where.sqlite_path.parent.is_dir():
        return
    folder = where.sqlite_path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DatabaseUnavailable(
            f"the folder {folder} for the SQLite file cannot be created: {exc.strerror or exc}",
            f"create it yourself, or set TUTOR_DATABASE_URL=sqlite:///{_default_sqlite()} "
            "(the default when the variable is unset)") from exc
    log.info("created the folder %s for the SQLite database", folder)
