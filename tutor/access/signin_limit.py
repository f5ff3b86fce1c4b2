"""Limits on guessing: failed sign-ins per (username, address) and per username from any
address, and new accounts per address and day.

Each limit is an `AttemptCount`: a moving window of attempts per key in which an attempt
is *taken* before the password is checked (or the account made) — the check and the count
are one atomic step, so forty parallel guesses cannot all pass a check made before any of
them was counted. A success gives its attempt back (and clears the per-address failures);
an attempt that checked nothing (the database was down) is given back too.

- per (username, address): TUTOR_SIGNIN_FAILURES (10) in 15 minutes; past it, "Too many
  attempts — try again in N minutes" to that address only;
- per username, from any address: TUTOR_SIGNIN_ACCOUNT_FAILURES (50) in an hour (OWASP ASVS
  2.2.1: at most 100 a hour); past it the account is locked for everyone until the oldest
  failure leaves the hour, and the owner is told so plainly. A name nobody has is counted
  the same way, so the answer tells nothing about which names exist;
- new accounts per address: TUTOR_SIGNUPS_PER_DAY (5) in a day. A "username taken" answer
  takes one too, so names cannot be enumerated quickly through sign-up.

Counted in this process's memory, or — when `TUTOR_REDIS_URL` is set — in Redis (one Lua
script per step, so every worker on every machine counts against the same number). In
Redis each key is a hash of the username and address, never the names themselves, and
expires with its window. When Redis cannot be reached the count falls back to this
process's memory, which records every attempt all along (one warning naming
TUTOR_REDIS_URL every WARN_EVERY_S); after a failed call Redis is left alone for
RETRY_AFTER_S (tutor.access.usage.RedisOutage, the same rule as for the usage limits).
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
import uuid
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tutor.access.usage import REDIS_TIMEOUT_S, RedisOutage, UsageSettings, hashed_key
from tutor.settings import EnvReader

__all__ = ["Attempt", "AttemptCount", "FailureLimit", "FailureLimitFromEnv", "RedisLink", "Refusal", "SigninSettings",
           "SignupLimit"]

log = logging.getLogger(__name__)

# The most keys one count keeps in memory: a flood of made-up names forgets the oldest.
MEMORY_KEYS_MAX = 100_000

_UNREACHABLE = object()  # what a call to Redis returns when Redis could not answer

# KEYS[1]: the count's key. ARGV: now (s), window (s), limit, this attempt's id.
# Returns {1, 0} when the attempt is counted, else {0, seconds until the oldest leaves}: at
# most the window, though a worker's time may be older than an attempt counted before it
# (another worker's clock ahead, or this one paused between reading the time and the call).
_TAKE = """
local now, window, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) < limit then
  redis.call('ZADD', KEYS[1], now, ARGV[4])
  redis.call('EXPIRE', KEYS[1], math.ceil(window))
  return {1, '0'}
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {0, tostring(math.min(window, tonumber(oldest[2]) + window - now))}
"""


@dataclass(frozen=True)
class SigninSettings:
    failures_per_address: int = 10  # per (username, address) in failure_window_s
    failure_window_s: float = 15 * 60
    failures_per_account: int = 50  # per username from any address in account_window_s
    account_window_s: float = 60 * 60
    signups_per_day: int = 5  # per address; "username taken" answers count too
    redis_url: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SigninSettings:
        env = os.environ if env is None else env
        get = EnvReader(env)
        return cls(
            failures_per_address=get.integer("TUTOR_SIGNIN_FAILURES", cls.failures_per_address, low=1),
            failures_per_account=get.integer("TUTOR_SIGNIN_ACCOUNT_FAILURES", cls.failures_per_account, low=1),
            signups_per_day=get.integer("TUTOR_SIGNUPS_PER_DAY", cls.signups_per_day, low=1),
            redis_url=UsageSettings.from_env(env).redis_url,  # read and checked as the usage limits read it
        )


@dataclass(frozen=True)
class Refusal:
    """Why an attempt was not let through: `code` (tutor.access.accounts.MESSAGES) and the wait."""

    code: str  # throttled | account_locked | signups
    wait_s: float

    @property
    def minutes(self) -> int:
        return max(1, math.ceil(self.wait_s / 60))


class RedisLink:
    """The counts' connection to Redis at `url` (None: no Redis), shared by the counts of
    one limit, so a Redis that fails costs one wait and one warning, not one per count."""

    def __init__(self, url: str | None) -> None:
        self.url = url
        # Connected on first use, not here: nothing to reach at import, and a server that
        # forks its workers afterwards gives each its own connections.
        self._client: Any = None
        self._take: Any = None
        self._outage = RedisOutage(log, "sign-in limits counted in this process only")

    def call(self, fn) -> Any:
        """`fn(client, take_script)` on Redis, or _UNREACHABLE: without a URL, for a while
        after Redis failed, or when it fails now (never raised to the caller)."""
        if self.url is None or self._outage.ongoing():
            return _UNREACHABLE
        try:
            if self._client is None:
                import redis  # only where Redis is configured

                self._client = redis.Redis.from_url(self.url, socket_connect_timeout=REDIS_TIMEOUT_S,
                                                    socket_timeout=REDIS_TIMEOUT_S)
                self._take = self._client.register_script(_TAKE)
            return fn(self._client, self._take)
        except Exception as exc:  # Redis down, refusing or hanging: count in this process instead
            self._outage.began(exc)
            return _UNREACHABLE


class AttemptCount:
    """At most `limit` attempts per key in a moving window of `window_s`. `take` counts one
    and returns its ticket, or — at the limit — counts nothing and returns the seconds to
    wait (a float); check and count are one atomic step. `give_back(key, ticket)` uncounts
    one attempt, `clear(key)` all of them. `clock` times the in-memory count; Redis entries
    carry the wall-clock time (time.time) of the worker that counted them."""

    def __init__(self, limit: int, window_s: float, *, clock=time.monotonic, redis: RedisLink | None = None,
                 namespace: str = "tutor-attempts") -> None:
        self.limit, self.window_s, self.clock = limit, window_s, clock
        self.namespace = namespace
        self.redis = redis or RedisLink(None)
        self._memory: dict[str, deque[tuple[float, str]]] = {}
        self._lock = threading.Lock()

    def take(self, key: str) -> str | float:
        ticket = uuid.uuid4().hex
        counted_here = self._take_in_memory(key, ticket)  # the fallback, should Redis go away later
        redis_key = f"{self.namespace}:{key}"
        answer = self.redis.call(lambda r, take: take(keys=[redis_key], args=[
            repr(time.time()), repr(float(self.window_s)), self.limit, ticket]))
        if answer is _UNREACHABLE:
            return ticket if counted_here is True else counted_here
        if int(answer[0]) == 1:
            if counted_here is not True:  # Redis counted it: so does this process, past its own limit
                self._remember(key, ticket)
            return ticket
        if counted_here is True:
            self._give_back_in_memory(key, ticket)
        return max(1.0, float(answer[1]))

    def give_back(self, key: str, ticket: str) -> None:
        self._give_back_in_memory(key, ticket)
        self.redis.call(lambda r, _: r.zrem(f"{self.namespace}:{key}", ticket))

    def clear(self, key: str) -> None:
        with self._lock:
            self._memory.pop(key, None)
        self.redis.call(lambda r, _: r.delete(f"{self.namespace}:{key}"))

    # ---------------------------------------------------------- in this process

    def _recent(self, key: str, now: float) -> deque[tuple[float, str]]:
        attempts = self._memory.get(key)
        if attempts is None:
            return deque()
        while attempts and now - attempts[0][0] >= self.window_s:
            attempts.popleft()
        if not attempts:
            del self._memory[key]
        return attempts

    def _take_in_memory(self, key: str, ticket: str) -> bool | float:
        with self._lock:
            now = self.clock()
            attempts = self._recent(key, now)
            if len(attempts) >= self.limit:
                return max(1.0, attempts[0][0] + self.window_s - now)
            self._remember_locked(key, ticket, now)
            return True

    def _remember(self, key: str, ticket: str) -> None:
        with self._lock:
            self._remember_locked(key, ticket, self.clock())

    def _remember_locked(self, key: str, ticket: str, now: float) -> None:
        self._memory.setdefault(key, deque()).append((now, ticket))
        if len(self._memory) > MEMORY_KEYS_MAX:  # a flood of made-up names: forget the oldest
            self._memory.pop(next(iter(self._memory)))

    def _give_back_in_memory(self, key: str, ticket: str) -> None:
        with self._lock:
            attempts = self._memory.get(key)
            if attempts is None:
                return
            kept = deque(a for a in attempts if a[1] != ticket)
            if kept:
                self._memory[key] = kept
            else:
                del self._memory[key]

def _key(*parts: str) -> str:
    # Hashed: the counting store needn't know who tried from where. JSON keeps the parts
    # unambiguous whatever characters they hold.
    return hashed_key(json.dumps(list(parts)))


@dataclass(frozen=True)
class Attempt:
    """A sign-in let through to the password check: its tickets, to give back on success."""

    username: str
    address: str
    pair_ticket: str
    account_ticket: str


class FailureLimit:
    """Failed sign-ins: at most `limit` per (username, address) in `window_s`, and at most
    `account_limit` per username in `account_window_s` from any address."""

    def __init__(self, limit: int = 10, window_s: float = 15 * 60, clock=time.monotonic, *,
                 account_limit: int = 50, account_window_s: float = 60 * 60,
                 redis_url: str | None = None, namespace: str = "tutor-signin") -> None:
        self.redis_url = redis_url
        link = RedisLink(redis_url)
        self.pair = AttemptCount(limit, window_s, clock=clock, redis=link, namespace=namespace)
        self.account = AttemptCount(account_limit, account_window_s, clock=clock, redis=link,
                                    namespace=f"{namespace}-account")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> FailureLimit:
        s = SigninSettings.from_env(env)
        return cls(s.failures_per_address, s.failure_window_s, account_limit=s.failures_per_account,
                   account_window_s=s.account_window_s, redis_url=s.redis_url)

    def attempt(self, username: str, address: str) -> Attempt | Refusal:
        """Take one try for the password check, or the Refusal to show. The address's own
        count comes first: a refused try from one address never adds to the account's."""
        pair = self.pair.take(_key(username, address))
        if isinstance(pair, float):
            return Refusal("throttled", pair)
        account = self.account.take(_key(username))
        if isinstance(account, float):
            return Refusal("account_locked", account)
        return Attempt(username, address, pair, account)

    def succeeded(self, attempt: Attempt) -> None:
        """The password was right: this address's failures for the name are forgotten and
        the try given back to the account's count (others' failures there stay)."""
        self.pair.clear(_key(attempt.username, attempt.address))
        self.account.give_back(_key(attempt.username), attempt.account_ticket)

    def checked_nothing(self, attempt: Attempt) -> None:
        """The password could not be checked (the database was down): the try is given back."""
        self.pair.give_back(_key(attempt.username, attempt.address), attempt.pair_ticket)
        self.account.give_back(_key(attempt.username), attempt.account_ticket)


class SignupLimit:
    """New accounts per address and day; a "username taken" answer takes one too."""

    def __init__(self, per_day: int = 5, clock=time.monotonic, *, redis_url: str | None = None,
                 namespace: str = "tutor-signup") -> None:
        self.redis_url = redis_url
        self.count = AttemptCount(per_day, 24 * 60 * 60, clock=clock, redis=RedisLink(redis_url), namespace=namespace)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> SignupLimit:
        s = SigninSettings.from_env(env)
        return cls(s.signups_per_day, redis_url=s.redis_url)

    def attempt(self, address: str) -> str | Refusal:
        """A ticket for one sign-up from `address`, or the Refusal to show."""
        taken = self.count.take(_key(address))
        return Refusal("signups", taken) if isinstance(taken, float) else taken

    def checked_nothing(self, address: str, ticket: str) -> None:
        self.count.give_back(_key(address), ticket)


class FailureLimitFromEnv:
    """This process's limits, built from the environment (`from_env`) on first use rather
    than at import, then kept: the variables are read once the app is configured, and
    Redis is connected only in the process that signs people in."""

    def __init__(self, env: Mapping[str, str] | None = None, kind: type = FailureLimit) -> None:
        self._env, self._kind = env, kind
        self._limit: Any = None
        self._lock = threading.Lock()

    def get(self) -> Any:
        if self._limit is None:
            with self._lock:
                if self._limit is None:
                    self._limit = self._kind.from_env(self._env)
        return self._limit

    def __getattr__(self, name: str) -> Any:
        return getattr(self.get(), name)
