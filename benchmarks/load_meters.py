"""What benchmarks/load_bench.py measures besides wall time: the database's round trips
(DBTrips), where each database call's time goes (DBCalls), the process's memory and the
event loop's lag."""

from __future__ import annotations

import asyncio
import os
import statistics
import time

from benchmarks.loopback_model import pct


class DBTrips:
    """Round trips to the database: statements, the BEGIN a driver sends before a
    transaction's first statement (psycopg2: any; sqlite3: a write), commits, rollbacks of
    an open transaction (the pool's reset included) and the pool's pings."""

    def __init__(self, *engines) -> None:
        self.counts = {"statements": 0, "begins": 0, "commits": 0, "rollbacks": 0, "pings": 0}
        for engine in engines:
            if engine is not None:
                self._listen(engine)

    def _listen(self, engine) -> None:
        from sqlalchemy import event

        event.listen(engine, "before_cursor_execute", self._statement)
        event.listen(engine, "commit", lambda conn: self._add("commits"))
        event.listen(engine, "rollback", self._rollback)
        event.listen(engine.pool, "reset", self._reset)
        dialect, ping = engine.dialect, engine.dialect.do_ping

        def counted_ping(dbapi_connection):
            self._add("pings")
            return ping(dbapi_connection)

        dialect.do_ping = counted_ping

    def _add(self, name: str) -> None:
        self.counts[name] += 1  # a lost increment between threads is within the noise

    def _statement(self, conn, _cursor, statement: str, *args) -> None:
        self._add("statements")
        dbapi = conn.connection.dbapi_connection
        if not _open(dbapi) and not getattr(dbapi, "autocommit", False):
            if hasattr(dbapi, "in_transaction"):  # sqlite3 begins before writes only
                if statement.lstrip()[:6].upper() in ("INSERT", "UPDATE", "DELETE", "REPLAC"):
                    self._add("begins")
            else:
                self._add("begins")

    def _rollback(self, conn) -> None:
        if _open(conn.connection.dbapi_connection):
            self._add("rollbacks")

    def _reset(self, dbapi_connection, record, reset_state=None) -> None:
        if not getattr(reset_state, "transaction_was_reset", False) and _open(dbapi_connection):
            self._add("rollbacks")

    def take(self) -> dict[str, int]:
        out = dict(self.counts)
        for k in self.counts:
            self.counts[k] = 0
        return out


def _open(dbapi_connection) -> bool:
    """Whether the DBAPI connection is inside a transaction (sqlite3, psycopg2)."""
    if hasattr(dbapi_connection, "in_transaction"):
        return bool(dbapi_connection.in_transaction)
    info = getattr(dbapi_connection, "info", None)
    return bool(getattr(info, "transaction_status", 0))


class DBCalls:
    """Where each database call's time goes: waiting for a thread, running, and waiting for
    the event loop to pick the result up (Store.run, timed from outside)."""

    def __init__(self, store) -> None:
        self.calls: dict[str, list[tuple[float, float, float]]] = {}
        run = store.run

        async def timed_run(fn, /, *args, **kwargs):
            marks = [time.monotonic()]

            def call():
                marks.append(time.monotonic())
                cpu = time.thread_time()
                try:
                    return fn(*args, **kwargs)
                finally:
                    marks.append(time.monotonic())
                    marks.append(time.thread_time() - cpu)

            try:
                return await run(call)
            finally:
                if len(marks) == 4:
                    name = getattr(fn, "__name__", "?")
                    self.calls.setdefault(name, []).append(
                        (marks[1] - marks[0], marks[2] - marks[1], time.monotonic() - marks[2], marks[3]))

        store.run = timed_run

    def take(self) -> dict[str, dict[str, float]]:
        out = {name: {"calls": len(rows), **{f"{part}_p50_ms": round(1000 * pct([r[i] for r in rows], 50), 1)
                                             for i, part in enumerate(("queued", "run", "resumed"))},
                      "run_p95_ms": round(1000 * pct([r[1] for r in rows], 95), 1),
                      "cpu_mean_ms": round(1000 * statistics.fmean(r[3] for r in rows), 2),
                      "queued_p95_ms": round(1000 * pct([r[0] for r in rows], 95), 1)}
               for name, rows in sorted(self.calls.items())}
        self.calls = {}
        return out


def rss_mb() -> float:
    """This process's resident memory now (Linux), else its peak."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def loop_lag(samples: list[float], interval: float = 0.05) -> None:
    loop = asyncio.get_running_loop()
    while True:
        t = loop.time()
        await asyncio.sleep(interval)
        samples.append(loop.time() - t - interval)
