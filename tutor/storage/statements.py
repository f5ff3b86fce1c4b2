"""The statements every turn runs, compiled once per database and run on the driver's cursor.

A learner turn runs about fourteen statements (tutor.turns.conversations, turn_store, claims,
mastery). Through SQLAlchemy's execution each one cost ~60 µs of Python on top of the
database's own work — more CPU than the rest of the turn's database calls together, and
twice that beside a busy event loop (benchmarks/load_bench.py). A `Statement` keeps what
SQLAlchemy is good at — the SQL for each dialect, and each column type's conversion of
values both ways — and skips the per-execution machinery: the SQL, the order of its
parameters and the converters are worked out once per dialect, and each run is one call
on the DBAPI cursor.

What it keeps of SQLAlchemy's execution: the connection's transaction (Store.connect
begins it; commit() ends it), listeners of `before_cursor_execute` (statement counters),
and errors as SQLAlchemy raises them (IntegrityError, OperationalError, … wrapping the
driver's), with a lost connection invalidated so the pool replaces it. Statements with
expanding IN lists or parameters only known at run time are not for this: use
Connection.execute.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy
from sqlalchemy import Connection
from sqlalchemy.sql.elements import ClauseElement

__all__ = ["Result", "Statement"]


class Result:
    """What a run returned: rows as tuples (in `columns` order) and the rows changed (a new
    row's id comes back with RETURNING)."""

    __slots__ = ("columns", "rows", "rowcount")

    def __init__(self, columns: Sequence[str], rows: list[tuple], rowcount: int) -> None:
        self.columns, self.rows, self.rowcount = columns, rows, rowcount

    def first(self) -> dict[str, Any] | None:
        return dict(zip(self.columns, self.rows[0])) if self.rows else None

    def scalar(self) -> Any:
        return self.rows[0][0] if self.rows else None


class Statement:
    """A Core statement run straight on the DBAPI cursor (see the module's docstring).
    `keys`: for an INSERT given its values at run time, the columns always given."""

    __slots__ = ("statement", "keys", "_compiled")

    def __init__(self, statement: ClauseElement, *, keys: Sequence[str] = ()) -> None:
        self.statement, self.keys = statement, tuple(keys)
        self._compiled: dict[str, _Compiled] = {}

    def run(self, db: Connection, params: Mapping[str, Any] | None = None) -> Result:
        compiled = self._for(db.dialect)
        values = compiled.values(params or {})
        cursor = _cursor(db, compiled.sql, values)
        try:
            cursor.execute(compiled.sql, values)
            rows = cursor.fetchall() if compiled.columns else []
            rowcount = cursor.rowcount
        except Exception as exc:
            _raise(db, exc, compiled.sql, values, cursor)
        finally:
            cursor.close()
        if compiled.processors:
            rows = compiled.convert(rows)
        return Result(compiled.columns, rows, rowcount)

    def run_many(self, db: Connection, rows: Sequence[Mapping[str, Any]]) -> int:
        """An INSERT or UPDATE of many rows in one call (the driver's executemany); the
        rows changed, where the driver counts them."""
        compiled = self._for(db.dialect)
        if compiled.columns:
            raise ValueError("run_many does not return rows: use run() for a statement with RETURNING")
        values = [compiled.values(row) for row in rows]
        cursor = _cursor(db, compiled.sql, values, many=True)
        try:
            cursor.executemany(compiled.sql, values)
            return cursor.rowcount
        except Exception as exc:
            _raise(db, exc, compiled.sql, values, cursor)
        finally:
            cursor.close()

    def _for(self, dialect: sqlalchemy.Dialect) -> _Compiled:
        compiled = self._compiled.get(dialect.name)
        if compiled is None:
            compiled = self._compiled[dialect.name] = _Compiled(self.statement, dialect, self.keys)
        return compiled


class _Compiled:
    """A statement's SQL for one dialect, its parameters in the driver's order with their
    converters, and its result columns with theirs."""

    def __init__(self, statement: ClauseElement, dialect: sqlalchemy.Dialect, keys: Sequence[str]) -> None:
        compiled = statement.compile(dialect=dialect, column_keys=list(keys) or None)
        if compiled.insert_prefetch or compiled.update_prefetch:
            # Column defaults SQLAlchemy would compute for each execution: not done here.
            raise ValueError(f"give every column a value (keys=...): {compiled.string[:80]}")
        self.sql = compiled.string
        binds = compiled.binds
        names = list(compiled.positiontup or ()) if compiled.positional else list(compiled.bind_names.values())
        # (name, value when not given, converter): a literal in the statement ("tutor") and a
        # LIMIT are parameters with their value; a bindparam() without one must be given.
        self._params = [(name, _REQUIRED if binds[name].required else binds[name].effective_value,
                         binds[name].type.dialect_impl(dialect).bind_processor(dialect)) for name in names]
        self._positional = compiled.positional
        escaped = getattr(compiled, "escaped_bind_names", None) or {}
        self._driver_names = [escaped.get(name, name) for name in names]
        columns = list(getattr(statement, "exported_columns", ()))  # a SELECT's, or RETURNING's
        self.columns = tuple(c.key for c in columns)
        processors = [c.type.dialect_impl(dialect).result_processor(dialect, None) for c in columns]
        self.processors = processors if any(processors) else []

    def values(self, given: Mapping[str, Any]) -> Any:
        out = []
        for name, default, convert in self._params:
            value = given.get(name, default)
            if value is _REQUIRED:
                raise KeyError(f"no value for {name!r} in {self.sql[:80]!r}")
            out.append(value if convert is None or value is None else convert(value))
        return tuple(out) if self._positional else dict(zip(self._driver_names, out))

    def convert(self, rows: list[Any]) -> list[tuple]:
        processors = self.processors
        return [tuple(value if p is None or value is None else p(value) for p, value in zip(processors, row))
                for row in rows]


_REQUIRED: Any = object()


def _cursor(db: Connection, sql: str, values: Any, many: bool = False) -> Any:
    """A cursor on the connection's DBAPI connection, in its transaction, with the
    statement's listeners told (as SQLAlchemy tells them: no execution context)."""
    if not db.in_transaction():
        db.begin()
    cursor = db.connection.dbapi_connection.cursor()
    for listener in db.engine.dispatch.before_cursor_execute:  # the engine's (a connection's own: none)
        listener(db, cursor, sql, values, None, many)
    return cursor


def _raise(db: Connection, exc: Exception, sql: str, values: Any, cursor: Any) -> None:
    """The driver's error as SQLAlchemy raises it; a lost connection is invalidated (the
    pool replaces it, and Store.connect's caller gets dbfaults' DatabaseUnavailable)."""
    dialect = db.dialect
    dbapi_error = dialect.loaded_dbapi.Error
    if not isinstance(exc, dbapi_error):
        raise exc
    lost = dialect.is_disconnect(exc, db.connection.dbapi_connection, cursor)
    if lost:
        db.invalidate(exc)
    raise sqlalchemy.exc.DBAPIError.instance(sql, values, exc, dbapi_error, connection_invalidated=lost,
                                             dialect=dialect) from exc
