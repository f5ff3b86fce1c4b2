"""The model client's connection pool (tutor.llm._pool): httpcore's, made linear, same
behaviour — keep-alive reuse, the connection limit, and never a dead idle connection."""

from __future__ import annotations

import asyncio

import httpx

from tutor.llm._http import http_limits
from tutor.llm._pool import LinearConnectionPool, pooled_transport

BODY = b'{"ok": true}'


class Server:
    """A loopback HTTP/1.1 server that answers every request after `delay` seconds; with
    `close_idle_after`, it hangs up a kept-alive connection that long after answering."""

    def __init__(self, delay: float = 0.0, close_idle_after: float | None = None) -> None:
        self.delay, self.close_idle_after = delay, close_idle_after
        self.connections = self.in_flight = self.max_in_flight = 0

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/"

    async def __aexit__(self, *exc) -> None:
        self.server.close()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                wait = self.close_idle_after
                await (asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), wait) if wait else reader.readuntil(b"\r\n\r\n"))
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
                await asyncio.sleep(self.delay)
                self.in_flight -= 1
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                             % (len(BODY), BODY))
                await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError):
            pass
        finally:
            writer.close()


def client(max_connections: int) -> httpx.AsyncClient:
    limits = http_limits({"TUTOR_LLM_MAX_CONNECTIONS": str(max_connections)})
    return httpx.AsyncClient(limits=limits, transport=pooled_transport(limits))


def test_the_transport_uses_the_linear_pool():
    transport = pooled_transport(http_limits({}))
    assert isinstance(transport._pool, LinearConnectionPool)
    assert transport._pool._max_connections == transport._pool._max_keepalive_connections == 1000


def test_sequential_calls_reuse_one_kept_alive_connection():
    async def main(server: Server):
        async with server as url, client(10) as http:
            return [(await http.get(url)).json() for _ in range(5)]

    server = Server()
    assert asyncio.run(main(server)) == [{"ok": True}] * 5
    assert server.connections == 1


def test_concurrent_calls_beyond_the_limit_wait_for_a_connection_and_all_complete():
    async def main(server: Server):
        async with server as url, client(3) as http:
            replies = await asyncio.gather(*(http.get(url) for _ in range(12)))
        return [r.status_code for r in replies]

    server = Server(delay=0.05)
    assert asyncio.run(main(server)) == [200] * 12
    assert server.max_in_flight == 3 and server.connections == 3


def test_an_idle_connection_the_server_closed_is_never_reused():
    async def main(server: Server):
        async with server as url, client(10) as http:
            first = await http.get(url)
            await asyncio.sleep(0.3)  # the server has hung up the idle connection by now
            second = await http.get(url)
        return first.status_code, second.status_code

    server = Server(close_idle_after=0.05)
    assert asyncio.run(main(server)) == (200, 200)
    assert server.connections == 2
