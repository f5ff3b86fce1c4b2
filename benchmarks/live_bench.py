"""Streaming in the browser: `python -m benchmarks.live_bench [--turns 3] [--llama]`.

Starts the app as a user does (scripts/run.sh, fresh SQLite database) twice — replies
streamed (the default) and not streamed (the baseline, measured in the same run) — with
its model on a loopback OpenAI-compatible server that writes the same ~2 KB reply at a
fixed rate (`--rate` tokens a second, ~4 characters a token). With `--llama`, a third and
fourth run point the app at a real llama.cpp server (Gemma 3 270M, built by
scripts/install-llama.sh) instead, with the json_schema strategy.

For each turn, in chromium: the time from Enter until the first text block is visible,
as a share of the time until the stored reply is shown (goal: at most 15% when streamed),
and the websocket bytes the page received for the turn, against the same turn not
streamed (the final message and the learner's echo; goal: at most 3x), and the CPU the
app's processes spent on the turn, streamed against not streamed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

from benchmarks.ui_bench import WireCounter, bench_reply
from tests.browser.app_runner import CHROMIUM, CHROMIUM_ARGS, RunningApp
from tests.browser.helpers import wait_until  # polls page.evaluate: the app's CSP forbids eval
from tests.fakes.servers import FakeLLMServer
from tests.fakes.wire import openai_reply, openai_stream

MODULE = "understanding_anxiety"
DUMP: list = []  # --frames: every frame received, printed at the end
CHARS_PER_TOKEN = 4
FIRST_BLOCK = (
    "(() => { const s = document.getElementById('streaming-reply');"
    " const t = document.querySelectorAll('.msg-tutor');"
    " const seen = (el) => el && el.textContent.trim().length > 0;"
    " return (s && [...s.querySelectorAll('.block')].some(seen)) || t.length > %d; })()"
)
DONE = (
    "document.querySelectorAll('.msg-tutor').length > %d && !document.getElementById('typing')"
    " && !document.getElementById('streaming-reply')"
)


def play(app: RunningApp, turns: int, timeout_s: float) -> list[dict]:
    rows = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page: Page = browser.new_page(viewport={"width": 1100, "height": 900})
        counter = WireCounter(page)
        if DUMP:
            page.on("websocket", lambda ws: ws.on("framereceived", lambda p: DUMP.append(p)))
        page.goto(f"{app.url}/learn?module={MODULE}")
        wait_until(page, DONE % 0, timeout=timeout_s * 1000)
        for turn in range(turns):
            time.sleep(0.3)
            counter.take()
            before = page.locator(".msg-tutor").count()
            box = page.locator("#message")
            box.fill(f"Question {turn + 1}: why does my heart race when I am anxious?")
            started, cpu = time.monotonic(), server_cpu(app)
            box.press("Enter")
            wait_until(page, FIRST_BLOCK % before, timeout=timeout_s * 1000, polling=20)
            first = time.monotonic() - started
            wait_until(page, DONE % before, timeout=timeout_s * 1000, polling=20)
            total = time.monotonic() - started
            time.sleep(0.2)  # trailing deltas (focus, status) belong to the turn
            frames = counter.frames
            rows.append({"first_block_s": first, "total_s": total, "bytes": counter.take(), "frames": frames,
                         "server_cpu_s": server_cpu(app) - cpu})
        browser.close()
    return rows


def server_cpu(app: RunningApp) -> float:
    """CPU seconds the app's processes (its process group: the server and its workers)
    have used so far; the browser and the model server are not in it."""
    group, total = app.process.pid, 0
    tick = os.sysconf("SC_CLK_TCK")
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        if int(fields[2]) == group:  # pgrp; utime and stime follow at 11 and 12
            total += int(fields[11]) + int(fields[12])
    return total / tick


def run_app(env: dict[str, str], turns: int, timeout_s: float, label: str) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="tutor-live-bench-") as tmp:
        app = RunningApp.create(Path(tmp), **env)
        print(f"[{label}] starting the app on {app.url} ...", file=sys.stderr)
        app.start()
        try:
            return play(app, turns, timeout_s)
        except Exception:
            print(f"the benchmark failed; the app's log ends with:\n{app.log_tail()}", file=sys.stderr)
            raise
        finally:
            app.stop()


def summary(rows: list[dict]) -> dict:
    return {
        "first_block_s": statistics.median(r["first_block_s"] for r in rows),
        "total_s": statistics.median(r["total_s"] for r in rows),
        "share": statistics.median(r["first_block_s"] / r["total_s"] for r in rows),
        "bytes": statistics.median(r["bytes"] for r in rows),
        "frames": statistics.median(r["frames"] for r in rows),
        "server_cpu_s": statistics.mean(r["server_cpu_s"] for r in rows),  # a mean: the clock ticks are 10 ms
    }


def compare(label: str, streamed: dict, baseline: dict) -> dict:
    out = {
        "label": label,
        "streamed": streamed,
        "baseline": baseline,
        "first_block_share": streamed["share"],
        "bytes_ratio": streamed["bytes"] / baseline["bytes"],
        "server_cpu_ratio": streamed["server_cpu_s"] / max(baseline["server_cpu_s"], 1e-9),
    }
    print(f"{label}:")
    print(f"  first block visible after {streamed['first_block_s']:.2f} s of {streamed['total_s']:.2f} s "
          f"-> {100 * streamed['share']:.0f}% of the turn (not streamed: {100 * baseline['share']:.0f}%, "
          f"{baseline['first_block_s']:.2f} s of {baseline['total_s']:.2f} s)  goal <= 15%")
    print(f"  websocket bytes per turn: streamed {streamed['bytes']:.0f} B, not streamed {baseline['bytes']:.0f} B "
          f"-> ratio {out['bytes_ratio']:.2f}x  goal <= 3x ({streamed['frames']:.0f} and {baseline['frames']:.0f} frames)")
    print(f"  the app's CPU per turn (server and workers): streamed {1000 * streamed['server_cpu_s']:.0f} ms, "
          f"not streamed {1000 * baseline['server_cpu_s']:.0f} ms -> ratio {out['server_cpu_ratio']:.2f}x")
    return out


def _whole(reply: str, delay_s: float):
    scripted = openai_reply(reply)
    scripted.delay_s = delay_s
    return scripted


def loopback(turns: int, rate: float) -> dict:
    reply = bench_reply()
    pieces = max(1, len(reply) // CHARS_PER_TOKEN)
    delay = 1.0 / rate
    results = {}
    with FakeLLMServer("openai") as model:
        # Streamed when asked; otherwise the whole reply after the same generation time.
        model.default = lambda request: (
            openai_stream(reply, pieces=pieces, chunk_delay_s=delay) if request.json.get("stream")
            else _whole(reply, pieces * delay)
        )
        for stream in ("1", "0"):
            env = dict(TUTOR_LLM_PROVIDER="openai", TUTOR_LLM_BASE_URL=model.base_url,
                       TUTOR_LLM_MODEL="bench-model", TUTOR_LLM_STREAM=stream)
            results[stream] = summary(run_app(env, turns, 120, f"loopback, stream={stream}"))
    return compare(f"loopback server, {rate:g} tokens/s, {len(reply)} B reply", results["1"], results["0"])


def llama(turns: int) -> dict:
    from tests.real.llama import LlamaServer  # the real server, as the tests start it

    results = {}
    with ExitStack() as stack:
        server = stack.enter_context(LlamaServer.start())
        for stream in ("1", "0"):
            env = dict(TUTOR_LLM_PROVIDER="openai", TUTOR_LLM_BASE_URL=server.base_url,
                       TUTOR_LLM_MODEL="gemma-3-270m", TUTOR_LLM_STRATEGY="json_schema",
                       TUTOR_LLM_MAX_TOKENS="600", TUTOR_LLM_STREAM=stream)
            results[stream] = summary(run_app(env, turns, 300, f"llama.cpp, stream={stream}"))
    return compare("llama.cpp server, Gemma 3 270M, json_schema", results["1"], results["0"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--rate", type=float, default=65.0, help="tokens a second of the loopback server")
    parser.add_argument("--llama", action="store_true", help="also measure against a real llama.cpp server")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--frames", action="store_true", help="print the frames of the streamed runs")
    args = parser.parse_args(argv)
    if args.frames:
        DUMP.append("")
    out = [loopback(args.turns, args.rate)]
    if args.llama:
        out.append(llama(args.turns))
    if args.json:
        print(json.dumps(out, indent=2))
    for frame in DUMP[1:]:
        print(len(frame), str(frame)[:600], file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
