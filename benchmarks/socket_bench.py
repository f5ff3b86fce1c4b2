"""A class through the running app: `python -m benchmarks.socket_bench [--learners 50,100,200] [--workers 1,2]`.

N learners use the app at once as the chat page does: each opens a websocket to the app
(started as a user starts it, scripts/run.sh; anonymous mode), hydrates, loads the chat page
of one module, waits for the tutor's opening turn, then sends `--messages` messages one after
another, each as soon as the previous reply is shown and the tutor is idle. The model is
benchmarks/loopback_model.py in its own process: every call is answered `--delay` seconds
after it arrived, streamed as `--chunks` events spread over the delay (`--no-stream`: whole).

The page's socket is not imitated by hand: the frames each learner sends are the ones a real
chromium page sent, recorded by `python -m benchmarks.socket_record` into
benchmarks/socket_frames.json — the socket.io CONNECT packet whose auth payload carries the
page's hydrate-and-load event, and the send of a typed message with its client id (all the
page sends for these steps, besides engine.io's pongs) — and replayed verbatim over
engine.io's websocket transport, with only the tab's own values put in (socket token, client
id, text). A frontend built for another state tree is told so by the app (`state_mismatch`):
the benchmark then stops and asks for a new recording. What comes back is read as the page
reads it: the deltas' variables (`sent_ids`: the message is stored; `stream_block_*` /
`stream_tail_*` or a new `latest_tutor_id`: the first text is on the page;
`latest_tutor_id`: the stored reply is shown; `thinking` false: the tutor is idle).

The app runs with the settings of socket_record.bench_env: the loopback model, usage limits
that a class from one address does not hit, the model safety screen off (the loopback model
answers every call with a lesson; the offline screen runs). Before the measured waves,
`--warmup` learners go through once, unmeasured.

Printed per run (one app per `--workers` value; the learner counts run one after another
against it, fresh learners each time):

    turns/s          tutor turns (openings and replies) over the wave's wall time, and as a
                     share of the ideal (N learners x (messages + 1) turns in (messages + 1)
                     x delay)
    stored           Enter -> the page hears its message is stored: p50 / p95
    first / final    Enter -> first text block / stored reply shown, p50 / p95, minus the
                     model's own time for it (first text: when the loopback stream holds
                     it, as the app's own preview reads it; final reply: the delay)
    lost / dup       checked in the database afterwards: a message sent and not stored, or
                     stored and not answered (lost); stored twice or answered twice (dup);
                     the same for the opening turns
    CPU/turn         CPU of all the app's processes (psutil: the server and its workers)
                     over the wave, per tutor turn
    frames, bytes    websocket frames and bytes the page received per message turn (Enter
                     until the tutor is idle again)
    MB/learner       the app's resident memory with every learner connected, minus before
                     the wave, per learner

Baseline, same run: each row's first / final p95, CPU per turn and frames per turn as a
multiple of the smallest learner count's (the same app, the same machine a minute earlier).
Several workers need Redis (`--redis-url`) and PostgreSQL (`--database-url`, a server where a
fresh database is made and dropped afterwards); one worker uses a fresh SQLite file unless
`--postgres` is given. The benchmark's own process shares the machine: its CPU is printed too.
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
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.load_bench import QUESTIONS, database, event_loop
from benchmarks.loopback_model import loopback_model, pct
from benchmarks.socket_measure import (
    AppProcesses,
    check_database,
    model_first_text,
    shows_text,
)
from benchmarks.socket_record import FRAMES, MODULE, bench_env

REDIS_DB = 14  # flushed before each multi-worker app starts
MARK = "_rx_state_"  # Reflex's suffix on a state variable's name in a delta


def fill(template: str, **values: str) -> str:
    """A recorded frame with this tab's values in (escaped for a JSON string)."""
    for name, value in values.items():
        template = template.replace(f"@{name.upper()}@", json.dumps(value)[1:-1])
    return template


@dataclass
class Turn:
    sent: float
    client_id: str = ""
    stored: float | None = None
    first: float | None = None
    final: float | None = None
    idle: float | None = None
    frames: int = 0
    bytes: int = 0


# Added to a question to make each learner's message their own (Tab.text).
OPENERS = ["It came up again for me on day", "I wrote this down in my notes as number",
           "My friend asked me the same thing on day", "I have been wondering about it since lesson",
           "This is my question for week"]


class Tab:
    """One learner's chat page: its socket, and what the deltas it received told it."""

    def __init__(self, recorded: dict[str, Any], host: str, tag: str, index: int, unique: bool = True) -> None:
        self.recorded, self.host, self.unique = recorded, host, unique
        self.values = dict(token=str(uuid.uuid4()), learner_key=uuid.uuid4().hex, module=MODULE, host=host)
        self.tag, self.index = tag, index
        self.tutor_id = 0
        self.thinking = False
        self.turn: Turn | None = None
        self.turns: list[Turn] = []
        self.frames = self.bytes = 0
        self.changed = asyncio.Event()
        self.error = ""
        self.ws = None

    async def open(self, session) -> None:
        url = fill(self.recorded["url"], **self.values)
        self.ws = await session.ws_connect(url, headers={"Origin": f"http://{self.host}"}, max_msg_size=0,
                                           autoping=False)
        hello = await self.ws.receive_str(timeout=60)  # engine.io's open packet, then the page's frames
        assert hello.startswith("0"), hello
        self.reader = asyncio.create_task(self.read())
        for frame in self.recorded["sent"]:
            if frame["step"] == "open":
                await self.ws.send_str(fill(frame["frame"], **self.values))

    async def read(self) -> None:
        async for message in self.ws:
            data = message.data
            if not isinstance(data, str):
                continue
            if data == "2":  # the server's ping
                await self.ws.send_str("3")
                continue
            self.frames += 1
            self.bytes += len(data.encode())
            packet, body = data[:2], data[2:]
            if body.startswith("/"):  # socket.io's namespace (the page's: /_event)
                body = body.partition(",")[2]
            if packet == "44":
                self.error = f"the app refused the connection: {body[:200]}"
            elif packet == "42":
                kind, *args = json.loads(body)
                if kind == "event" and args and isinstance(args[0], dict):
                    self.apply(args[0].get("delta") or {})
                elif kind == "state_mismatch":
                    self.error = "the app's state changed since the frames were recorded: python -m " \
                                 "benchmarks.socket_record"
            self.changed.set()
        self.changed.set()

    def apply(self, delta: dict[str, dict[str, Any]]) -> None:
        now, turn = time.monotonic(), self.turn
        for values in delta.values():
            for name, value in values.items():
                name = name.removesuffix(MARK)
                if name == "thinking":
                    self.thinking = bool(value)
                elif name == "latest_tutor_id" and isinstance(value, int) and value > self.tutor_id:
                    self.tutor_id = value
                    if turn is not None:
                        turn.final = turn.final or now
                        turn.first = turn.first or now
                elif turn is None:
                    continue
                elif name == "sent_ids" and turn.client_id in str(value).split():
                    turn.stored = turn.stored or now
                elif name == "refused_ids" and turn.client_id in str(value).split():
                    self.error = self.error or f"message {turn.client_id} refused"
                elif turn.first is None and shows_text(name, value):
                    turn.first = now
                elif name == "load_error" and value:
                    self.error = self.error or f"load error: {value}"
        self.changed.set()

    async def until(self, done, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if self.error or self.ws.closed:
                raise RuntimeError(self.error or "socket closed")
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                raise TimeoutError(f"learner {self.index}: nothing after {timeout:g} s") from None

    async def send(self, text: str, number: int) -> tuple[Turn, int, int]:
        turn = Turn(time.monotonic(), f"{self.tag}-{self.index}-{number}")
        frames0, bytes0 = self.frames, self.bytes
        self.turn = turn
        for frame in self.recorded["sent"]:
            if frame["step"] == "send":
                await self.ws.send_str(fill(frame["frame"], text=text, client_id=turn.client_id, **self.values))
        self.turns.append(turn)
        return turn, frames0, bytes0

    def text(self, number: int) -> str:
        """The learner's message: one of a few questions, each sent by every learner in its
        own words (`unique`: a sentence of its own added), as a class writes. The same
        texts over and over would be read from the app's caches (a message's vectors are
        kept by its text) and leave out what reading a new message costs."""
        question = QUESTIONS[(self.index + number) % len(QUESTIONS)]
        if not self.unique:
            return question
        day = int(self.tag[:6], 16) % 997 * 10_000 + self.index * 10 + number
        return f"{question} {OPENERS[(self.index + 3 * number) % len(OPENERS)]} {day}."

    async def run(self, session, messages: int, timeout: float) -> None:
        await self.open(session)
        await self.until(lambda: self.tutor_id > 0 and not self.thinking, timeout)  # the opening turn
        for number in range(messages):
            turn, frames0, bytes0 = await self.send(self.text(number), number)
            await self.until(lambda turn=turn: turn.final is not None and not self.thinking, timeout)
            turn.idle = time.monotonic()
            turn.frames, turn.bytes = self.frames - frames0, self.bytes - bytes0

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
            self.reader.cancel()


@dataclass
class Wave:
    learners: int
    wall: float
    turns: int
    stored: list[float]
    first: list[float]
    final: list[float]
    frames: list[int]
    bytes: list[int]
    app_cpu: float
    bench_cpu: float
    mb_per_learner: float
    errors: list[str] = field(default_factory=list)
    tag: str = ""
    check: dict[str, int] = field(default_factory=dict)


async def wave(app_url: str, pids: AppProcesses, recorded: dict[str, Any], learners: int, messages: int,
               timeout: float, unique: bool = True) -> tuple[Wave, list[Tab]]:
    import aiohttp

    host = app_url.split("://", 1)[1]
    tag = uuid.uuid4().hex[:10]
    tabs = [Tab(recorded, host, tag, i, unique) for i in range(learners)]
    rss0, cpu0, mine0 = pids.rss_mb(), pids.cpu(), time.process_time()
    t0 = time.monotonic()
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        runs = (tab.run(session, messages, timeout) for tab in tabs)
        results = await asyncio.gather(*runs, return_exceptions=True)
        wall = time.monotonic() - t0
        app_cpu, mine = pids.cpu() - cpu0, time.process_time() - mine0
        rss = pids.rss_mb()  # every learner still connected
        await asyncio.gather(*(tab.close() for tab in tabs), return_exceptions=True)
    errors = [f"{type(r).__name__}: {r}" for r in results if isinstance(r, BaseException)]
    turns = [t for tab in tabs for t in tab.turns if t.idle is not None]
    done = learners - len(errors)
    out = Wave(learners, wall, done * (messages + 1), [t.stored - t.sent for t in turns if t.stored],
               [t.first - t.sent for t in turns], [t.final - t.sent for t in turns],
               [t.frames for t in turns], [t.bytes for t in turns], app_cpu, mine,
               (rss - rss0) / learners, errors, tag)
    return out, tabs


def ms(values: list[float], p: float, minus: float = 0.0) -> float | None:
    return round(1000 * (pct(values, p) - minus), 1) if values else None


def summary(w: Wave, delay: float, first_model: float) -> dict[str, Any]:
    n = max(1, len(w.frames))
    return {
        "learners": w.learners, "wall_s": round(w.wall, 2), "turns": w.turns,
        "turns_per_s": round(w.turns / w.wall, 2),
        "of_ideal": round((w.turns / w.wall) / (w.learners / delay), 3),
        "stored_p50_ms": ms(w.stored, 50), "stored_p95_ms": ms(w.stored, 95),
        "first_over_model_p50_ms": ms(w.first, 50, first_model),
        "first_over_model_p95_ms": ms(w.first, 95, first_model),
        "final_over_delay_p50_ms": ms(w.final, 50, delay), "final_over_delay_p95_ms": ms(w.final, 95, delay),
        "lost": w.check.get("lost"), "duplicated": w.check.get("duplicated"), "check": w.check,
        "app_cpu_ms_per_turn": round(1000 * w.app_cpu / max(1, w.turns), 2),
        "app_cores_busy": round(w.app_cpu / w.wall, 2),
        "frames_per_turn": round(sum(w.frames) / n, 1), "bytes_per_turn": round(sum(w.bytes) / n),
        "mb_per_learner": round(w.mb_per_learner, 3), "bench_cpu_s": round(w.bench_cpu, 2),
        "errors": len(w.errors),
    }


def show(s: dict[str, Any], base: dict[str, Any] | None) -> None:
    def x(key: str) -> str:
        if base is None or base is s or not base.get(key) or s.get(key) is None:
            return ""
        return f" ({s[key] / base[key]:.2f}x)"

    print(f"{s['learners']:>5} learners: {s['turns_per_s']:.1f} turns/s ({100 * s['of_ideal']:.0f}% of ideal) | "
          f"stored p50 {s['stored_p50_ms']} / p95 {s['stored_p95_ms']} ms | "
          f"first block over the model p50 {s['first_over_model_p50_ms']} / p95 {s['first_over_model_p95_ms']} ms"
          f"{x('first_over_model_p95_ms')} | final reply over the delay p50 {s['final_over_delay_p50_ms']} / "
          f"p95 {s['final_over_delay_p95_ms']} ms{x('final_over_delay_p95_ms')} | "
          f"lost {s['lost']}, duplicated {s['duplicated']} | app CPU/turn {s['app_cpu_ms_per_turn']:.1f} ms"
          f"{x('app_cpu_ms_per_turn')} ({s['app_cores_busy']:.2f} cores) | {s['frames_per_turn']:.1f} frames, "
          f"{s['bytes_per_turn']:,} B per turn{x('frames_per_turn')} | {s['mb_per_learner']:.2f} MB/learner | "
          f"bench CPU {s['bench_cpu_s']:.1f} s" + (f" | ERRORS {s['errors']}" if s["errors"] else ""), flush=True)


def check_recorded(recorded: dict[str, Any]) -> None:
    """The recorded send must still name the chat page's handler (else re-record)."""
    from tutor.web.state import ChatState

    wanted = f'"{ChatState.get_full_name()}.send_text"'
    if not any(f["step"] == "send" and wanted in f["frame"] for f in recorded["sent"]):
        sys.exit(f"{FRAMES.name} does not send {wanted}: the page changed; "
                 "run python -m benchmarks.socket_record")


def run_app(args: argparse.Namespace, root: str, workers: int, recorded: dict[str, Any]) -> list[dict[str, Any]]:
    from tests.browser.app_runner import RunningApp

    shared = workers > 1 or args.postgres
    rows: list[dict[str, Any]] = []
    with ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tutor-socket-bench-")))
        env = dict(bench_env(root, args.stream), GRANIAN_WORKERS=str(workers))
        if shared:
            import redis

            db_url = stack.enter_context(database(args.database_url))
            redis.Redis.from_url(args.redis_url, db=REDIS_DB).flushdb()
            env.update(TUTOR_DATABASE_URL=db_url, TUTOR_REDIS_URL=f"{args.redis_url.rstrip('/')}/{REDIS_DB}")
        app = RunningApp.create(tmp, **env)
        db_url = env.get("TUTOR_DATABASE_URL") or f"sqlite:///{app.db_path}"
        kind = "Redis + PostgreSQL" if shared else "SQLite"
        print(f"[{workers} worker(s), {kind}] starting the app on {app.url} ...", file=sys.stderr, flush=True)
        stack.callback(app.stop)  # also when it fails to start
        app.start()
        pids = AppProcesses(app.process.pid)
        first_model = model_first_text(args.delay, args.chunks) if args.stream else args.delay
        if args.warmup:  # the app's first turns load what later ones reuse: not measured
            with asyncio.Runner(loop_factory=event_loop("auto")) as runner:
                runner.run(wave(app.url, pids, recorded, args.warmup, 1, args.timeout))
        for learners in args.learners:
            time.sleep(args.pause)
            with asyncio.Runner(loop_factory=event_loop("auto")) as runner:
                w, tabs = runner.run(wave(app.url, pids, recorded, learners, args.messages, args.timeout,
                                          unique=args.texts == "unique"))
            for e in w.errors[:3]:
                print(f"  a learner failed: {e}", file=sys.stderr)
            w.check = check_database(db_url, [t.client_id for tab in tabs for t in tab.turns], w.tag)
            rows.append(dict(summary(w, args.delay, first_model), workers=workers,
                             database="postgresql" if shared else "sqlite"))
            show(rows[-1], rows[0])
        if any(r["errors"] for r in rows):
            print(f"the app's log ends with:\n{app.log_tail(30)}", file=sys.stderr)
    return rows


def numbers(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def run(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Every wave's numbers, printed as they come (a row each)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--learners", type=numbers, default=[50, 100, 200],
                        help="learner counts, e.g. 50,100,200")
    parser.add_argument("--workers", type=numbers, default=[1], help="worker counts, e.g. 1,2 (more than 1: "
                        "Redis + PostgreSQL)")
    parser.add_argument("--messages", type=int, default=3, help="messages each learner sends after the opening")
    parser.add_argument("--delay", type=float, default=2.0, help="seconds the model takes for every reply")
    parser.add_argument("--chunks", type=int, default=20, help="streamed events per reply, spread over the delay")
    parser.add_argument("--stream", action=argparse.BooleanOptionalAction, default=True,
                        help="TUTOR_LLM_STREAM (--no-stream: whole replies)")
    parser.add_argument("--postgres", action="store_true", help="one worker on PostgreSQL too (default: SQLite)")
    parser.add_argument("--database-url", default="postgresql+psycopg2://postgres@127.0.0.1:5432/postgres",
                        help="PostgreSQL server for several workers (a fresh database is made beside it)")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379",
                        help=f"Redis (its db {REDIS_DB} is used)")
    parser.add_argument("--timeout", type=float, default=120, help="seconds a learner waits for any one step")
    parser.add_argument("--pause", type=float, default=2, help="seconds between waves")
    parser.add_argument("--warmup", type=int, default=5, help="learners (one message each) through the app before "
                        "the measured waves, not measured (0: none)")
    parser.add_argument("--texts", choices=("unique", "repeated"), default="unique",
                        help="unique (default): every message is worded differently, as a class writes; "
                             "repeated: the same five questions, which the app's vector caches answer")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    recorded = json.loads(FRAMES.read_text())
    check_recorded(recorded)
    load = os.getloadavg()
    print(f"learners {args.learners} x ({args.messages} messages + opening), model delay {args.delay:g} s, "
          f"stream={'on' if args.stream else 'off'}, texts {args.texts}, workers {args.workers}, "
          f"embedding threads {os.environ.get('TUTOR_EMBED_THREADS') or 'default'}, "
          f"load average {load[0]:.2f} {load[1]:.2f} on {os.cpu_count()} CPUs", flush=True)
    rows: list[dict[str, Any]] = []
    with loopback_model(args.delay, args.chunks) as root:
        for workers in args.workers:
            rows += run_app(args, root, workers, recorded)
    if args.json:
        print(json.dumps(rows, indent=2))
    return rows


def main(argv: list[str] | None = None) -> int:
    rows = run(argv)
    return 1 if any(r["errors"] or r["lost"] or r["duplicated"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
