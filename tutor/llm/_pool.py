"""httpcore's connection pool with its bookkeeping made linear.

httpcore 1.0.x re-plans the whole pool on every request and every response end
(`_assign_requests_to_connections`): for each idle connection it counts every connection
again, and it polls every idle socket. With one connection per learner that is quadratic:
at 200 learners the pool's bookkeeping cost more CPU than the turns themselves (upstream:
encode/httpcore#1035, open). This subclass keeps the behaviour and drops the cost:

- a connection is reused only if it is idle, not expired and the server has not closed it
  (checked on the one about to be reused rather than on all of them every time);
- idle connections beyond `max_keepalive_connections`, expired ones and closed ones are
  swept at most every SWEEP_INTERVAL_S, and whenever the pool is full;
- a connection already handed to a waiting request is neither handed to another one nor
  closed under it (encode/httpcore#1110).

Only the installed httpcore's own pool class is replaced; any other leaves httpx as it is.
"""

from __future__ import annotations

import time
from typing import Any

import httpcore
import httpx

SWEEP_INTERVAL_S = 0.25


class LinearConnectionPool(httpcore.AsyncConnectionPool):
    _next_sweep = 0.0

    def _assign_requests_to_connections(self) -> list[Any]:
        closing: list[Any] = []
        queued = [r for r in self._requests if r.is_queued()]
        reserved = {id(r.connection) for r in self._requests if r.connection is not None}
        now = time.monotonic()
        if now >= self._next_sweep or (queued and len(self._connections) >= self._max_connections):
            self._next_sweep = now + SWEEP_INTERVAL_S
            self._sweep(closing, reserved)
        for request in queued:
            origin = request.request.url.origin
            connection = self._reusable(origin, closing, reserved)
            if connection is None:
                if len(self._connections) >= self._max_connections:
                    idle = next((c for c in self._connections if c.is_idle() and id(c) not in reserved), None)
                    if idle is None:
                        continue  # stays queued until a connection is released
                    self._connections.remove(idle)
                    closing.append(idle)
                connection = self.create_connection(origin)
                self._connections.append(connection)
            request.assign_to_connection(connection)
            reserved.add(id(connection))
        return closing

    def _reusable(self, origin: Any, closing: list[Any], reserved: set[int]) -> Any:
        for connection in list(self._connections):
            if id(connection) in reserved or not connection.is_available():
                continue
            if not connection.can_handle_request(origin):
                continue
            if connection.has_expired():  # keep-alive ran out, or the server hung up
                self._connections.remove(connection)
                closing.append(connection)
                continue
            return connection
        return None

    def _sweep(self, closing: list[Any], reserved: set[int]) -> None:
        idle = sum(1 for c in self._connections if c.is_idle())
        keep = []
        for connection in self._connections:
            if connection.is_closed():
                continue
            if id(connection) not in reserved and (
                connection.has_expired() or (connection.is_idle() and idle > self._max_keepalive_connections)
            ):
                idle -= connection.is_idle()
                closing.append(connection)
                continue
            keep.append(connection)
        self._connections = keep


def pooled_transport(limits: httpx.Limits) -> httpx.AsyncHTTPTransport:
    """httpx's own transport (TLS, proxies and retries as usual) over the linear pool."""
    transport = httpx.AsyncHTTPTransport(limits=limits)
    if type(getattr(transport, "_pool", None)) is httpcore.AsyncConnectionPool:
        transport._pool.__class__ = LinearConnectionPool
    return transport
