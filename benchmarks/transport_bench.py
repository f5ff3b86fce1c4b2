"""The model client's HTTP transports, side by side: `python -m benchmarks.transport_bench`.

Two transports carry the same calls through the same provider (tutor.llm.openai) in one run:

    httpx     httpx's own transport (httpcore): the baseline
    aiohttp   tutor.llm._transport.AiohttpTransport, httpx's API over aiohttp's pool

CPU (default): `--learners` concurrent callers each make `--calls` streamed replies
(`--chunks` events) and as many whole (non-streamed) answers, like a judge or a screen,
against benchmarks/loopback_model.py in its own process (`--delay` seconds a call).
Printed per transport: this process's CPU per call, and its ratio to the baseline's.

Reliability (`--llama`): the real llama.cpp server (Gemma 3 270M, scripts/install-llama.sh)
gets `--total` calls per transport, judges, screens and replies in turn (`--idle-every` of a
kind, so the server's prompt cache serves them), as the app makes them
(tutor.teach.judge_call, tutor.risk.model_screen, tutor.llm.policy.run_turn), each allowed
`--max-tokens` (the wire does not care how long an answer is). Between two
calls the event loop is kept busy for a moment (as the app's own work keeps it: the
semantic layer, parsing, the database), and every `--idle-every` calls the client waits
until just before the server's keep-alive ends (5 s) and is then busy past it, so the server
hangs up the idle connection while the client is not looking (the report's failure: "Can
not write request body"). Printed per transport: the calls that failed on the wire (a
transport error on any attempt of the call) out of those made, and how many requests the
transport sent again on a fresh connection.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from collections import Counter
from pathlib import Path

import httpx

from benchmarks.loopback_model import loopback_model
from tutor.llm._http import http_limits
from tutor.llm._transport import AiohttpTransport
from tutor.llm.base import ChatMessage, CompletionRequest
from tutor.llm.config import LLMSettings
from tutor.llm.openai import OpenAIProvider

TRANSPORTS = ("httpx", "aiohttp")
REQUEST = CompletionRequest([ChatMessage("system", "You are a tutor."), ChatMessage("user", "Hello")], 0.7, 400)


def make_client(kind: str, timeout_s: float) -> httpx.AsyncClient:
    """What HTTPTransport makes for a provider, with the transport named."""
    limits = http_limits()
    if kind == "aiohttp":
        return httpx.AsyncClient(timeout=httpx.Timeout(timeout_s), transport=AiohttpTransport(limits))
    return httpx.AsyncClient(timeout=httpx.Timeout(timeout_s), limits=limits)


def resent(client: httpx.AsyncClient) -> int | None:
    return getattr(client._transport, "resent", None)  # AiohttpTransport's count; None for httpx's


# --- CPU --------------------------------------------------------------------------------


async def cpu_run(kind: str, root: str, learners: int, calls: int) -> dict[str, float]:
    settings = LLMSettings(provider="openai", base_url=f"{root}/v1", model="m", timeout_s=60.0, stream=True)
    client = make_client(kind, settings.timeout_s)
    provider = OpenAIProvider(settings, client=client)
    plain = OpenAIProvider(LLMSettings(**{**settings.__dict__, "stream": False}), client=client)

    async def learner() -> None:
        for _ in range(calls):
            await provider.stream(REQUEST).collect()
            await plain.complete(REQUEST)

    try:
        await asyncio.gather(*(learner() for _ in range(min(learners, 4))))  # warm: imports, pools
        cpu0, wall0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(learner() for _ in range(learners)))
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    finally:
        await client.aclose()
    made = learners * calls * 2
    return {"calls": made, "cpu_ms_per_call": 1000 * cpu / made, "wall_s": wall}


def cpu_bench(args: argparse.Namespace) -> int:
    print(f"{args.learners} callers x {args.calls} streamed + {args.calls} whole calls, "
          f"{args.chunks} events, {args.delay:g} s each (loopback model)")
    rows: dict[str, list[float]] = {kind: [] for kind in TRANSPORTS}
    with loopback_model(args.delay, args.chunks) as root:
        for _ in range(args.runs):  # interleaved, so both see the same machine
            for kind in TRANSPORTS:
                rows[kind].append(asyncio.run(cpu_run(kind, root, args.learners, args.calls))["cpu_ms_per_call"])
    base = min(rows["httpx"])
    for kind in TRANSPORTS:
        best = min(rows[kind])
        print(f"  {kind:8s} CPU/call {best:6.3f} ms (best of {args.runs})   x{best / base:.2f} of httpx")
    return 0


# --- reliability against llama.cpp ------------------------------------------------------


def busy(seconds: float) -> None:
    """The event loop's own work between two calls (it does not yield meanwhile)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


async def llama_run(kind: str, settings: LLMSettings, total: int, idle_every: int, idle_s: float,
                    seed: int) -> dict[str, object]:
    from tutor.content.modules import load_library
    from tutor.llm.policy import run_turn
    from tutor.risk.config import load_safety
    from tutor.risk.model_screen import model_screen
    from tutor.teach.judge_call import judge_with_model

    root = Path(__file__).resolve().parents[1]
    module = load_library(root / "modules").get("understanding_anxiety")
    check = next(c for t in module.topics for c in t.checks)
    safety = load_safety()
    rng = random.Random(seed)
    client = make_client(kind, settings.timeout_s)
    whole = OpenAIProvider(settings, client=client)  # judge and screen: one JSON answer each
    streamed_settings = LLMSettings(**{**settings.__dict__, "stream": True})
    streamed = OpenAIProvider(streamed_settings, client=client)
    failed: Counter[str] = Counter()
    made: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    try:
        for n in range(total):
            what = ("judge", "screen", "reply")[n // idle_every % 3]
            if n and n % idle_every == 0:
                await asyncio.sleep(idle_s)  # just short of the server's keep-alive ...
                busy(rng.uniform(0.3, 0.8))  # ... which ends while the loop is busy: it hangs up
            busy(rng.uniform(0.02, 0.15))
            if what == "judge":
                attempts = (await judge_with_model(whole, settings, module, check, check.example_answer)).attempts
            elif what == "screen":
                attempts = (await model_screen(whole, settings, "I keep worrying about exams", safety,
                                               deadline_s=30.0)).attempts
            else:
                attempts = (await run_turn(streamed, REQUEST, streamed_settings)).attempts
            made[what] += 1
            wire = [a for a in attempts if a.error_class in ("ConnectionFailed", "RequestTimeout")]
            if wire:
                failed[what] += 1
                errors.update((a.error or "")[:70] for a in wire)
    finally:
        await client.aclose()
    return {"made": made, "failed": failed, "errors": errors, "resent": resent(client)}


def llama_bench(args: argparse.Namespace) -> int:
    from tests.real.llama import LlamaServer, LlamaUnavailable

    try:
        llama = LlamaServer.start()
    except LlamaUnavailable as exc:
        print(f"no llama.cpp server: {exc}", file=sys.stderr)
        return 2
    with llama:
        settings = llama.settings(strategy=args.strategy, stream=False, max_tokens=args.max_tokens, max_retries=0)
        print(f"llama.cpp at {llama.root}: {args.total} calls per transport (judge, screen, reply in turn), "
              f"idle {args.idle:g} s every {args.idle_every} calls, strategy {args.strategy}")
        for kind in args.transports.split(","):
            started = time.perf_counter()
            row = asyncio.run(llama_run(kind, settings, args.total, args.idle_every, args.idle, args.seed))
            made, failed = row["made"], row["failed"]
            print(f"  {kind:8s} failed {sum(failed.values()):3d} of {sum(made.values())}  "
                  + "  ".join(f"{k} {failed[k]}/{made[k]}" for k in ("judge", "screen", "reply"))
                  + ("" if row["resent"] is None else f"   sent again {row['resent']}")
                  + f"   ({time.perf_counter() - started:.0f} s)")
            for error, count in row["errors"].most_common(3):  # type: ignore[attr-defined]
                print(f"           {count} x {error}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--learners", type=int, default=100)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--delay", type=float, default=0.5)
    parser.add_argument("--chunks", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--llama", action="store_true", help="reliability against the real llama.cpp server")
    parser.add_argument("--total", type=int, default=200)
    parser.add_argument("--idle-every", type=int, default=10)
    parser.add_argument("--idle", type=float, default=4.7, help="seconds idle (then busy) every --idle-every calls")
    parser.add_argument("--strategy", default="json_object")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--transports", default=",".join(TRANSPORTS))
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    return llama_bench(args) if args.llama else cpu_bench(args)


if __name__ == "__main__":
    sys.exit(main())
