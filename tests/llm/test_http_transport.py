"""The model client's HTTP transport (tutor.llm._transport, httpx over aiohttp), against raw
HTTP/1.1 servers on 127.0.0.1: the connection limit, keep-alive reuse, streaming as bytes
arrive, an early close hanging up at once, and each network failure reported as what it is
(a dropped connection is never called a timeout)."""

from __future__ import annotations

import asyncio
import gc
import gzip
import socket
import time
import warnings
from collections.abc import Awaitable, Callable

import httpx
import pytest

from tutor.llm import ChatMessage, CompletionRequest, ConnectionFailed, LLMSettings, RequestTimeout, make_provider
from tutor.llm._http import http_limits
from tutor.llm._transport import AiohttpTransport
from tutor.llm.errors import LLMError

REQUEST = CompletionRequest([ChatMessage("system", "s"), ChatMessage("user", "hi")], 0.7, 100)
BODY = b'{"ok": true}'


def json_answer(body: bytes = BODY) -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)


SSE_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def sse_delta(text: str) -> bytes:
    return b'data: {"choices": [{"index": 0, "delta": {"content": "%s"}}]}\n\n' % text.encode()


Answer = Callable[[asyncio.StreamReader, asyncio.StreamWriter, bytes], Awaitable[None]]


async def answer_json(reader, writer, head) -> None:
    writer.write(json_answer())


class Server:
    """A loopback HTTP/1.1 server: reads each request (head and content-length body) and
    lets `answer` write the reply; counts connections, open ones and requests in flight."""

    def __init__(self, answer: Answer = answer_json, delay: float = 0.0, close_idle_after: float | None = None):
        self.answer, self.delay, self.close_idle_after = answer, delay, close_idle_after
        self.connections = self.open = self.max_open = self.in_flight = self.max_in_flight = 0
        self.closed_by_client = asyncio.Event()
        self.heads: list[bytes] = []
        self.bodies: list[bytes] = []

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def __aexit__(self, *exc) -> None:
        self.server.close()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        self.max_open = max(self.max_open, self.open)
        try:
            while True:
                read_head = reader.readuntil(b"\r\n\r\n")
                head = await (asyncio.wait_for(read_head, self.close_idle_after) if self.close_idle_after
                              else read_head)
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                self.heads.append(head)
                self.bodies.append(await reader.readexactly(length))
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
                await asyncio.sleep(self.delay)
                self.in_flight -= 1
                await self.answer(reader, writer, head)
                await writer.drain()
                if writer.is_closing():
                    return
        except asyncio.IncompleteReadError:
            self.closed_by_client.set()
        except (asyncio.TimeoutError, ConnectionError):
            pass
        finally:
            self.open -= 1
            writer.close()


def client(max_connections: int = 10, **kwargs) -> httpx.AsyncClient:
    limits = http_limits({"TUTOR_LLM_MAX_CONNECTIONS": str(max_connections)})
    return httpx.AsyncClient(transport=AiohttpTransport(limits, **kwargs), timeout=5.0)


def settings(base_url: str, **overrides) -> LLMSettings:
    values = dict(provider="openai", base_url=f"{base_url}/v1", model="m", max_retries=0, timeout_s=2.0, stream=True)
    return LLMSettings(**{**values, **overrides})


async def complete(settings: LLMSettings):
    provider = make_provider(settings)
    try:
        return await provider.complete(REQUEST)
    finally:
        await provider.aclose()


def failure(answer: Answer, **overrides) -> LLMError:
    async def main():
        async with Server(answer) as url:
            await complete(settings(url, **overrides))

    with pytest.raises(LLMError) as info:
        asyncio.run(main())
    return info.value


# --- the pool ---------------------------------------------------------------------------


def test_sequential_calls_reuse_one_kept_alive_connection():
    async def main(server: Server):
        async with server as url, client() as http:
            return [(await http.post(f"{url}/v1/x", json={"n": n})).json() for n in range(10)]

    server = Server()
    assert asyncio.run(main(server)) == [{"ok": True}] * 10
    assert server.connections == 1
    assert server.bodies[3] == b'{"n":3}'  # the JSON body httpx encoded, as it was


def test_concurrent_calls_beyond_the_limit_wait_for_a_connection_and_all_complete():
    async def main(server: Server):
        async with server as url, client(2) as http:
            replies = await asyncio.gather(*(http.get(url) for _ in range(5)))
        return [r.status_code for r in replies]

    server = Server(delay=0.1)
    assert asyncio.run(main(server)) == [200] * 5
    assert server.max_open == 2 and server.max_in_flight == 2


def test_an_idle_connection_the_server_closed_is_never_reused():
    async def main(server: Server):
        async with server as url, client() as http:
            first = await http.get(url)
            await asyncio.sleep(0.3)  # the server has hung up the idle connection by now
            second = await http.get(url)
        return first.status_code, second.status_code

    server = Server(close_idle_after=0.05)
    assert asyncio.run(main(server)) == (200, 200)
    assert server.connections == 2


def test_the_providers_limit_is_tutor_llm_max_connections(monkeypatch):
    monkeypatch.setenv("TUTOR_LLM_MAX_CONNECTIONS", "2")
    reply = b'{"choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": "stop"}]}'

    async def answer(reader, writer, head):
        writer.write(json_answer(reply))

    async def main(server: Server):
        async with server as url:
            provider = make_provider(settings(url, stream=False))
            try:
                return await asyncio.gather(*(provider.complete(REQUEST) for _ in range(5)))
            finally:
                await provider.aclose()

    server = Server(answer, delay=0.1)
    assert [c.text for c in asyncio.run(main(server))] == ["hi"] * 5
    assert server.max_open == 2 and server.connections == 2


# --- streaming ----------------------------------------------------------------------------


def test_a_streamed_body_is_handed_on_as_each_piece_arrives():
    sent_second = asyncio.Event()
    got_first = asyncio.Event()

    async def answer(reader, writer, head):
        writer.write(SSE_HEAD + chunk(sse_delta("one")))
        await writer.drain()
        await asyncio.wait_for(got_first.wait(), 5)  # the client has the first event before the second exists
        sent_second.set()
        writer.write(chunk(sse_delta("two")) + chunk(b"data: [DONE]\n\n") + chunk(b""))

    async def main():
        async with Server(answer) as url:
            provider = make_provider(settings(url))
            seen = []
            try:
                async for delta in provider.stream(REQUEST):
                    seen.append((delta, sent_second.is_set()))
                    got_first.set()
            finally:
                await provider.aclose()
            return seen

    assert asyncio.run(main()) == [("one", False), ("two", True)]


def test_streamed_calls_in_sequence_share_one_connection():
    async def answer(reader, writer, head):
        writer.write(SSE_HEAD + chunk(sse_delta("hi")) + chunk(b"data: [DONE]\n\n") + chunk(b""))

    async def main(server: Server):
        async with server as url:
            provider = make_provider(settings(url))
            try:
                return [(await provider.complete(REQUEST)).text for _ in range(10)]
            finally:
                await provider.aclose()

    server = Server(answer)
    assert asyncio.run(main(server)) == ["hi"] * 10
    assert server.connections == 1


def test_a_compressed_event_stream_is_decoded():
    events = sse_delta("Angst – страх") + sse_delta(" 🫁") + b"data: [DONE]\n\n"

    async def answer(reader, writer, head):
        body = gzip.compress(events)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: gzip\r\n"
                     b"content-length: %d\r\n\r\n%s" % (len(body), body))

    async def main():
        async with Server(answer) as url:
            return await complete(settings(url))

    assert asyncio.run(main()).text == "Angst – страх 🫁"


def test_closing_a_stream_early_hangs_up_at_once_and_the_next_call_gets_a_fresh_connection():
    async def answer(reader, writer, head):
        if len(server.heads) > 1:
            writer.write(json_answer())
            return
        writer.write(SSE_HEAD + chunk(sse_delta("one")))
        await writer.drain()
        await reader.read(1)  # waits here until the client hangs up
        writer.close()
        server.closed_by_client.set()

    async def main():
        async with server as url, client() as http:
            async with http.stream("POST", f"{url}/v1/x", json={}) as response:
                async for _ in response.aiter_raw():
                    break  # a reader that stops early (Stop, a repetition)
            started = time.monotonic()
            await asyncio.wait_for(server.closed_by_client.wait(), 2)
            hung_up_in = time.monotonic() - started
            second = await http.get(url)
        return hung_up_in, second.json()

    server = Server(answer)
    hung_up_in, second = asyncio.run(main())
    assert hung_up_in < 0.5 and second == {"ok": True}
    assert server.connections == 2


# --- failures ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_nothing_listening_is_a_connection_failure_naming_the_base_url():
    error_settings = settings(f"http://127.0.0.1:{free_port()}")
    with pytest.raises(ConnectionFailed) as info:
        asyncio.run(complete(error_settings))
    assert "TUTOR_LLM_BASE_URL" in info.value.operator_message
    assert "is the server running" in info.value.operator_message
    assert "ConnectError" in info.value.message


@pytest.mark.parametrize("stream", [True, False])
def test_a_server_that_hangs_up_without_answering_is_a_broken_connection_not_a_timeout(stream):
    async def answer(reader, writer, head):
        writer.close()

    error = failure(answer, stream=stream)
    assert isinstance(error, ConnectionFailed) and not isinstance(error, RequestTimeout)
    assert "TUTOR_LLM_TIMEOUT" not in error.operator_message and "within" not in error.message


def test_a_server_that_hangs_up_mid_stream_is_a_broken_connection_not_a_timeout():
    async def answer(reader, writer, head):
        writer.write(SSE_HEAD + chunk(sse_delta("one")) + b"40\r\ndata: {\"choi")  # a chunk cut short
        await writer.drain()
        writer.close()

    error = failure(answer)
    assert isinstance(error, ConnectionFailed) and not isinstance(error, RequestTimeout)
    assert "RemoteProtocolError" in error.message and "broke" in error.operator_message
    assert "TUTOR_LLM_TIMEOUT" not in error.operator_message


def test_a_json_answer_cut_short_is_a_broken_connection():
    async def answer(reader, writer, head):
        writer.write(json_answer()[:-4])
        await writer.drain()
        writer.close()

    error = failure(answer, stream=False)
    assert isinstance(error, ConnectionFailed) and not isinstance(error, RequestTimeout)


@pytest.mark.parametrize("headers_first", [True, False])
def test_a_server_that_goes_silent_is_a_read_timeout(headers_first):
    async def answer(reader, writer, head):
        if headers_first:
            writer.write(SSE_HEAD + chunk(sse_delta("one")))
            await writer.drain()
        await reader.read(1)  # silent until the client gives up

    started = time.monotonic()
    error = failure(answer, timeout_s=0.3)
    assert isinstance(error, RequestTimeout) and "ReadTimeout" in error.message
    assert "TUTOR_LLM_TIMEOUT=0.3s" in error.operator_message
    assert time.monotonic() - started < 2.0


def test_waiting_for_a_free_connection_counts_against_the_pool_timeout():
    async def main(server: Server):
        async with server as url:
            limits = http_limits({"TUTOR_LLM_MAX_CONNECTIONS": "1"})
            timeout = httpx.Timeout(5.0, pool=0.2)
            async with httpx.AsyncClient(transport=AiohttpTransport(limits), timeout=timeout) as http:
                results = await asyncio.gather(http.get(url), http.get(url), return_exceptions=True)
        return results

    first, second = asyncio.run(main(Server(delay=0.6)))
    assert first.status_code == 200
    assert isinstance(second, httpx.TimeoutException)


# --- proxies -------------------------------------------------------------------------------


def test_http_proxy_from_the_environment_is_used_and_no_proxy_is_respected(monkeypatch):
    async def main(server: Server, url: str):
        async with client() as http:
            await http.get("http://model.example:8080/v1/models")
            await http.get(f"{url}/direct")

    async def run():
        server = Server()
        async with server as url:
            monkeypatch.setenv("HTTP_PROXY", url)
            monkeypatch.setenv("NO_PROXY", "127.0.0.1")
            await main(server, url)
        return server.heads

    heads = asyncio.run(run())
    assert heads[0].startswith(b"GET http://model.example:8080/v1/models HTTP/1.1")  # through the proxy
    assert heads[1].startswith(b"GET /direct HTTP/1.1")  # NO_PROXY: straight to the server


# --- lifetime ------------------------------------------------------------------------------


def test_a_client_its_event_loop_outlived_is_let_go_without_an_error(openai_server, caplog):
    # CLIs and tests drive one provider from successive asyncio.run() calls, and may never
    # close it: nothing about an "Unclosed client session" may reach the log.
    from tests.fakes import wire
    from tests.fakes.servers import settings_for

    openai_server.script(wire.openai_reply(wire.tutor_json("one")), wire.openai_reply(wire.tutor_json("two")))
    provider = make_provider(settings_for(openai_server))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert "one" in asyncio.run(provider.complete(REQUEST)).text
        assert "two" in asyncio.run(provider.complete(REQUEST)).text
        del provider
        gc.collect()
    assert "Unclosed" not in caplog.text
    assert not [w for w in caught if "Unclosed client session" in str(w.message) or "connector" in str(w.message)]
