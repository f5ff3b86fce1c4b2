"""A loopback OpenAI-compatible model for load benchmarks, in its own process.

Plain asyncio streams speaking just enough HTTP/1.1 (keep-alive, chunked event streams), so
that hundreds of calls at once cost it little: every call is answered `delay` seconds after
it arrived with the same valid ~1 KB tutor reply, whole or as `chunks` stream events spread
over the delay. `GET /stats` reports the calls, the most in flight at once, how late the
answers ended (past the delay) and the server's CPU; `/stats?reset` starts counting anew.
llama.cpp's `/props` answers with a context window, as a local server would.

`python -m benchmarks.loopback_model --delay 2 --chunks 20` prints its port and serves
until its stdin closes; `loopback_model()` runs it so from a benchmark.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from typing import Any


def pct(values: list[float], p: float) -> float:
    """The p-th percentile (nearest rank) of values; 0 for none."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


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
        print(server.sockets[0].getsockname()[1], flush=True)  # the parent reads the port
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.read)  # until the parent closes our stdin

    asyncio.run(main())


@contextmanager
def loopback_model(delay: float, chunks: int):
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.loopback_model", "--delay", str(delay),
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--delay", type=float, default=2.0, help="seconds every answer takes")
    parser.add_argument("--chunks", type=int, default=20, help="stream events per streamed answer")
    args = parser.parse_args(argv)
    serve(args.delay, args.chunks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
