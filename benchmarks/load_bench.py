"""Throughput of one process: `python -m benchmarks.load_bench [--learners 200] [--turns 5] [--delay 2]`.

N simulated learners go through the real Engine at once (real database, the
OpenAI-compatible provider, the turn policy): each opens a conversation and gets the
tutor's opening turn, then sends `--turns` messages one after another, as the web page
does (accept, then respond_pending). The model is benchmarks/loopback_model.py in its own
process: every call is answered `--delay` seconds after it arrived (streamed: `--chunks`
events spread over the delay; `--no-stream` for whole replies).

A learner's turns are sequential, so with nothing else in the way a run takes
ideal = (turns + 1) x delay. Printed per run:

    wall / ideal       the run's wall time over the ideal (goal at 200 x 5: <= 1.25)
    overhead p50/95/99 per tutor turn, the opening included: its latency minus the delay
    CPU / turn         this process's CPU time, every thread, over the tutor turns, and as a
                       multiple of the baseline's (which cancels most of the machine's
                       speed); the event loop's own share, and how busy the loop thread was
    DB trips / turn    statements, BEGINs, commits, rollbacks and pool pings
    in flight          the most model calls the server had at once
    place-in-line      "your place in line" updates per turn the page would get (turns that
                       wait for a model slot: `--in-flight N` below the learners)
    loop lag p99/max   how late a 50 ms timer fired on the event loop
    model late p99     how far past the delay the server finished (it is not the bottleneck
                       while this stays near 0), and the server's CPU; this process's RSS

Baseline, first in the same run: the same learners making the same sequential calls
through the same provider and HTTP client, with no engine and no database: what the
loopback model and the HTTP client cost on their own.

`--runs 3` repeats the engine run in one process over the same database (new learners each
time): nothing should grow. `--pin` runs the engine on one CPU, as a worker with
TUTOR_PIN_CPU=auto (tutor/cpu_pin.py). `--breakdown` times each kind of database call (waiting for a
thread, running, CPU, back on the loop). `--database-url postgresql+psycopg2://...@host/db`
uses that PostgreSQL server: the benchmark creates a fresh database beside `db` and drops
it at the end; by default a fresh SQLite file in a temporary directory. `--profile FILE`
writes a yappi CPU profile (every thread) of the last run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchmarks.load_meters import DBCalls, DBTrips, loop_lag, rss_mb
from benchmarks.loopback_model import loopback_model, model_stats, pct

MODULE = "understanding_anxiety"
QUESTIONS = [
    "What does anxiety do in the body?",
    "Why does my heart race before a presentation?",
    "How is worry different from anxiety?",
    "Can you give me an example of avoidance?",
    "What could I try when I notice it starting?",
]

# ------------------------------------------------------------------ measuring


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
    queue_news: int = 0  # "your place in line" updates, every turn's

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
            "model_cpu_s": round(self.model.get("cpu_s", 0), 2), "rss_mb": self.model.get("rss_mb"),
            "errors": self.errors,
            "queue_news_per_turn": round(self.queue_news / turns, 2),
            "db_calls": self.db_calls,
        }


def show(s: dict[str, Any]) -> None:
    trips = "" if not s["db_trips"] else (
        f" | DB trips/turn {s['db_trips_per_turn']:.1f} ("
        + ", ".join(f"{k} {v:g}" for k, v in s["db_trips"].items()) + ")")
    vs = f" = {s['cpu_vs_baseline']:.1f}x baseline" if "cpu_vs_baseline" in s else ""
    print(f"{s['label']:>9}: wall {s['wall_s']:.1f} s / ideal {s['ideal_s']:g} s = {s['ratio']:.2f}x | overhead p50 "
          f"{s['overhead_p50_ms']:.0f} ms p95 {s['overhead_p95_ms']:.0f} ms p99 {s['overhead_p99_ms']:.0f} ms | "
          f"CPU/turn {s['cpu_ms_per_turn']:.1f} ms{vs} (event loop {s['loop_cpu_ms_per_turn']:.1f} ms, busy {100 * s['loop_busy']:.0f}%){trips} | in flight {s['max_in_flight']} | loop lag p99 "
          f"{s['loop_lag_p99_ms']:.0f} ms max {s['loop_lag_max_ms']:.0f} ms | model late p99 "
          f"{s['model_late_p99_ms']:.0f} ms, model CPU {s['model_cpu_s']:.1f} s | RSS {s['rss_mb']:.0f} MB"
          + (f" | place-in-line updates/turn {s['queue_news_per_turn']:.1f}" if s["queue_news_per_turn"] else "")
          + (f" | ERRORS {s['errors']}" if s["errors"] else ""), flush=True)


def show_calls(calls: dict[str, dict[str, float]]) -> None:
    for name, c in calls.items():
        print(f"{'':>11}{name:<18} x{c['calls']:<5} queued p50 {c['queued_p50_ms']:6.1f} ms p95 "
              f"{c['queued_p95_ms']:6.1f} | run p50 {c['run_p50_ms']:6.1f} ms p95 {c['run_p95_ms']:6.1f} | "
              f"back on the loop p50 {c['resumed_p50_ms']:6.1f} ms | CPU {c['cpu_mean_ms']:.2f} ms")


# ------------------------------------------------------------------ the learners


class QueueNews:
    """A turn's listener that only counts the "your place in line" updates the page would
    get (each one a frame to the browser)."""

    told = 0  # every turn's, this run

    async def queued(self, position: int) -> None:
        QueueNews.told += 1

    async def text(self, raw: str) -> None:
        pass

    async def status(self, status: str) -> None:
        pass


class Preview(QueueNews):
    """The web page's listener, minus Reflex: what it computes for every streamed delta."""

    def __init__(self) -> None:
        from tutor.turns.live import StreamFeed

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
    QueueNews.told = 0
    cpu0, loop0, t0 = time.process_time(), time.thread_time(), time.monotonic()
    results = await asyncio.gather(*(learner(i, overheads) for i in range(learners)), return_exceptions=True)
    wall, cpu, loop_cpu = time.monotonic() - t0, time.process_time() - cpu0, time.thread_time() - loop0
    sampler.cancel()
    errors = [r for r in results if isinstance(r, BaseException)]
    for e in errors[:3]:
        print(f"  a learner failed: {type(e).__name__}: {e}", file=sys.stderr)
    stats = await asyncio.to_thread(model_stats, root)
    stats["rss_mb"] = rss_mb()
    return Run(label, wall, (turns + 1) * delay, [o - delay for o in overheads], cpu,
               trips.take() if trips else {}, stats, lag, len(errors), calls.take() if calls else {}, loop_cpu,
               QueueNews.told)


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
        result = await engine.respond_pending(view.id, Preview() if preview else QueueNews())
        assert result is not None and result.reply.outcome == "valid", result
        overheads.append(time.monotonic() - t)
        for turn in range(turns):
            t = time.monotonic()
            # As the page sends: with the id it made for this send (a resend is stored once).
            await engine.accept(view.id, LearnerInput(text=QUESTIONS[turn % len(QUESTIONS)]),
                                client_id=f"{tag}-{i}-{turn}")
            result = await engine.respond_pending(view.id, Preview() if preview else QueueNews())
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
    from tutor.access.usage import UsageLimits, UsageSettings
    from tutor.content.modules import load_library
    from tutor.llm.config import LLMSettings
    from tutor.llm.factory import make_provider
    from tutor.storage.store import Store
    from tutor.teach import retrieval
    from tutor.turns.engine import Engine

    if args.pin:  # as a worker with TUTOR_PIN_CPU=auto (the model's process, already started, is not)
        from tutor.cpu_pin import pin_to_one_cpu

        print(f"pinned to CPU {pin_to_one_cpu()}", flush=True)
    env = {k: v for k, v in os.environ.items() if k.startswith("TUTOR_")}
    env.update(TUTOR_LLM_PROVIDER="openai", TUTOR_LLM_BASE_URL=f"{root}/v1", TUTOR_LLM_MODEL="bench-model",
               TUTOR_LLM_STREAM="1" if args.stream else "0")
    settings = LLMSettings.from_env(env)
    store = Store(db_url)
    store.migrate()
    trips = DBTrips(store.engine, getattr(store, "_reader", None))  # the reads' own pool, if any
    calls = DBCalls(store) if args.breakdown else None  # its timers cost CPU of their own
    provider = make_provider(settings)
    # The service's own limits, as tutor.turns.runtime makes them (turns per minute, daily
    # tokens, the cap on model calls in flight), with the cap at --in-flight when given.
    usage = UsageLimits(replace(UsageSettings.from_env(env), model_calls_in_flight=args.in_flight))
    library = load_library()
    engine = Engine(store, provider, library, settings, usage=usage)
    await asyncio.to_thread(retrieval.warm, list(library.modules.values()))  # as the app does at start
    out = []
    try:
        if not args.no_baseline:
            out.append((await baseline(provider, args.learners, args.turns, args.delay, root)).summary())
            show(out[-1])
        for run in range(args.runs):
            trips.take()
            if calls is not None:
                calls.take()
            profiler = start_profile(args.profile) if args.profile and run == args.runs - 1 else None
            result = await engine_run(engine, f"run {run + 1}", args.learners, args.turns, args.delay, root, trips,
                                      calls, args.preview)
            if profiler is not None:
                stop_profile(profiler, args.profile)
            out.append(result.summary())
            if not args.no_baseline:  # the engine's CPU as a multiple of the client's alone (machine speed cancels)
                out[-1]["cpu_vs_baseline"] = round(out[-1]["cpu_ms_per_turn"] / max(out[0]["cpu_ms_per_turn"], 1e-6), 2)
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


def event_loop(choice: str):
    """The event loop the app's server would run (granian takes uvloop when installed)."""
    if choice != "asyncio":
        try:
            import uvloop

            return uvloop.new_event_loop
        except ImportError:
            if choice == "uvloop":
                sys.exit("--loop uvloop: uvloop is not installed")
    return asyncio.new_event_loop


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
    parser.add_argument("--in-flight", type=int, default=None,
                        help="TUTOR_MODEL_CALLS_IN_FLIGHT for the engine (default: unset, as the app: sized "
                             "from the model server's /props total_slots, which the loopback model does not "
                             "report, so no cap; --in-flight 100 was the app's fixed default before)")
    parser.add_argument("--loop", choices=("auto", "asyncio", "uvloop"), default="auto",
                        help="event loop (auto: uvloop when installed, as the app's server, granian, chooses)")
    parser.add_argument("--pin", action="store_true",
                        help="run the engine pinned to one CPU, as a worker with TUTOR_PIN_CPU=auto")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    load = os.getloadavg()
    loop_factory = event_loop(args.loop)
    in_flight = "the backend's" if args.in_flight is None else args.in_flight
    print(f"{args.learners} learners x ({args.turns} turns + opening), model delay {args.delay:g} s, "
          f"model calls in flight: {in_flight}, "
          f"stream={'on' if args.stream else 'off'}, database={'PostgreSQL' if args.database_url else 'SQLite'}, "
          f"loop={loop_factory.__module__.split('.')[0]}, "
          f"load average {load[0]:.2f} {load[1]:.2f} on {os.cpu_count()} CPUs", flush=True)
    with loopback_model(args.delay, args.chunks) as root, database(args.database_url) as db_url:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            out = runner.run(bench(args, root, db_url))
    if args.json:
        print(json.dumps({"learners": args.learners, "turns": args.turns, "delay": args.delay, "stream": args.stream,
                          "database": "postgresql" if args.database_url else "sqlite", "runs": out}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
