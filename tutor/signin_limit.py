"""The limit on failed sign-ins: at most `limit` per (username, address) in a moving window;
past it, the next try waits until the oldest failure leaves the window; a success clears
the count.

Counted in this process's memory, or — when `TUTOR_REDIS_URL` is set — in Redis with the
`limits` library, so that every worker (on every machine) counts against the same number:
with per-process counts, N workers would give a guesser N times the tries. In Redis the key
is a hash of the username and address, never the names themselves, and each key expires
with its window.

When Redis cannot be reached, sign-in stays available and stays limited: the count falls
back to this process's memory (which records every failure all along, so the failures this
worker saw before Redis went down still count), and one warning naming TUTOR_REDIS_URL is
logged every WARN_EVERY_S. Refusing every sign-in would lock everyone out for as long as
Redis is down; counting nothing would let guessing run free. After a failed call, Redis is
left alone for RETRY_AFTER_S, so a Redis that hangs costs one short wait now and then, not
one per sign-in (tutor.usage.RedisOutage, the same rule as for the usage limits).
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import Any

from limits import RateLimitItemPerSecond
from limits.strategies import MovingWindowRateLimiter

from tutor.usage import RedisOutage, UsageSettings, hashed_key, redis_storage

__all__ = ["FailureLimit", "FailureLimitFromEnv"]

log = logging.getLogger(__name__)

# The most (username, address) pairs kept in memory: a flood of made-up names forgets the oldest.
MEMORY_KEYS_MAX = 100_000

_UNREACHABLE = object()  # what a call to Redis returns when Redis could not answer


class FailureLimit:
    """At most `limit` failed sign-ins per (username, address) in `window_s`; past it, the
    next try waits until the oldest failure leaves the window. Counted in this process, or
    in Redis at `redis_url` (shared by every worker), falling back to this process's count
    while Redis cannot be reached. `clock` times the in-memory count; Redis entries carry
    the wall-clock time (time.time), as the `limits` library stamps them."""

    def __init__(self, limit: int = 10, window_s: float = 15 * 60, clock=time.monotonic, *,
                 redis_url: str | None = None, namespace: str = "tutor-signin") -> None:
        self.limit, self.window_s, self.clock = limit, window_s, clock
        self.redis_url = redis_url
        self._failures: dict[tuple[str, str], deque[float]] = {}
        self._lock = threading.Lock()
        # Redis is connected on first use, not here: nothing to reach at import, and a
        # server that forks its workers afterwards gives each its own connections.
        self._item = RateLimitItemPerSecond(limit, max(1, round(window_s)), namespace=namespace)
        self._shared: MovingWindowRateLimiter | None = None
        self._outage = RedisOutage(log, "failed sign-ins counted in this process only")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> FailureLimit:
        """The default limit, in Redis when TUTOR_REDIS_URL is set (read and checked as the
        usage limits read it: tutor.usage.UsageSettings)."""
        return cls(redis_url=UsageSettings.from_env(env).redis_url)

    # ------------------------------------------------------------------ the rule

    def wait_minutes(self, username: str, address: str) -> int:
        """0 when a try is allowed, else whole minutes until the next one is."""
        stats = self._remote(lambda shared: shared.get_window_stats(self._item, _key(username, address)))
        if stats is _UNREACHABLE:
            return self._wait_in_memory(username, address)
        if stats.remaining > 0:
            return 0
        return max(1, math.ceil((stats.reset_time - time.time()) / 60))

    def failed(self, username: str, address: str) -> None:
        # Always counted in memory too: the fallback if Redis goes away later.
        self._failed_in_memory(username, address)
        # Past the limit `hit` records nothing more; the wait runs from the oldest failure.
        self._remote(lambda shared: shared.hit(self._item, _key(username, address)))

    def succeeded(self, username: str, address: str) -> None:
        with self._lock:
            self._failures.pop((username, address), None)
        self._remote(lambda shared: shared.clear(self._item, _key(username, address)))

    # ---------------------------------------------------------- in this process

    def _recent(self, key: tuple[str, str], now: float) -> deque[float]:
        failures = self._failures.get(key)
        if failures is None:
            return deque()
        while failures and now - failures[0] >= self.window_s:
            failures.popleft()
        if not failures:
            del self._failures[key]
        return failures

    def _wait_in_memory(self, username: str, address: str) -> int:
        with self._lock:
            now = self.clock()
            failures = self._recent((username, address), now)
            if len(failures) < self.limit:
                return 0
            return max(1, math.ceil((failures[0] + self.window_s - now) / 60))

    def _failed_in_memory(self, username: str, address: str) -> None:
        with self._lock:
            now = self.clock()
            key = (username, address)
            self._recent(key, now)
            self._failures.setdefault(key, deque()).append(now)
            if len(self._failures) > MEMORY_KEYS_MAX:  # a flood of made-up names: forget the oldest
                self._failures.pop(next(iter(self._failures)))

    # ------------------------------------------------------------------- Redis

    def _remote(self, call) -> Any:
        """`call(limiter)` on the Redis count, or _UNREACHABLE: without TUTOR_REDIS_URL, for
        a while after Redis failed, or when it fails now (never raised to the caller)."""
        if self.redis_url is None or self._outage.ongoing():
            return _UNREACHABLE
        try:
            if self._shared is None:
                self._shared = MovingWindowRateLimiter(redis_storage(self.redis_url))
            return call(self._shared)
        except Exception as exc:  # Redis down, refusing or hanging: count in this process instead
            self._outage.began(exc)
            return _UNREACHABLE


def _key(username: str, address: str) -> str:
    # Hashed: the counting store needn't know who tried from where. JSON keeps the pair
    # unambiguous whatever characters either holds.
    return hashed_key(json.dumps([username, address]))


class FailureLimitFromEnv:
    """This process's FailureLimit, built from the environment (FailureLimit.from_env) on
    its first use rather than at import, then kept: the variables are read once the app is
    configured, and Redis is connected only in the process that signs people in."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self._env = env
        self._limit: FailureLimit | None = None
        self._lock = threading.Lock()

    def get(self) -> FailureLimit:
        if self._limit is None:
            with self._lock:
                if self._limit is None:
                    self._limit = FailureLimit.from_env(self._env)
        return self._limit

    def wait_minutes(self, username: str, address: str) -> int:
        return self.get().wait_minutes(username, address)

    def failed(self, username: str, address: str) -> None:
        self.get().failed(username, address)

    def succeeded(self, username: str, address: str) -> None:
        self.get().succeeded(username, address)
