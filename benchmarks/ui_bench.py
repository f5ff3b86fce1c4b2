"""Chat page cost over a long conversation: `python -m benchmarks.ui_bench [--turns 200]`.

Starts the app as a user does (scripts/run.sh, fresh SQLite database) with its model on a
loopback OpenAI-compatible server that answers every turn with the same ~2 KB reply (a
form, suggestions, five text blocks), so that every turn costs the same to render and any
growth comes from the conversation's length alone. Then, in chromium:

- plays N turns (type, Enter, wait for the reply) and counts the websocket bytes the
  browser receives for each turn (Playwright `page.on("websocket")` frames);
- times each turn from Enter to the reply on screen;
- reloads the page after turn 1 and after turn N and times it until every message shows.

Prints per-turn bytes at turn 1 and turn N, the worst turn (after 128 turns without a
reload the turns shown so far join the history, which is sent once), and the ratios N vs 1
(the machines are shared and noisy: ratios against the same run's baseline are what count).
Run it while no other copy of the app is being built from this directory: a build bakes its
port into the shared frontend.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

from tests.browser.app_runner import CHROMIUM, CHROMIUM_ARGS, RunningApp
from tests.browser.helpers import wait_until
from tests.fakes.servers import FakeLLMServer
from tests.fakes.wire import openai_reply

MODULE = "understanding_anxiety"


def bench_reply() -> str:
    return json.dumps({
        "content": {
            "text_blocks": [
                {"type": "heading", "content": "Noticing the three levels", "level": 2},
                {"type": "paragraph", "content": "Anxiety shows up in the **body**, the **mind** and in "
                 "what we **do**. Noticing which comes first helps you choose a skill that fits."},
                {"type": "list", "content": "- Body: racing heart, tight chest\n- Mind: what-if "
                 "thoughts\n- Behaviour: avoiding, checking, leaving early"},
                {"type": "tip", "content": "Start with the level you notice most; small steps count."},
                {"type": "info", "content": "This is general education, not medical advice."},
            ],
            "forms": [{
                "id": "quick_check",
                "title": "Quick check",
                "fields": [
                    {"id": "level", "type": "radio", "label": "Which level is loudest for you?",
                     "options": [{"value": "body", "label": "Body"}, {"value": "mind", "label": "Mind"},
                                 {"value": "behaviour", "label": "Behaviour"}]},
                    {"id": "note", "type": "text", "label": "Anything to add?", "placeholder": "optional"},
                ],
                "submit_label": "Share",
                "optional": True,
            }],
            "next_step": {"prompt": "Shall we go on?",
                          "suggestions": ["Tell me more", "Give me an example", "Let's move on"]},
        },
        "meta": {"response_type": "educational", "emotion": "informative"},
    })


class WireCounter:
    """Bytes of websocket frames the page received since the last `take()`."""

    def __init__(self, page: Page) -> None:
        self.bytes = 0
        self.frames = 0
        page.on("websocket", self._attach)

    def _attach(self, ws) -> None:
        ws.on("framereceived", self._frame)

    def _frame(self, payload) -> None:
        self.bytes += len(payload.encode("utf-8")) if isinstance(payload, str) else len(payload)
        self.frames += 1

    def take(self) -> int:
        taken, self.bytes, self.frames = self.bytes, 0, 0
        return taken


def wait_idle(page: Page, tutor_messages: int, timeout_ms: float = 60_000) -> None:
    # Polled with page.evaluate: wait_for_function needs eval, which the app's CSP forbids.
    wait_until(page, f"document.querySelectorAll('.msg-tutor').length >= {tutor_messages}"
               " && !document.getElementById('typing')", timeout=timeout_ms)


def play_turn(page: Page, text: str, tutor_after: int) -> None:
    box = page.locator("#message")
    box.fill(text)
    box.press("Enter")
    wait_idle(page, tutor_after)


def timed_reload(page: Page, messages: int) -> float:
    started = time.perf_counter()
    page.reload()
    wait_until(page, f"document.querySelectorAll('.msg').length >= {messages} && !document.getElementById('typing')",
               timeout=120_000, polling=20)
    return time.perf_counter() - started


def run(turns: int) -> dict:
    reply = bench_reply()
    with tempfile.TemporaryDirectory(prefix="tutor-ui-bench-") as tmp, FakeLLMServer("openai") as model:
        model.default = lambda _request: openai_reply(reply)
        app = RunningApp.create(
            Path(tmp), TUTOR_LLM_PROVIDER="openai", TUTOR_LLM_BASE_URL=model.base_url,
            TUTOR_LLM_MODEL="bench-model",
            TUTOR_TURNS_PER_MINUTE="0",  # one learner sends 200 turns as fast as they are answered
        )
        print(f"starting the app on {app.url} ...", file=sys.stderr)
        app.start()
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={"width": 1100, "height": 900})
                counter = WireCounter(page)
                page.goto(f"{app.url}/learn?module={MODULE}")
                wait_idle(page, 1)
                counter.take()
                per_turn: list[int] = []
                latency: list[float] = []
                load_1 = 0.0
                started = time.perf_counter()
                for turn in range(1, turns + 1):
                    sent = time.perf_counter()
                    play_turn(page, f"Question number {turn}: how does this work?", turn + 1)
                    latency.append(time.perf_counter() - sent)
                    time.sleep(0.05)  # let trailing deltas (focus, thinking off) arrive
                    per_turn.append(counter.take())
                    if turn == 1:
                        load_1 = timed_reload(page, 3)
                        counter.take()
                    if turn % 25 == 0:
                        print(f"  turn {turn}: {per_turn[-1]} B", file=sys.stderr)
                play_s = time.perf_counter() - started
                load_n = timed_reload(page, 2 * turns + 1)
                reload_bytes = counter.take()
                browser.close()
        except Exception:
            print(f"the benchmark failed; the app's log ends with:\n{app.log_tail()}", file=sys.stderr)
            raise
        finally:
            app.stop()
    first, last = per_turn[0], per_turn[-1]
    return {
        "turns": turns,
        "bytes_turn_1": first,
        "bytes_turn_n": last,
        "bytes_ratio": last / first,
        "bytes_median_first10": statistics.median(per_turn[:10]),
        "bytes_median_last10": statistics.median(per_turn[-10:]),
        "bytes_max": max(per_turn),
        "bytes_max_turn": per_turn.index(max(per_turn)) + 1,
        "load_s_turn_1": load_1,
        "load_s_turn_n": load_n,
        "load_ratio": load_n / load_1,
        "reload_bytes_turn_n": reload_bytes,
        "play_s": play_s,
        "turn_ms_median_first10": statistics.median(latency[:10]) * 1000,
        "turn_ms_median_last10": statistics.median(latency[-10:]) * 1000,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    args = parser.parse_args(argv)
    r = run(args.turns)
    if args.json:
        print(json.dumps(r, indent=2))
        return 0
    n = r["turns"]
    print(f"websocket bytes received per turn: turn 1 {r['bytes_turn_1']} B, turn {n} {r['bytes_turn_n']} B"
          f"  -> ratio {r['bytes_ratio']:.2f}x")
    print(f"  median of turns 1-10 {r['bytes_median_first10']:.0f} B, of the last 10 "
          f"{r['bytes_median_last10']:.0f} B; worst turn {r['bytes_max_turn']} with {r['bytes_max']} B")
    print(f"page load until all messages show: after turn 1 {r['load_s_turn_1'] * 1000:.0f} ms, "
          f"after turn {n} {r['load_s_turn_n'] * 1000:.0f} ms ({2 * n + 1} messages, "
          f"{r['reload_bytes_turn_n'] / 1024:.0f} KiB over the socket)  -> ratio {r['load_ratio']:.2f}x")
    print(f"send -> reply shown: median {r['turn_ms_median_first10']:.0f} ms over turns 1-10, "
          f"{r['turn_ms_median_last10']:.0f} ms over the last 10 -> ratio "
          f"{r['turn_ms_median_last10'] / r['turn_ms_median_first10']:.2f}x")
    print(f"{n} turns played in {r['play_s']:.1f} s ({r['play_s'] / n * 1000:.0f} ms per turn)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
