"""A loopback OpenAI-compatible server that keeps connections alive, then drops them.

Real servers close kept-alive connections that sat idle (llama.cpp's after 5 s). Mostly the
client hears the hang-up before it reuses the connection; sometimes it does not: the
server's close crosses the next request, or the client's event loop was busy when it came.
This server plays both, on a real socket in its own thread and event loop (so it acts while
the client's loop is blocked):

- `close_idle_after`: a connection idle that long is closed (the client can hear it);
- `fate(number, on_connection, idle_s)`: per request (`number` counts from 1 over the whole
  server, `on_connection` from 1 on its connection, `idle_s` since the connection's last
  answer) "answer", "reset" (the connection is reset without a byte of answer, as the
  kernel does to a request reaching a socket its server had closed), or a float: answer
  after that many seconds.

Answers are chat completions with `content(body)` as the text, whole or (for `stream`) as
chunked server-sent events on the same kept-alive connection.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

Fate = Callable[[int, int, float], "str | float"]


def always_answer(number: int, on_connection: int, idle_s: float) -> str:
    return "answer"


class KeepAliveServer:
    def __init__(self, content: Callable[[dict[str, Any]], str], *, fate: Fate = always_answer,
                 close_idle_after: float | None = None) -> None:
        self.content, self.fate, self.close_idle_after = content, fate, close_idle_after
        self.connections = self.requests = self.resets = 0
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> KeepAliveServer:
        self._thread.start()
        self._started.wait(5)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._started.set()
        self._loop.run_forever()
        server.close()
        tasks = asyncio.all_tasks(self._loop)  # connections still open: end their handlers
        for task in tasks:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        self._loop.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        on_connection, answered = 0, time.monotonic()
        try:
            while True:
                read = reader.readuntil(b"\r\n\r\n")
                head = await (asyncio.wait_for(read, self.close_idle_after) if self.close_idle_after else read)
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                body = json.loads(await reader.readexactly(length)) if length else {}
                if not head.split(b" ", 2)[1].endswith(b"/chat/completions"):  # /props and the like
                    writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                    continue
                self.requests += 1
                on_connection += 1
                fate = self.fate(self.requests, on_connection, time.monotonic() - answered)
                if fate == "reset":
                    self.resets += 1
                    sock = writer.get_extra_info("socket")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    writer.transport.abort()
                    return
                if isinstance(fate, float):
                    await asyncio.sleep(fate)
                writer.write(self._answer(body))
                await writer.drain()
                answered = time.monotonic()
        except (asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    def _answer(self, body: dict[str, Any]) -> bytes:
        text = self.content(body)
        if not body.get("stream"):
            data = json.dumps({"model": "m", "choices": [{"index": 0, "finish_reason": "stop",
                                                          "message": {"role": "assistant", "content": text}}]})
            raw = data.encode()
            return b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
                len(raw), raw)
        events = [{"choices": [{"index": 0, "delta": {"content": text[i:i + 40]}, "finish_reason": None}]}
                  for i in range(0, len(text), 40)]
        events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        out = [b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"]
        for data in [*(f"data: {json.dumps(e)}\n\n" for e in events), "data: [DONE]\n\n"]:
            raw = data.encode()
            out.append(b"%x\r\n%s\r\n" % (len(raw), raw))
        out.append(b"0\r\n\r\n")
        return b"".join(out)
