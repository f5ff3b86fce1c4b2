"""llama-server's own endpoints on 127.0.0.1: `/props`, `/tokenize` and `/apply-template`
answered as llama.cpp answers them, scriptable (the context window, the server's slots), and
`/v1/chat/completions` answering every call with `chat_reply` (its usage and llama.cpp's
`timings`, `cache_n` the prompt tokens it read from its cache)."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tutor.llm import LLMSettings


class LlamaEndpoints:
    """`/props`, `/tokenize` and `/apply-template` as llama-server answers them, scriptable."""

    def __init__(self, props: Any = None, status: int = 200, delay_s: float = 0.0):
        self.props = {"default_generation_settings": {"n_ctx": 8192}, "total_slots": 1} if props is None else props
        self.status = status
        self.delay_s = delay_s
        self.apply_template = True
        self.chat_reply = '{"content": {"text_blocks": [{"type": "paragraph", "content": "Hello."}]}, ' \
                          '"meta": {"response_type": "conversational"}}'
        self.cache_n = 0
        self.requests: list[tuple[str, str, dict[str, str], Any]] = []
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def settings(self, **overrides: Any) -> LLMSettings:
        base = LLMSettings(provider="openai", base_url=self.base_url, model="local", max_tokens=512)
        return replace(base, **overrides)

    def __enter__(self) -> LlamaEndpoints:
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                self._serve(None)

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                self._serve(json.loads(self.rfile.read(length)) if length else None)

            def _serve(self, body: Any) -> None:
                server.requests.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                if server.delay_s:
                    time.sleep(server.delay_s)
                if self.path == "/props" and self.command == "GET":
                    status, answer = server.status, server.props
                elif self.path == "/tokenize" and self.command == "POST":
                    status, answer = 200, {"tokens": list(range(len(body["content"].split())))}
                elif self.path == "/apply-template" and self.command == "POST" and server.apply_template:
                    prompt = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in body["messages"])
                    status, answer = 200, {"prompt": prompt}
                elif self.path == "/v1/chat/completions" and self.command == "POST":
                    status, answer = 200, {
                        "id": "chatcmpl-llama", "object": "chat.completion", "model": body["model"],
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": server.chat_reply}}],
                        "usage": {"prompt_tokens": 900, "completion_tokens": 20, "total_tokens": 920},
                        "timings": {"cache_n": server.cache_n, "prompt_n": 900 - server.cache_n},
                    }
                else:
                    status, answer = 404, {"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}}
                data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
                try:
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        return Handler
