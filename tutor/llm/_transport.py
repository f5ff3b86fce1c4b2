"""The model client's HTTP transport: httpx's API over aiohttp's connection pool.

httpx stays the client (requests, headers, timeouts, decoding, errors as httpx exceptions);
this transport does the wire work. aiohttp parses HTTP in C (llhttp) and reads without a
cancel scope per read: a streamed call (20 events) costs ~1.2 ms of CPU instead of ~3 ms
with httpcore's transport (benchmarks/load_bench.py, baseline line, 200 learners).

- One aiohttp session and connection pool per transport, made on first use inside the
  running event loop (the provider keeps one httpx client, so one transport, per loop) and
  closed by `aclose()`. At most `Limits.max_connections` open (TUTOR_LLM_MAX_CONNECTIONS);
  an idle connection is kept `Limits.keepalive_expiry` seconds.
- TLS is verified with the context httpx itself would make (certifi, or SSL_CERT_FILE /
  SSL_CERT_DIR). HTTP_PROXY / HTTPS_PROXY / ALL_PROXY / NO_PROXY are read once, when the
  transport is made (as httpx reads them); ~/.netrc is not read.
- Timeouts come from each request's httpx timeout: `pool` bounds getting a connection
  (waiting for a free one, then opening it), `connect` each connection attempt, `read` the
  silence between two reads; aiohttp has no write timeout (a request is a few KB). There
  is no total: the turn's deadline is enforced above (tutor.llm.streaming, policy).
- The body is streamed as it arrives; closing it before the end closes the connection at
  once (a reader that stopped early), after the end hands the connection back for reuse.
- Cookies, redirects and content decoding are left to httpx, as with its own transport.
- aiohttp's failures become the httpx exceptions httpcore raises for the same event, so
  a dropped connection reads as a broken connection, never as a timeout.
- A kept-alive connection is looked at before it is reused, as httpcore does: readable
  while idle means the server hung up (or sent something unasked), so it is closed instead.
  aiohttp alone only learns of a hang-up when the event loop next reads the socket, which a
  loop busy with other work (a judge's parse, the semantic layer) had not done yet.
- A server may still hang up the moment a request goes out on a reused connection. Such a
  request, failed before any answer came, is sent once more on a fresh connection
  (`resent` counts them); a fresh connection's failure is reported as it is. The retry is
  inside the call, so the call's deadline bounds it.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import select
import urllib.request
import weakref
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import httpx
from yarl import URL

_HTTP11 = {"http_version": b"HTTP/1.1"}

log = logging.getLogger(__name__)

# Set by _Connector for the request being sent in this task: it went out on a kept-alive
# connection (`_reused`); it must open a new one (`_fresh`, the retry).
_reused: contextvars.ContextVar[bool] = contextvars.ContextVar("tutor_llm_reused", default=False)
_fresh: contextvars.ContextVar[bool] = contextvars.ContextVar("tutor_llm_fresh", default=False)


def _httpx_error(exc: Exception) -> httpx.TransportError:
    """The httpx exception httpcore raises for the same failure (most specific first)."""
    message = str(exc) or type(exc).__name__
    if isinstance(exc, aiohttp.ConnectionTimeoutError):  # no free connection, or no connection, in time
        return httpx.ConnectTimeout(message)
    if isinstance(exc, asyncio.TimeoutError):  # SocketTimeoutError: nothing read within `read`
        return httpx.ReadTimeout(message)
    if isinstance(exc, (aiohttp.ClientProxyConnectionError, aiohttp.ClientHttpProxyError)):
        return httpx.ProxyError(message)
    if isinstance(exc, aiohttp.ClientConnectorError):  # refused, DNS, TLS handshake, certificate
        return httpx.ConnectError(message)
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return httpx.RemoteProtocolError("Server disconnected without sending a complete response")
    if isinstance(exc, (aiohttp.ClientPayloadError, aiohttp.ClientResponseError)):
        # A body cut short (a length or chunked body the server hung up in), a malformed
        # chunk or status line: httpcore calls these protocol errors too.
        return httpx.RemoteProtocolError(message)
    if isinstance(exc, ConnectionResetError):  # aiohttp's "cannot write to closing transport"
        return httpx.WriteError(message)
    if isinstance(exc, (aiohttp.NonHttpUrlClientError, aiohttp.InvalidUrlClientError)):
        return httpx.UnsupportedProtocol(message)
    if isinstance(exc, (aiohttp.ClientConnectionError, OSError)):  # reset by peer while reading
        return httpx.ReadError(message)
    return httpx.TransportError(message)


def _hung_up(proto: object) -> bool:
    """An idle connection whose socket has something to read: the server's hang-up (or bytes
    nobody asked for). httpcore asks the same before reusing a connection."""
    transport = getattr(proto, "transport", None)
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None:
        return False
    try:
        if hasattr(select, "poll"):
            poller = select.poll()
            poller.register(sock, select.POLLIN)
            return bool(poller.poll(0))
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):  # closed under us: certainly not reusable
        return True


class _Connector(aiohttp.TCPConnector):
    """aiohttp's pool, checked before reuse (`_hung_up`) and skipped for a retry (`_fresh`).

    aiohttp has no public hook for either; `_get` is where its pool hands out an idle
    connection (None: open a new one)."""

    async def _get(self, key, traces):  # type: ignore[override]
        if _fresh.get():
            return None
        while (connection := await super()._get(key, traces)) is not None:
            if not _hung_up(connection.protocol):
                _reused.set(True)
                return connection
            connection.close()  # never reused: closed, and the next idle one is looked at
        return None


def _stale(exc: BaseException) -> bool:
    """A failure before any answer that a kept-alive connection the server had closed gives:
    the request could not be written, or the server hung up without a byte of answer."""
    if isinstance(exc, aiohttp.ClientConnectorError):  # opening a connection: not a stale one
        return False
    return isinstance(exc, (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError, ConnectionResetError,
                            BrokenPipeError))


class AiohttpResponseStream(httpx.AsyncByteStream):
    """The response body, each read handed on as it arrives."""

    __slots__ = ("_response", "_done")

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response
        self._done = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while chunk := await self.read():
            yield chunk

    async def read(self) -> bytes:
        """The next bytes as they arrive; b"" at the end. A streamed reply read straight from
        here (`direct_body`) skips the two async generators httpx stacks on top of
        __aiter__, one step of each per event."""
        try:
            chunk = await self._response.content.readany()
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
            raise _httpx_error(exc) from exc
        if not chunk:
            self._done = True
        return chunk

    async def aclose(self) -> None:
        if self._done or self._response.content.is_eof():
            self._response.release()  # the whole body is in: the connection can serve the next call
        else:
            self._response.close()  # stopped early, or failed: the connection goes at once


def direct_body(response: httpx.Response) -> AiohttpResponseStream | None:
    """The body of a response this transport made, for reading with `read()`; None for any
    other response (another transport, a body httpx must decode first, one already read).
    The response is marked read, as `aiter_raw` marks it; closing it closes the body."""
    inner = getattr(response.stream, "_stream", None)  # httpx wraps the transport's stream once
    if not isinstance(inner, AiohttpResponseStream) or response.is_stream_consumed:
        return None
    if "content-encoding" in response.headers:
        return None
    response.is_stream_consumed = True
    return inner


class ProxySettings:
    """HTTP(S)_PROXY / ALL_PROXY / NO_PROXY as read once; the answer per origin is cached."""

    def __init__(self, proxies: dict[str, str] | None = None) -> None:
        self._proxies = urllib.request.getproxies() if proxies is None else proxies
        self._by_origin: dict[tuple[str, str], tuple[URL | None, aiohttp.BasicAuth | None]] = {}

    def for_url(self, url: httpx.URL) -> tuple[URL | None, aiohttp.BasicAuth | None]:
        key = (url.scheme, url.host)
        found = self._by_origin.get(key)
        if found is None:
            found = self._by_origin[key] = self._lookup(url.scheme, url.host)
        return found

    def _lookup(self, scheme: str, host: str) -> tuple[URL | None, aiohttp.BasicAuth | None]:
        raw = self._proxies.get(scheme) or self._proxies.get("all")
        if not raw or urllib.request.proxy_bypass_environment(host, self._proxies):
            return None, None
        proxy = URL(raw if "://" in raw else f"http://{raw}")
        if proxy.user is None:
            return proxy, None
        return proxy.with_user(None), aiohttp.BasicAuth(proxy.user, proxy.password or "")


class AiohttpTransport(httpx.AsyncBaseTransport):
    """httpx.AsyncBaseTransport over one aiohttp ClientSession (see the module docstring)."""

    def __init__(self, limits: httpx.Limits, *, proxies: dict[str, str] | None = None) -> None:
        self._limits = limits
        self._ssl = httpx.create_ssl_context()
        self._proxy = ProxySettings(proxies)
        self._session: aiohttp.ClientSession | None = None
        self._held = _Held()
        weakref.finalize(self, _close_now, self._held)
        self._timeouts: dict[tuple[Any, ...], aiohttp.ClientTimeout] = {}
        self._urls: dict[str, URL] = {}
        self.resent = 0  # requests sent again on a fresh connection (see the module docstring)

    def _new_session(self) -> aiohttp.ClientSession:
        connector = _Connector(
            limit=self._limits.max_connections or 0,  # 0: no limit, as httpx's None
            keepalive_timeout=self._limits.keepalive_expiry,
            ssl=self._ssl,
        )
        return aiohttp.ClientSession(
            connector=connector,
            cookie_jar=aiohttp.DummyCookieJar(),  # httpx's client keeps the cookies
            auto_decompress=False,  # httpx decodes content-encoding itself
            timeout=aiohttp.ClientTimeout(total=None),
            trust_env=False,  # proxies are ours (ProxySettings); aiohttp would re-read them per request
        )

    def _timeout(self, timeout: dict[str, float | None]) -> aiohttp.ClientTimeout:
        key = (timeout.get("connect"), timeout.get("read"), timeout.get("pool"))
        found = self._timeouts.get(key)
        if found is None:
            connect, read, pool = key
            found = self._timeouts[key] = aiohttp.ClientTimeout(
                total=None, connect=pool, sock_connect=connect, sock_read=read)
        return found

    def _url(self, url: httpx.URL) -> URL:
        text = str(url)
        found = self._urls.get(text)
        if found is None:
            if len(self._urls) >= 256:  # a few endpoints in practice; never grow without bound
                self._urls.clear()
            if url.userinfo:  # never on the wire: httpx has turned it into an Authorization header
                url = url.copy_with(userinfo=b"")
            found = self._urls[text] = URL(str(url), encoded=True)  # httpx already percent-encoded it
        return found

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        session = self._session
        if session is None:
            session = self._session = self._held.session = self._new_session()
            self._held.loop = asyncio.get_running_loop()
        proxy, proxy_auth = self._proxy.for_url(request.url)
        try:
            data = request.content  # httpx has already encoded the JSON
        except httpx.RequestNotRead:
            data = await request.aread()
        send = dict(
            headers=request.headers.multi_items(),
            data=data or None,
            allow_redirects=False,
            timeout=self._timeout(request.extensions.get("timeout") or {}),
            proxy=proxy,
            proxy_auth=proxy_auth,
        )
        url = self._url(request.url)
        reused = _reused.set(False)
        try:
            try:
                response = await session.request(request.method, url, **send)
            except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
                if not (_reused.get() and _stale(exc)):
                    raise
                log.debug("%s %s: a kept-alive connection failed (%s); sent again on a fresh one",
                          request.method, request.url.host, type(exc).__name__)
                self.resent += 1
                fresh = _fresh.set(True)
                try:
                    response = await session.request(request.method, url, **send)
                finally:
                    _fresh.reset(fresh)
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
            raise _httpx_error(exc) from exc
        finally:
            _reused.reset(reused)
        extensions = _HTTP11 if not response.reason else {**_HTTP11, "reason_phrase": response.reason.encode()}
        return httpx.Response(
            response.status,
            headers=response.raw_headers,
            stream=AiohttpResponseStream(response),
            request=request,
            extensions=extensions,
        )

    async def aclose(self) -> None:
        session, self._session, self._held.session = self._session, None, None
        if session is not None:
            await session.close()


class _Held:
    """What the finaliser needs of a transport, without keeping the transport alive."""

    __slots__ = ("session", "loop")

    def __init__(self) -> None:
        self.session: aiohttp.ClientSession | None = None
        self.loop: asyncio.AbstractEventLoop | None = None


def _close_now(held: _Held) -> None:
    """A transport dropped without `aclose()` (an `asyncio.run` that ended with its client
    open) closes its connections, instead of aiohttp's "Unclosed client session" error when
    the garbage collector gets to them. On a running loop, `session.close()` is scheduled
    there (the collector may run in any thread). On an ended loop there is nothing to wait
    for: the close coroutine is run by hand up to that wait, which it then skips."""
    session, loop = held.session, held.loop
    held.session = None
    if session is None or loop is None or session.closed:
        return
    try:
        if not loop.is_closed():
            loop.call_soon_threadsafe(lambda: loop.create_task(session.close()))
            return
        closing = session.close()
        closing.send(None)
    except StopIteration:
        return
    except Exception:  # noqa: BLE001 - a finaliser has no one to report to
        return
    closing.close()
