"""Loopback HTTP servers that speak the OpenAI and Anthropic wire formats.

A real socket on 127.0.0.1, a real HTTP exchange: our client and transport run exactly as
in production. Each server answers from a queue of scripted responses (then from an
optional `default` function), and records every request it received so tests can check
what we sent: bodies, headers, temperatures, re-ask text.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tutor.llm.config import LLMSettings

PATHS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}


@dataclass
class Scripted:
    """One scripted answer. Exactly one of `body` / `sse_chunks` is used (or `drop`)."""

    status: int = 200
    body: Any = None  # JSON-able data, or bytes/str sent verbatim
    headers: dict[str, str] = field(default_factory=dict)
    sse_chunks: list[str] | None = None  # raw event-stream text pieces, written in order
    delay_s: float = 0.0  # sleep before answering (timeouts)
    chunk_delay_s: float = 0.0  # sleep between stream chunks
    stall_after: int | None = None  # stop sending after this many chunks and hang for delay_s
    drop: bool = False  # close the connection without any answer
    hang: bool = False  # never answer, not even the headers, until the client goes away
    byte_delay_s: float = 0.0  # write the event stream one byte at a time, this far apart


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: Any

    @property
    def json(self) -> dict[str, Any]:
        assert isinstance(self.body, dict), self.body
        return self.body


class FakeLLMServer:
    """`FakeLLMServer("openai")`; `.base_url` is what TUTOR_LLM_BASE_URL would be."""

    def __init__(self, kind: str):
        if kind not in PATHS:
            raise ValueError(kind)
        self.kind = kind
        self.path = PATHS[kind]
        self.requests: list[RecordedRequest] = []
        self.disconnects = 0  # answers the client walked away from (hung up mid-answer)
        self.stopping = threading.Event()  # ends hanging and trickling answers at stop()
        self.default: Callable[[RecordedRequest], Scripted] | None = None
        # Answers some requests before the queue is looked at (None: not this one), e.g. the
        # safety screen's calls beside a scripted lesson.
        self.intercept: Callable[[RecordedRequest], Scripted | None] | None = None
        self.intercepted: list[RecordedRequest] = []
        # llama.cpp's GET /props answer (its chat template, context window); None: 404, as
        # servers without that endpoint answer.
        self.props: dict[str, Any] | None = None
        self._queue: deque[Scripted] = deque()
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True  # a handler sleeping past a client timeout must not block exit
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        root = f"http://127.0.0.1:{self.port}"
        return f"{root}/v1" if self.kind == "openai" else root

    def start(self) -> FakeLLMServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def script(self, *responses: Scripted) -> FakeLLMServer:
        with self._lock:
            self._queue.extend(responses)
        return self

    def reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self.intercepted.clear()
        self.default = None
        self.intercept = None

    @property
    def pending(self) -> int:
        return len(self._queue)

    def _next(self, request: RecordedRequest) -> Scripted:
        answer = self.intercept(request) if self.intercept is not None else None
        with self._lock:
            if answer is not None:
                self.intercepted.append(request)  # apart: `requests` is what the queue answered
                return answer
            self.requests.append(request)
            if self._queue:
                return self._queue.popleft()
        if self.default is not None:
            return self.default(request)
        return Scripted(500, {"error": {"message": "fake server: no scripted response left", "type": "server_error"}})


def _handler_for(server: FakeLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # Keep-alive like real servers (JSON answers carry a length); a stream ends at close.
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body go out as separate writes

        def log_message(self, *args) -> None:  # keep test output quiet
            pass

        def do_GET(self) -> None:
            if self.path == "/props" and server.props is not None:
                self._send_json(200, server.props, {})
            else:
                self._send_json(404, {"error": {"message": f"Not found: {self.path}", "type": "not_found"}}, {})

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
            request = RecordedRequest("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            if self.path != server.path:
                with server._lock:
                    server.requests.append(request)
                self._send_json(404, {"error": {"message": f"Not found: {self.path}", "type": "not_found"}}, {})
                return
            scripted = server._next(request)
            try:
                self._answer(scripted)
            except (BrokenPipeError, ConnectionResetError):
                self._gone()  # the client gave up (a timeout test); nothing to do

        def _gone(self) -> None:
            with server._lock:
                server.disconnects += 1

        def _client_left(self, wait_s: float) -> bool:
            """True once the client has closed its end (waits up to wait_s to see)."""
            readable, _, _ = select.select([self.connection], [], [], wait_s)
            if not readable:
                return False
            try:
                return self.connection.recv(1, socket.MSG_PEEK) == b""
            except OSError:
                return True

        def _answer(self, s: Scripted) -> None:
            if s.hang:
                while not server.stopping.is_set():
                    if self._client_left(0.05):
                        self._gone()
                        break
                self.close_connection = True
                return
            if s.delay_s and s.stall_after is None:
                time.sleep(s.delay_s)
            if s.drop:
                self.close_connection = True
                self.connection.close()
                return
            if s.sse_chunks is not None:
                self.send_response(s.status)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.close_connection = True
                for k, v in s.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                if s.byte_delay_s:
                    self._trickle("".join(s.sse_chunks).encode("utf-8"), s.byte_delay_s)
                    return
                for i, chunk in enumerate(s.sse_chunks):
                    if s.stall_after is not None and i == s.stall_after:
                        time.sleep(s.delay_s)
                        return
                    self.wfile.write(chunk.encode("utf-8"))
                    self.wfile.flush()
                    if s.chunk_delay_s:
                        time.sleep(s.chunk_delay_s)
                return
            self._send_json(s.status, s.body, s.headers)

        def _trickle(self, data: bytes, delay_s: float) -> None:
            """Every read gets a byte, so no per-read timeout ever fires."""
            for i in range(len(data)):
                if server.stopping.wait(delay_s):
                    return
                self.wfile.write(data[i : i + 1])
                self.wfile.flush()

        def _send_json(self, status: int, body: Any, headers: dict[str, str]) -> None:
            if isinstance(body, bytes):
                data = body
            elif isinstance(body, str):
                data = body.encode("utf-8")
            else:
                data = json.dumps(body).encode("utf-8")
            self.send_response(status)
            if "content-type" not in {k.lower() for k in headers}:
                self.send_header("content-type", "application/json")
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def settings_for(server: FakeLLMServer, **overrides: Any) -> LLMSettings:
    """Settings pointing at a fake server, with backoff delays small enough for unit tests."""
    base = LLMSettings(
        provider=server.kind,
        base_url=server.base_url.removesuffix("/v1") if server.kind == "anthropic" else server.base_url,
        api_key="test-key",
        model="fake-model-1",
        strategy="prompt",
        temperature=0.7,
        max_tokens=512,
        timeout_s=2.0,
        max_retries=2,
        retry_base_delay_s=0.001,
        retry_max_delay_s=0.02,
    )
    return replace(base, **overrides)
