"""The HTTP half shared by the OpenAI-compatible and Anthropic providers.

Providers map requests and responses; this module owns the client, timeouts, and turning
every httpx failure or error status into the one exception hierarchy in `errors`.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import httpx

from tutor.llm.config import EnvReader, LLMSettings
from tutor.llm.errors import (
    BadResponse,
    ConnectionFailed,
    LLMError,
    RequestTimeout,
    error_for_status,
)
from tutor.llm._transport import AiohttpTransport, direct_body
from tutor.llm.base import Completion, CompletionRequest
from tutor.llm.sse import CompletionStream, SSEDecoder, SSEEvent

USER_AGENT = "tutor/0.1 (+httpx)"

# A server that ignores `stream: true` answers with one JSON body; we hand it over as a
# single synthetic event so providers can read it like a non-streamed reply.
WHOLE_BODY_EVENT = "tutor.whole_body"

DEFAULT_MAX_CONNECTIONS = 1000


def http_limits(env=None) -> httpx.Limits:
    """TUTOR_LLM_MAX_CONNECTIONS: model calls one process keeps open at once, all kept alive
    between calls (for Limits.keepalive_expiry seconds). httpx's defaults (100 open, 20 kept
    alive) queued the 101st learner's turn and reconnected most others."""
    count = EnvReader(os.environ if env is None else env).integer(
        "TUTOR_LLM_MAX_CONNECTIONS", DEFAULT_MAX_CONNECTIONS, low=1)
    return httpx.Limits(max_connections=count, max_keepalive_connections=count)


class HTTPTransport:
    def __init__(
        self,
        settings: LLMSettings,
        *,
        headers: dict[str, str],
        client: httpx.AsyncClient | None = None,
    ):
        if not settings.base_url:
            raise ValueError("HTTP providers need settings.base_url")
        self.base_url = settings.base_url
        self.model = settings.model
        self.strategy = settings.strategy
        self.timeout_s = settings.timeout_s
        self._headers = {"user-agent": USER_AGENT, "accept": "application/json", **headers}
        self._owns_client = client is None
        self._shared_client = client
        self._clients: dict[asyncio.AbstractEventLoop, httpx.AsyncClient] = {}
        self._limits = http_limits()

    @property
    def _client(self) -> httpx.AsyncClient:
        # An httpx client's connection pool belongs to the event loop that first used it. The
        # app makes one provider per process, but CLIs and tests may drive it from several
        # `asyncio.run` loops in turn, so each loop gets its own client.
        if self._shared_client is not None:
            return self._shared_client
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            for old in [old for old in self._clients if old.is_closed()]:
                del self._clients[old]
            client = self._clients[loop] = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout_s), transport=AiohttpTransport(self._limits))
        return client

    def _url(self, path: str) -> str:
        return f"{self.base_url}{path}"

    async def post_json(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        try:
            response = await self._client.post(self._url(path), json=body, headers=self._headers)
        except httpx.HTTPError as exc:
            raise self._transport_error(exc) from exc
        if response.status_code >= 400:
            raise self._status_error(response, response.text)
        try:
            data = response.json()
        except ValueError:
            raise BadResponse(
                f"{response.status_code} answer is not JSON: {response.text[:120]!r}",
                status=response.status_code,
                operator_hint=f"The model endpoint at {self.base_url} answered with something that is "
                "not JSON: check TUTOR_LLM_BASE_URL points at the API (often ending in /v1)",
            ) from None
        if not isinstance(data, dict):
            raise BadResponse("answer is JSON but not an object", status=response.status_code)
        return data

    async def events(self, path: str, body: dict[str, Any]) -> AsyncIterator[SSEEvent]:
        """Server-sent events of a streamed POST; errors arrive as LLMError subclasses."""
        headers = {**self._headers, "accept": "text/event-stream"}
        try:
            async with self._client.stream("POST", self._url(path), json=body, headers=headers) as response:
                if response.status_code >= 400:
                    text = (await response.aread()).decode("utf-8", "replace")
                    raise self._status_error(response, text)
                if "text/event-stream" not in response.headers.get("content-type", "event-stream"):
                    text = (await response.aread()).decode("utf-8", "replace")
                    yield SSEEvent(WHOLE_BODY_EVENT, text)
                    return
                # Raw bytes, split into events and decoded once per event (tutor.llm.sse);
                # a compressed body goes through httpx's decoder first.
                decoder = SSEDecoder()
                body = direct_body(response)
                if body is not None:
                    while chunk := await body.read():
                        for event in decoder.feed(chunk):
                            yield event
                else:
                    encoded = "content-encoding" in response.headers
                    async for chunk in response.aiter_bytes() if encoded else response.aiter_raw():
                        for event in decoder.feed(chunk):
                            yield event
                for event in decoder.end():
                    yield event
        except LLMError:
            raise
        except httpx.HTTPError as exc:
            raise self._transport_error(exc) from exc

    def _status_error(self, response: httpx.Response, text: str) -> LLMError:
        return error_for_status(
            response.status_code, response.headers, text, base_url=self.base_url, model=self.model,
            strategy=self.strategy,
        )

    def _transport_error(self, exc: httpx.HTTPError) -> LLMError:
        if isinstance(exc, httpx.TimeoutException):
            return RequestTimeout(
                f"{type(exc).__name__}: no answer within {self.timeout_s:g}s",
                operator_hint=(
                    f"The model endpoint at {self.base_url} did not answer within "
                    f"TUTOR_LLM_TIMEOUT={self.timeout_s:g}s: raise TUTOR_LLM_TIMEOUT or check the server"
                ),
            )
        if isinstance(exc, httpx.ConnectError):
            return ConnectionFailed(
                f"ConnectError: {exc}",
                operator_hint=(
                    f"Could not connect to the model endpoint at {self.base_url}: is the server running? "
                    "check TUTOR_LLM_BASE_URL"
                ),
            )
        return ConnectionFailed(
            f"{type(exc).__name__}: {exc}",
            operator_hint=f"The connection to the model endpoint at {self.base_url} broke: {exc}",
        )

    async def aclose(self) -> None:
        if self._owns_client:
            client = self._clients.pop(asyncio.get_running_loop(), None)
            if client is not None:
                await client.aclose()


def loads_event(event: SSEEvent) -> dict[str, Any]:
    """The JSON payload of one event; a garbled chunk is a (retryable) BadResponse."""
    try:
        data = json.loads(event.data)
    except ValueError:
        raise BadResponse(f"stream chunk is not JSON: {event.data[:120]!r}") from None
    if not isinstance(data, dict):
        raise BadResponse(f"stream chunk is not an object: {event.data[:120]!r}")
    return data


class HTTPProvider:
    """What the HTTP backends share: settings, one transport, and whole or streamed replies
    (TUTOR_LLM_STREAM=1 streams under `complete`). A backend says where (`path`) and how:
    `build_body`, `_completion_from_body`, `_new_stream_state` and `_deltas`."""

    name: str
    path: str

    def __init__(
        self,
        settings: LLMSettings,
        *,
        headers: dict[str, str],
        client: httpx.AsyncClient | None = None,
    ):
        self.settings = settings
        self.model = settings.model
        self._http = HTTPTransport(settings, headers=headers, client=client)

    async def complete(self, request: CompletionRequest) -> Completion:
        if self.settings.stream:
            return await self.stream(request).collect()
        data = await self._http.post_json(self.path, self.build_body(request))
        return self._completion_from_body(data)

    def _events(self, request: CompletionRequest):
        """The streamed request's events; closed at once (aclosing) when a reader stops
        early (Stop, a repetition) instead of being left to the garbage collector."""
        return aclosing(self._http.events(self.path, self.build_body(request, stream=True)))

    def stream(self, request: CompletionRequest) -> CompletionStream:
        state = self._new_stream_state()
        return CompletionStream(self._deltas(request, state), state.build)

    @property
    def client(self) -> httpx.AsyncClient:
        """This event loop's HTTP client (connection pool), for side requests such as the
        server's context window."""
        return self._http._client

    async def aclose(self) -> None:
        await self._http.aclose()

    def build_body(self, request: CompletionRequest, *, stream: bool = False) -> dict[str, Any]:
        raise NotImplementedError

    def _completion_from_body(self, data: dict[str, Any]) -> Completion:
        raise NotImplementedError

    def _new_stream_state(self) -> Any:
        raise NotImplementedError

    def _deltas(self, request: CompletionRequest, state: Any) -> AsyncIterator[str]:
        raise NotImplementedError
