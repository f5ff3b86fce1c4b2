"""Throughput of one process: `python -m benchmarks.load_bench [--learners 200] [--turns 5] [--delay 2]`.

N simulated learners go through the real Engine (real database, real OpenAI-compatible
provider and turn policy) at once: each opens a conversation (the tutor's opening turn)
and then sends `--turns` messages, one after another, as the web page does (accept, then
respond_pending). The model is a loopback server in its own process (plain asyncio
streams speaking just enough HTTP/1.1) that answers every call after exactly `--delay`
seconds with a valid ~1 KB tutor reply; streamed, its chunks are spread over the delay.

A learner's turns are sequential, so with nothing else in the way the run takes
ideal = (turns + 1) x delay. Printed per run:

    wall / ideal       the run's wall time as a multiple of the ideal (goal <= 1.25 at 200 x 5)
    overhead p50/95/99 per tutor turn (the opening included): its latency minus the delay
    CPU / turn         this process's CPU time (every thread) over the tutor turns
    DB trips / turn    statements + commits + rollbacks + pool pings, over the tutor turns
    in flight          the most model calls the server saw at once
    loop lag p99       how late a 50 ms timer fired on the event loop (blocking work)

Baseline, measured first in the same run: the same learners making the same number of
sequential calls through the same provider and HTTP client, no engine or database. It
shows what the loopback server and the HTTP client cost on their own (the server's own
lateness and CPU are printed too), so the engine's numbers can be read against it.

`--runs 3` repeats the engine run in one process over the same database (new learners
each time) to show whether anything grows. `--database-url postgresql+psycopg2://...`
uses that PostgreSQL server: the benchmark creates a fresh database there and drops it at
the end; by default a fresh SQLite file in a temporary directory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MODULE = "understanding_anxiety"
QUESTIONS = [
    "What does anxiety do in the body?",
    "Why does my heart race before a presentation?",
    "How is worry different from anxiety?",
    "Can you give me an example of avoidance?",
    "What could I try when I notice it starting?",
]

# ------------------------------------------------------------------ the loopback model


def tutor_reply() -> str:
    return json.dumps({
        "content": {
            "text_blocks": [
                {"type": "heading", "content": "Noticing the three levels", "level": 2},
                {"type": "paragraph", "content": "Anxiety shows up in the **body**, the **mind** and in "
                 "what we **do**. Noticing which comes first helps you choose a skill that fits."},
                {"type": "list", "content": "- Body: racing heart, tight chest\n- Mind: what-if "
                 "thoughts\n- Behaviour: avoiding, checking, leaving early"},
                {"type": "tip", "content": "Start with the level you notice most; small steps count."},
            ],
            "forms": [{
                "id": "quick_check", "title": "Quick check",
                "fields": [{"id": "level", "type": "radio", "label": "Which level is loudest for you?",
                            "options": [{"value": "body", "label": "Body"}, {"value": "mind", "label": "Mind"}]}],
                "submit_label": "Share", "optional": True,
            }],
            "next_step": {"prompt": "Shall we go on?", "suggestions": ["Tell me more", "Let's move on"]},
        },
        "meta": {"response_type": "educational", "emotion": "informative"},
    })


class LoopbackModel:
    """The server side (runs in its own process: `--serve`). Every answer ends `delay`
    seconds after its request arrived; lateness past that is measured and reported."""

    def __init__(self, delay: float, chunks: int) -> None:
        self.delay, self.chunks = delay, max(1, chunks)
        self.reply = tutor_reply()
        size = -(-len(self.reply) // self.chunks)
        self.pieces = [self.reply[i:i + size] for i in range(0, len(self.reply), size)]
        self.reset()

    def reset(self) -> None:
        self.in_flight = self.max_in_flight = self.calls = 0
        self.late: list[float] = []
        self.cpu0 = time.process_time()

    def stats(self) -> dict[str, Any]:
        late = sorted(self.late) or [0.0]
        return {"calls": self.calls, "max_in_flight": self.max_in_flight,
                "late_p50_ms": 1000 * pct(late, 50), "late_p99_ms": 1000 * pct(late, 99),
                "late_max_ms": 1000 * late[-1], "cpu_s": time.process_time() - self.cpu0}

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                arrived = time.monotonic()
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
                length = int(headers.get("content-length") or 0)
                body = await reader.readexactly(length) if length else b""
                if target.endswith("/chat/completions"):
                    await self.complete(json.loads(body), arrived, writer)
                elif target.startswith("/stats"):
                    out = self.stats()
                    if "reset" in target:
                        self.reset()
                    self.send(writer, 200, "application/json", json.dumps(out).encode())
                elif target == "/props":  # llama.cpp's: the context window
                    self.send(writer, 200, "application/json", b'{"default_generation_settings":{"n_ctx":32768}}')
                else:
                    self.send(writer, 404, "application/json", b'{"error":{"message":"not found"}}')
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    @staticmethod
    def send(writer: asyncio.StreamWriter, status: int, ctype: str, data: bytes) -> None:
        writer.write(f"HTTP/1.1 {status} X\r\ncontent-type: {ctype}\r\ncontent-length: {len(data)}\r\n\r\n".encode()
                     + data)

    async def complete(self, body: dict[str, Any], arrived: float, writer: asyncio.StreamWriter) -> None:
        self.calls += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        usage = {"prompt_tokens": sum(len(m.get("content") or "") for m in body["messages"]) // 4,
                 "completion_tokens": len(self.reply) // 4}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        try:
            if not body.get("stream"):
                await asyncio.sleep(max(0.0, arrived + self.delay - time.monotonic()))
                data = {"id": "bench", "object": "chat.completion", "model": body["model"], "usage": usage,
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": self.reply}}]}
                self.send(writer, 200, "application/json", json.dumps(data).encode())
            else:
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
                for i, piece in enumerate(self.pieces):
                    await asyncio.sleep(max(0.0, arrived + self.delay * (i + 1) / len(self.pieces) - time.monotonic()))
                    chunk = {"id": "bench", "object": "chat.completion.chunk", "model": body["model"],
                             "choices": [{"index": 0, "delta": {"content": piece},
                                          "finish_reason": "stop" if i == len(self.pieces) - 1 else None}]}
                    events = [chunk] + ([{"id": "bench", "choices": [], "usage": usage}] if i == len(self.pieces) - 1 else [])
                    text = "".join(f"data: {json.dumps(e)}\n\n" for e in events)
                    if i == len(self.pieces) - 1:
                        text += "data: [DONE]\n\n"
                    data = text.encode()
                    writer.write(b"%x\r\n%s\r\n" % (len(data), data))
                writer.write(b"0\r\n\r\n")
            await writer.drain()
            self.late.append(time.monotonic() - arrived - self.delay)
        finally:
            self.in_flight -= 1


def serve(delay: float, chunks: int) -> None:
    async def main() -> None:
        model = LoopbackModel(delay, chunks)
        server = await asyncio.start_server(model.handle, "127.0.0.1", 0, backlog=4096)
        print(server.sockets[0].getsockname()[1], flush=True)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.read)  # until the parent closes our stdin

    asyncio.run(main())


@contextmanager
def loopback_model(delay: float, chunks: int):
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.load_bench", "--serve", "--delay", str(delay),
                             "--chunks", str(chunks)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        port = int(proc.stdout.readline())
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.stdin.close()
        proc.wait(10)


def model_stats(root: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{root}/stats?reset", timeout=10) as response:
        return json.loads(response.read())


# ------------------------------------------------------------------ measuring


def pct(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


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
                try:
                    return fn(*args, **kwargs)
                finally:
                    marks.append(time.monotonic())

            try:
                return await run(call)
            finally:
                if len(marks) == 3:
                    name = getattr(fn, "__name__", "?")
                    self.calls.setdefault(name, []).append(
                        (marks[1] - marks[0], marks[2] - marks[1], time.monotonic() - marks[2]))

        store.run = timed_run

    def take(self) -> dict[str, dict[str, float]]:
        out = {name: {"calls": len(rows), **{f"{part}_p50_ms": round(1000 * pct([r[i] for r in rows], 50), 1)
                                             for i, part in enumerate(("queued", "run", "resumed"))},
                      "run_p95_ms": round(1000 * pct([r[1] for r in rows], 95), 1),
                      "queued_p95_ms": round(1000 * pct([r[0] for r in rows], 95), 1)}
               for name, rows in sorted(self.calls.items())}
        self.calls = {}
        return out


async def loop_lag(samples: list[float], interval: float = 0.05) -> None:
    loop = asyncio.get_running_loop()
    while True:
        t = loop.time()
        await asyncio.sleep(interval)
        samples.append(loop.time() - t - interval)


@dataclass
class Run:
    label: str
    wall_s: float
    ideal_s: float
    overheads: list[float]
    cpu_s: float
    trips: dict[str, int] = field(default_factory=dict)
    model: dict[str, Any] = field(default_factory=dict)
    lag: list[float] = field(default_factory=list)
    errors: int = 0
    db_calls: dict[str, Any] = field(default_factory=dict)
    loop_cpu_s: float = 0.0

    def summary(self) -> dict[str, Any]:
        turns = len(self.overheads) or 1
        return {
            "label": self.label, "wall_s": round(self.wall_s, 2), "ideal_s": self.ideal_s,
            "ratio": round(self.wall_s / self.ideal_s, 3), "turns": len(self.overheads),
            "overhead_p50_ms": round(1000 * pct(self.overheads, 50), 1),
            "overhead_p95_ms": round(1000 * pct(self.overheads, 95), 1),
            "overhead_p99_ms": round(1000 * pct(self.overheads, 99), 1),
            "cpu_ms_per_turn": round(1000 * self.cpu_s / turns, 2),
            "loop_cpu_ms_per_turn": round(1000 * self.loop_cpu_s / turns, 2),
            "loop_busy": round(self.loop_cpu_s / self.wall_s, 2),
            "db_trips_per_turn": round(sum(self.trips.values()) / turns, 2),
            "db_trips": {k: round(v / turns, 2) for k, v in self.trips.items()},
            "loop_lag_p99_ms": round(1000 * pct(self.lag, 99), 1), "loop_lag_max_ms": round(1000 * max(self.lag or [0]), 1),
            "max_in_flight": self.model.get("max_in_flight"), "model_late_p99_ms": round(self.model.get("late_p99_ms", 0), 1),
            "model_cpu_s": round(self.model.get("cpu_s", 0), 2), "errors": self.errors,
            "db_calls": self.db_calls,
        }


def show(s: dict[str, Any]) -> None:
    trips = "" if not s["db_trips"] else (
        f" | DB trips/turn {s['db_trips_per_turn']:.1f} ("
        + ", ".join(f"{k} {v:g}" for k, v in s["db_trips"].items()) + ")")
    print(f"{s['label']:>9}: wall {s['wall_s']:.1f} s / ideal {s['ideal_s']:g} s = {s['ratio']:.2f}x | overhead p50 "
          f"{s['overhead_p50_ms']:.0f} ms p95 {s['overhead_p95_ms']:.0f} ms p99 {s['overhead_p99_ms']:.0f} ms | "
          f"CPU/turn {s['cpu_ms_per_turn']:.1f} ms (event loop {s['loop_cpu_ms_per_turn']:.1f} ms, busy {100 * s['loop_busy']:.0f}%){trips} | in flight {s['max_in_flight']} | loop lag p99 "
          f"{s['loop_lag_p99_ms']:.0f} ms max {s['loop_lag_max_ms']:.0f} ms | model late p99 "
          f"{s['model_late_p99_ms']:.0f} ms, model CPU {s['model_cpu_s']:.1f} s"
          + (f" | ERRORS {s['errors']}" if s["errors"] else ""), flush=True)


def show_calls(calls: dict[str, dict[str, float]]) -> None:
    for name, c in calls.items():
        print(f"{'':>11}{name:<18} x{c['calls']:<5} queued p50 {c['queued_p50_ms']:6.1f} ms p95 "
              f"{c['queued_p95_ms']:6.1f} | run p50 {c['run_p50_ms']:6.1f} ms p95 {c['run_p95_ms']:6.1f} | "
              f"back on the loop p50 {c['resumed_p50_ms']:6.1f} ms")


# ------------------------------------------------------------------ the learners


class Preview:
    """The web page's listener, minus Reflex: what it computes for every streamed delta."""

    def __init__(self) -> None:
        from tutor.live import StreamFeed

        self.feed = StreamFeed()

    async def text(self, raw: str) -> None:
        self.feed.push(raw)

    async def status(self, status: str) -> None:
        self.feed.clear()


async def measured(label: str, learners: int, turns: int, delay: float, root: str, trips: DBTrips | None,
                   learner, calls: DBCalls | None = None) -> Run:
    lag: list[float] = []
    sampler = asyncio.create_task(loop_lag(lag))
    overheads: list[float] = []
    cpu0, loop0, t0 = time.process_time(), time.thread_time(), time.monotonic()
    results = await asyncio.gather(*(learner(i, overheads) for i in range(learners)), return_exceptions=True)
    wall, cpu, loop_cpu = time.monotonic() - t0, time.process_time() - cpu0, time.thread_time() - loop0
    sampler.cancel()
    errors = [r for r in results if isinstance(r, BaseException)]
    for e in errors[:3]:
        print(f"  a learner failed: {type(e).__name__}: {e}", file=sys.stderr)
    stats = await asyncio.to_thread(model_stats, root)
    return Run(label, wall, (turns + 1) * delay, [o - delay for o in overheads], cpu,
               trips.take() if trips else {}, stats, lag, len(errors), calls.take() if calls else {}, loop_cpu)


async def baseline(provider, learners: int, turns: int, delay: float, root: str) -> Run:
    """The same calls through the same provider and client: no engine, no database."""
    from tutor.llm.base import ChatMessage, CompletionRequest

    request = CompletionRequest([ChatMessage("system", "x" * 4000), ChatMessage("user", QUESTIONS[0])], 0.7, 2048)

    async def learner(i: int, overheads: list[float]) -> None:
        for _ in range(turns + 1):
            t = time.monotonic()
            completion = await provider.complete(request)
            assert completion.text
            overheads.append(time.monotonic() - t)

    return await measured("baseline", learners, turns, delay, root, None, learner)


async def engine_run(engine, label: str, learners: int, turns: int, delay: float, root: str, trips: DBTrips,
                     calls: DBCalls, preview: bool) -> Run:
    from tutor.llm.base import LearnerInput

    tag = uuid.uuid4().hex[:8]

    async def learner(i: int, overheads: list[float]) -> None:
        t = time.monotonic()
        view = await engine.open(f"bench-{tag}-{i}", MODULE, defer_opening=True)
        result = await engine.respond_pending(view.id, Preview() if preview else None)
        assert result is not None and result.reply.outcome == "valid", result
        overheads.append(time.monotonic() - t)
        for turn in range(turns):
            t = time.monotonic()
            await engine.accept(view.id, LearnerInput(text=QUESTIONS[turn % len(QUESTIONS)]))
            result = await engine.respond_pending(view.id, Preview() if preview else None)
            assert result is not None and result.reply.outcome == "valid", result.reply.flags
            overheads.append(time.monotonic() - t)

    return await measured(label, learners, turns, delay, root, trips, learner, calls)


@contextmanager
def database(url: str | None):
    """A fresh database: a SQLite file, or a new PostgreSQL database next to `url`'s."""
    if not url or url.startswith("sqlite"):
        with tempfile.TemporaryDirectory(prefix="tutor-load-bench-") as tmp:
            yield url or f"sqlite:///{Path(tmp) / 'tutor.db'}"
        return
    import sqlalchemy

    name = f"tutor_load_bench_{os.getpid()}"
    admin = sqlalchemy.create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"'))
    try:
        yield str(sqlalchemy.make_url(url).set(database=name).render_as_string(hide_password=False))
    finally:
        with admin.connect() as c:
            c.execute(sqlalchemy.text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        admin.dispose()


async def bench(args: argparse.Namespace, root: str, db_url: str) -> list[dict[str, Any]]:
    from tutor.engine import Engine
    from tutor.llm.config import LLMSettings
    from tutor.llm.factory import make_provider
    from tutor.modules import load_library
    from tutor.store import Store

    env = {k: v for k, v in os.environ.items() if k.startswith("TUTOR_")}
    env.update(TUTOR_LLM_PROVIDER="openai", TUTOR_LLM_BASE_URL=f"{root}/v1", TUTOR_LLM_MODEL="bench-model",
               TUTOR_LLM_STREAM="1" if args.stream else "0")
    settings = LLMSettings.from_env(env)
    store = Store(db_url)
    store.migrate()
    trips = DBTrips(store.engine, getattr(store, "_reader", None))  # the reads' own pool, if any
    calls = DBCalls(store)
    provider = make_provider(settings)
    engine = Engine(store, provider, load_library(), settings)
    out = []
    try:
        if not args.no_baseline:
            out.append((await baseline(provider, args.learners, args.turns, args.delay, root)).summary())
            show(out[-1])
        for run in range(args.runs):
            trips.take()
            calls.take()
            profiler = start_profile(args.profile) if args.profile and run == args.runs - 1 else None
            result = await engine_run(engine, f"run {run + 1}", args.learners, args.turns, args.delay, root, trips,
                                      calls, args.preview)
            if profiler is not None:
                stop_profile(profiler, args.profile)
            out.append(result.summary())
            show(out[-1])
            if args.breakdown:
                show_calls(out[-1]["db_calls"])
    finally:
        await provider.aclose()
        store.dispose()
    return out


def start_profile(path: str):
    try:
        import yappi
    except ImportError:
        sys.exit("--profile needs yappi (pip install yappi) to see every thread")
    yappi.set_clock_type("cpu")
    yappi.start()
    return yappi


def stop_profile(yappi, path: str) -> None:
    yappi.stop()
    yappi.get_func_stats().save(path, type="pstat")
    print(f"profile (CPU, every thread) written to {path}", file=sys.stderr)
    yappi.clear_stats()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--learners", type=int, default=200)
    parser.add_argument("--turns", type=int, default=5, help="learner messages each, after the opening turn")
    parser.add_argument("--delay", type=float, default=2.0, help="seconds the model takes for every reply")
    parser.add_argument("--chunks", type=int, default=20, help="streamed chunks per reply, spread over the delay")
    parser.add_argument("--runs", type=int, default=1, help="engine runs in this one process")
    parser.add_argument("--stream", action=argparse.BooleanOptionalAction, default=True,
                        help="TUTOR_LLM_STREAM (the app's default: on)")
    parser.add_argument("--preview", action="store_true", help="feed each streamed delta to the page's StreamFeed")
    parser.add_argument("--database-url", help="PostgreSQL server to make a fresh database on (default: SQLite)")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument("--breakdown", action="store_true", help="time each kind of database call")
    parser.add_argument("--profile", metavar="FILE", help="yappi CPU profile of the last run (pstats file)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.delay, args.chunks)
        return 0
    load = os.getloadavg()
    print(f"{args.learners} learners x ({args.turns} turns + opening), model delay {args.delay:g} s, "
          f"stream={'on' if args.stream else 'off'}, database={'PostgreSQL' if args.database_url else 'SQLite'}, "
          f"load average {load[0]:.2f} {load[1]:.2f} on {os.cpu_count()} CPUs", flush=True)
    with loopback_model(args.delay, args.chunks) as root, database(args.database_url) as db_url:
        out = asyncio.run(bench(args, root, db_url))
    if args.json:
        print(json.dumps({"learners": args.learners, "turns": args.turns, "delay": args.delay, "stream": args.stream,
                          "database": "postgresql" if args.database_url else "sqlite", "runs": out}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
