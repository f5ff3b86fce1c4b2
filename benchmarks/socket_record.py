"""Record what the chat page says on its event socket: `python -m benchmarks.socket_record`.

benchmarks/socket_bench.py drives learners through the running app by replaying the page's
own websocket messages from Python. This command is where those messages come from: it
starts the app as a user does (scripts/run.sh, anonymous mode, a fresh SQLite database, the
loopback model of benchmarks/loopback_model.py), opens the chat page in Debian's chromium,
waits for the opening turn, types one message and presses Enter, and writes every frame the
page sent on the socket (and the names of the state variables each frame it received
changed) to benchmarks/socket_frames.json. The per-tab values (the socket's token, the
browser's learner key, the send's client id, the typed text, the module) are replaced with
placeholders that socket_bench fills in for each learner; everything else — the socket.io
handshake's auth payload (the page hydrates inside its CONNECT packet), event names, router
data, payload shapes — is replayed as recorded.

Run it again after a change to the chat page or to Reflex, and commit the new file:
socket_bench then follows the frontend. It checks at start that the frames still name
handlers the app has (a renamed handler fails loudly instead of measuring nothing).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.loopback_model import loopback_model

FRAMES = Path(__file__).with_name("socket_frames.json")
MODULE = "understanding_anxiety"
TEXT = "What does anxiety do in the body?"
IDLE = "!document.getElementById('typing') && !document.getElementById('streaming-reply')"


def bench_env(root: str, stream: bool = True) -> dict[str, str]:
    """The app's settings for the socket benchmarks: the loopback model, anonymous learners
    from one address (the benchmark's), no turns-per-minute limit, the model safety screen
    off (the loopback model answers every call with a lesson; the offline screen still runs)."""
    return dict(TUTOR_LLM_PROVIDER="openai", TUTOR_LLM_BASE_URL=f"{root}/v1", TUTOR_LLM_MODEL="bench-model",
                TUTOR_LLM_STREAM="1" if stream else "0", TUTOR_LLM_TIMEOUT="120", TUTOR_AUTH="anonymous",
                TUTOR_TURNS_PER_MINUTE="0", TUTOR_ANONYMOUS_LEARNERS_PER_ADDRESS="100000",
                TUTOR_CONVERSATIONS_PER_DAY="0", TUTOR_DAILY_TOKENS="0", TUTOR_SAFETY_MODEL_SCREEN="off",
                REFLEX_WEB_WORKDIR=str(Path(__file__).resolve().parents[1] / ".web-bench"))


def placeholders(frame: str, token: str, key: str, client_id: str, port: int) -> str:
    """The tab's own values in a recorded frame, as the names socket_bench fills in."""
    for value, name in ((token, "@TOKEN@"), (key, "@LEARNER_KEY@"), (TEXT, "@TEXT@"), (MODULE, "@MODULE@"),
                        (f"127.0.0.1:{port}", "@HOST@")):
        if value:
            frame = frame.replace(value, name)
    if client_id:
        frame = frame.replace(client_id, "@CLIENT_ID@")
    return frame


def changed_vars(payload: str) -> list[str]:
    """The state variables a received `event` frame changed (its delta's keys, without their
    states' names)."""
    try:
        kind, update = json.loads(payload[payload.index("["):])[:2]  # 42/_event,[name, data]
    except (ValueError, TypeError):
        return []
    if kind != "event" or not isinstance(update, dict):
        return []
    names = sorted(v.removesuffix("_rx_state_") for d in (update.get("delta") or {}).values() for v in d)
    return names if len(names) <= 20 else [f"{len(names)} variables (the whole state)"]


def record(timeout_s: float = 120) -> dict[str, Any]:
    from playwright.sync_api import sync_playwright

    from tests.browser.app_runner import CHROMIUM, CHROMIUM_ARGS, RunningApp
    from tests.browser.helpers import wait_until

    with loopback_model(0.5, 10) as root, tempfile.TemporaryDirectory(prefix="tutor-socket-record-") as tmp:
        app = RunningApp.create(Path(tmp), **bench_env(root))
        print(f"starting the app on {app.url} (the first start builds the frontend) ...", file=sys.stderr)
        try:
            app.start()
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
                page = browser.new_page()
                sent: list[tuple[str, str]] = []  # (step, frame)
                received: list[tuple[str, list[str], int]] = []
                step = ["open"]
                urls: list[str] = []

                def on_socket(ws) -> None:
                    urls.append(ws.url)
                    ws.on("framesent", lambda f: sent.append((step[0], f if isinstance(f, str) else f.decode())))
                    ws.on("framereceived", lambda f: received.append(
                        (step[0], changed_vars(f if isinstance(f, str) else ""), len(f))))

                page.on("websocket", on_socket)
                page.goto(f"{app.url}/learn?module={MODULE}")
                page.locator(".msg-tutor").first.wait_for(timeout=timeout_s * 1000)
                wait_until(page, IDLE, timeout=timeout_s * 1000)
                time.sleep(0.5)
                step[0] = "send"
                before = page.locator(".msg-tutor").count()
                page.locator("#message").fill(TEXT)
                page.locator("#message").press("Enter")
                wait_until(page, f"document.querySelectorAll('.msg-tutor').length > {before}",
                           timeout=timeout_s * 1000)
                wait_until(page, IDLE, timeout=timeout_s * 1000)
                time.sleep(0.5)
                key = page.evaluate("localStorage.getItem('tutor_learner') || ''")
                browser.close()
        finally:
            app.stop()
    token = next((m.group(1) for u in urls if (m := re.search(r'token=([^&]+)', u))), "")
    client_id = next((m.group(1) for _, f in sent if (m := re.search(r'"client_id",\s*"([^"]+)"', f))), "")
    frames = [{"step": s, "frame": placeholders(f, token, key, client_id, app.port)} for s, f in sent
              if not f.startswith(("2", "3"))]  # engine.io pings and pongs are not the page's
    return {"recorded": time.strftime("%Y-%m-%d"), "url": placeholders(urls[0], token, key, "", app.port),
            "sent": frames,
            "received": [{"step": s, "changed": c, "bytes": n} for s, c, n in received]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=FRAMES)
    args = parser.parse_args(argv)
    data = record()
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    for f in data["sent"]:
        print(f"[{f['step']}] {f['frame'][:300]}")
    print(f"{len(data['sent'])} frames sent, {len(data['received'])} received; written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
