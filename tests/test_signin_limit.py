"""The sign-in limits (tutor.access.signin_limit): failed sign-ins per (name, address) and per
name, taken before the password is checked in one atomic step; counted in memory or in
Redis shared by every worker, and what happens when Redis cannot be reached. Needs Redis at
127.0.0.1:6379 (each test counts under a namespace of its own, deleted afterwards)."""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from types import SimpleNamespace

import pytest
import redis

from tutor.access import sessions, signin_limit, usage
from tutor.access.signin_limit import (
    Attempt,
    FailureLimit,
    FailureLimitFromEnv,
    Refusal,
    SigninSettings,
    SignupLimit,
)
from tutor.settings import ConfigError
from tutor.web import auth_routes

REDIS_URL = "redis://127.0.0.1:6379/13"
CLOSED_PORT = "redis://127.0.0.1:1"


@pytest.fixture
def namespace():
    name = f"tutor-signin-test-{uuid.uuid4().hex}"
    yield name
    client = redis.Redis.from_url(REDIS_URL)
    for key in client.scan_iter(match=f"*{name}*"):
        client.delete(key)


def workers(namespace: str, count: int = 2, **options) -> list[FailureLimit]:
    """Several processes' limits on one Redis."""
    return [FailureLimit(redis_url=REDIS_URL, namespace=namespace, **options) for _ in range(count)]


def allowed(limit: FailureLimit, name: str = "ana", address: str = "1.2.3.4") -> Attempt:
    got = limit.attempt(name, address)
    assert isinstance(got, Attempt), got
    return got


def refused(limit: FailureLimit, name: str = "ana", address: str = "1.2.3.4") -> Refusal:
    got = limit.attempt(name, address)
    assert isinstance(got, Refusal), got
    return got


def test_workers_share_the_count(namespace):
    one, two = workers(namespace)
    for attempt in range(10):
        allowed((one, two)[attempt % 2])
    # The 11th try is refused on either worker, though each counted only five.
    assert refused(two).minutes == refused(one).minutes == 15 and refused(one).code == "throttled"
    # Another address, another name: not held back.
    allowed(two, "ana", "5.6.7.8")
    allowed(two, "bob", "1.2.3.4")


def test_a_success_on_one_worker_clears_the_addresss_count_for_both(namespace):
    one, two = workers(namespace)
    for _ in range(9):
        allowed(one)
    one.succeeded(allowed(two))  # the tenth try was the right password
    for _ in range(10):
        allowed(two)
    assert refused(one).minutes == 15


def test_the_count_stays_below_the_limit_without_holding_back(namespace):
    one, two = workers(namespace)
    for _ in range(9):
        allowed(one)
    allowed(two)
    assert refused(one).minutes == 15


def test_the_wait_counts_down_from_the_oldest_failure(namespace, monkeypatch):
    # The Redis count is stamped with the worker's time.time(); move that clock.
    offset = [0.0]
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() + offset[0])
    one, two = workers(namespace, limit=3)
    allowed(one)
    offset[0] = 60.0
    allowed(two)
    allowed(two)
    assert refused(one).minutes == 14
    offset[0] = 60 * 10 + 1
    assert refused(two).minutes == 5
    offset[0] = 60 * 14 + 59
    assert refused(two).minutes == 1
    offset[0] = 60 * 15  # the first failure leaves the window: one more try
    allowed(two)
    assert refused(one).minutes == 1  # now the second failure is the oldest


def test_a_short_window_lets_the_next_try_through_once_it_passes(namespace):
    one, two = workers(namespace, limit=2, window_s=1)
    allowed(one)
    allowed(two)
    assert refused(one).minutes == 1  # whole minutes, at least one
    time.sleep(1.1)
    allowed(two)


def test_redis_holds_neither_the_name_nor_the_address(namespace):
    (one,) = workers(namespace, count=1)
    allowed(one, "ana.secret", "203.0.113.77")
    client = redis.Redis.from_url(REDIS_URL)
    keys = sorted(key.decode() for key in client.scan_iter(match=f"*{namespace}*"))
    assert len(keys) == 2  # the (name, address) count and the name's own
    for key in keys:
        assert "ana.secret" not in key and "203.0.113.77" not in key
        # Each key goes with its window, so a flood of made-up names cannot fill Redis.
        assert 0 < client.ttl(key) <= 60 * 60
    assert 0 < client.ttl(next(k for k in keys if "-account:" not in k)) <= 15 * 60


def test_unreachable_redis_falls_back_to_this_process_count_with_one_warning(caplog):
    now = [1000.0]
    limit = FailureLimit(limit=3, window_s=900, clock=lambda: now[0], redis_url=CLOSED_PORT)
    with caplog.at_level(logging.WARNING, logger="tutor.access.signin_limit"):
        for _ in range(3):
            allowed(limit)
        assert refused(limit).minutes == 15  # still limited, never "no limit"
        allowed(limit, "bob")
        now[0] += 60 * 10 + 1
        assert refused(limit).minutes == 5
        now[0] += 60 * 5
        limit.succeeded(allowed(limit))
        for _ in range(3):
            allowed(limit)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "TUTOR_REDIS_URL" in warnings[0]


def test_a_hanging_redis_costs_one_timeout_now_and_then_not_one_per_sign_in(caplog, monkeypatch):
    monkeypatch.setattr(usage, "RETRY_AFTER_S", 0.5)
    hanging = socket.create_server(("127.0.0.1", 0))  # connects, never answers
    limit = FailureLimit(limit=3, redis_url=f"redis://127.0.0.1:{hanging.getsockname()[1]}")
    with caplog.at_level(logging.WARNING, logger="tutor.access.signin_limit"):
        started = time.perf_counter()
        for _ in range(3):
            allowed(limit)
        assert refused(limit).minutes == 15
        assert usage.REDIS_TIMEOUT_S <= time.perf_counter() - started < 3 * usage.REDIS_TIMEOUT_S
        time.sleep(0.5)
        started = time.perf_counter()
        assert refused(limit).minutes == 15  # Redis tried again (and waited for), then memory
        assert time.perf_counter() - started >= usage.REDIS_TIMEOUT_S
    hanging.close()
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1


class RedisThatStops:
    """A TCP relay to the test Redis that can be stopped: Redis going away mid-run."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.url = f"redis://127.0.0.1:{self.server.getsockname()[1]}/13"
        self.open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", 6379))
            self.open += [client, upstream]
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, target), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass

    def stop(self) -> None:
        self.server.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread (a close alone would not)
        self.server.close()
        for conn in self.open:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()


def test_failures_seen_before_redis_went_away_still_count(namespace, caplog):
    relay = RedisThatStops()
    limit = FailureLimit(limit=3, redis_url=relay.url, namespace=namespace)
    other_worker = FailureLimit(limit=3, redis_url=REDIS_URL, namespace=namespace)
    allowed(limit)
    allowed(other_worker)
    allowed(other_worker)
    assert refused(limit).minutes == 15  # three in Redis, one of them this worker's
    relay.stop()
    with caplog.at_level(logging.WARNING, logger="tutor.access.signin_limit"):
        allowed(limit)  # this worker's one: two more tries
        allowed(limit)
        assert refused(limit).minutes == 15
    assert ["TUTOR_REDIS_URL" in r.getMessage() for r in caplog.records] == [True]


def test_memory_mode_without_redis_url():
    limit = FailureLimit.from_env({})
    assert limit.redis_url is None
    for _ in range(9):
        allowed(limit)
    limit.succeeded(allowed(limit))
    assert limit.pair._memory == {}  # the address's failures for the name are forgotten
    assert [len(v) for v in limit.account._memory.values()] == [9]  # the success's own try given back


def test_memory_mode_forgets_the_oldest_names_in_a_flood(monkeypatch):
    monkeypatch.setattr(signin_limit, "MEMORY_KEYS_MAX", 50)
    limit = FailureLimit()
    for n in range(200):
        allowed(limit, f"made-up-{n}")
    assert len(limit.pair._memory) == 50 and len(limit.account._memory) == 50
    assert signin_limit._key("made-up-199", "1.2.3.4") in limit.pair._memory


def test_the_redis_url_is_read_and_checked_as_the_usage_limits_read_it():
    assert FailureLimit.from_env({"TUTOR_REDIS_URL": REDIS_URL}).redis_url == REDIS_URL
    with pytest.raises(ConfigError, match="TUTOR_REDIS_URL"):
        FailureLimit.from_env({"TUTOR_REDIS_URL": "127.0.0.1:6379"})


def test_the_settings_name_their_variables():
    assert SigninSettings.from_env({}) == SigninSettings()
    got = SigninSettings.from_env({"TUTOR_SIGNIN_FAILURES": "4", "TUTOR_SIGNIN_ACCOUNT_FAILURES": "30",
                                   "TUTOR_SIGNUPS_PER_DAY": "200"})
    assert (got.failures_per_address, got.failures_per_account, got.signups_per_day) == (4, 30, 200)
    limit = FailureLimit.from_env({"TUTOR_SIGNIN_FAILURES": "4", "TUTOR_SIGNIN_ACCOUNT_FAILURES": "30"})
    assert (limit.pair.limit, limit.account.limit, limit.account.window_s) == (4, 30, 3600)
    assert SignupLimit.from_env({"TUTOR_SIGNUPS_PER_DAY": "7"}).count.limit == 7
    for name in ("TUTOR_SIGNIN_FAILURES", "TUTOR_SIGNIN_ACCOUNT_FAILURES", "TUTOR_SIGNUPS_PER_DAY"):
        for wrong in ("0", "many"):
            with pytest.raises(ConfigError, match=name):
                SigninSettings.from_env({name: wrong})


def test_the_process_limit_is_built_from_the_environment_once_on_first_use(monkeypatch, namespace):
    assert isinstance(auth_routes.LIMIT, FailureLimitFromEnv) and isinstance(auth_routes.SIGNUPS, FailureLimitFromEnv)
    assert sessions.FailureLimit is FailureLimit
    monkeypatch.setenv("TUTOR_REDIS_URL", "not read yet")
    process = FailureLimitFromEnv()  # reads nothing yet
    monkeypatch.setenv("TUTOR_REDIS_URL", REDIS_URL)
    built = process.get()
    assert built is process.get() and built.redis_url == REDIS_URL
    monkeypatch.delenv("TUTOR_REDIS_URL")
    assert process.get() is built
    # Two processes built this way count together.
    other = FailureLimitFromEnv({"TUTOR_REDIS_URL": REDIS_URL})
    name = f"ana-{namespace}"  # a name of this test's own; the success below deletes its key
    for _ in range(9):
        allowed(process, name)
    other.succeeded(allowed(other, name))
    for _ in range(10):
        allowed(process, name)
    assert refused(other, name).minutes == 15
    redis.Redis.from_url(REDIS_URL).delete(*[k for k in redis.Redis.from_url(REDIS_URL).scan_iter()
                                             if k.decode().startswith("tutor-signin")])


# ------------------------------------------------------------ atomic, per account


def _in_parallel(count: int, attempt) -> list:
    """`attempt(i)` in `count` threads released at once."""
    start, results, lock = threading.Barrier(count), [], threading.Lock()

    def one(i: int) -> None:
        start.wait()
        got = attempt(i)
        with lock:
            results.append(got)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


@pytest.mark.parametrize("where", ["memory", "redis"])
def test_forty_parallel_tries_for_one_name_let_ten_through(where, namespace):
    limit = FailureLimit(redis_url=REDIS_URL if where == "redis" else None, namespace=namespace)
    results = _in_parallel(40, lambda _: limit.attempt("ana", "1.2.3.4"))
    assert sum(isinstance(r, Attempt) for r in results) == 10
    assert {r.code for r in results if isinstance(r, Refusal)} == {"throttled"}


@pytest.mark.parametrize("where", ["memory", "redis"])
def test_a_name_tried_from_many_addresses_is_locked_for_a_while(where, namespace):
    limit = FailureLimit(account_limit=15, redis_url=REDIS_URL if where == "redis" else None, namespace=namespace)
    results = _in_parallel(40, lambda i: limit.attempt("ana", f"203.0.113.{i}"))
    assert sum(isinstance(r, Attempt) for r in results) == 15
    locked = refused(limit, "ana", "198.51.100.1")  # the owner, from an address of their own
    assert locked.code == "account_locked" and locked.minutes == 60
    allowed(limit, "bob", "203.0.113.1")  # other names are not held back


def test_a_refused_try_from_one_address_adds_nothing_to_the_names_count():
    limit = FailureLimit(limit=3, account_limit=5)
    for _ in range(3):
        allowed(limit)
    for _ in range(20):
        assert refused(limit).code == "throttled"
    allowed(limit, "ana", "5.6.7.8")
    allowed(limit, "ana", "5.6.7.9")
    assert refused(limit, "ana", "5.6.7.10").code == "account_locked"


def test_successes_give_their_try_back_so_a_busy_owner_is_never_locked():
    limit = FailureLimit(account_limit=5)
    for _ in range(50):
        limit.succeeded(allowed(limit))
    for i in range(4):
        allowed(limit, "ana", f"10.0.0.{i}")  # others' failures stay counted after a success
    limit.succeeded(allowed(limit))
    allowed(limit, "ana", "10.0.1.1")
    assert refused(limit, "ana", "10.0.1.2").code == "account_locked"


def test_a_try_that_checked_nothing_is_given_back():
    limit = FailureLimit(limit=2)
    for _ in range(5):
        limit.checked_nothing(allowed(limit))
    allowed(limit)
    allowed(limit)
    assert refused(limit).code == "throttled"


def test_a_worker_whose_clock_runs_behind_never_shows_a_wait_longer_than_the_day(namespace, monkeypatch):
    """Two workers share the count in Redis. The second's clock is 30 s behind the first's (or
    it read the time just before a busy pause, while the first counted): the wait it shows is
    still at most the window, never "1441 minutes" for a day."""
    first = SignupLimit(per_day=1, redis_url=REDIS_URL, namespace=namespace)
    assert isinstance(first.attempt("1.2.3.4"), str)
    monkeypatch.setattr(signin_limit, "time", SimpleNamespace(time=lambda: time.time() - 30, monotonic=time.monotonic))
    second = SignupLimit(per_day=1, redis_url=REDIS_URL, namespace=namespace)
    wait = second.attempt("1.2.3.4")
    assert isinstance(wait, Refusal) and 23 * 3600 < wait.wait_s <= 24 * 3600 and wait.minutes <= 24 * 60


@pytest.mark.parametrize("where", ["memory", "redis"])
def test_sign_ups_per_address_and_day(where, namespace):
    limit = SignupLimit(per_day=5, redis_url=REDIS_URL if where == "redis" else None, namespace=namespace)
    results = _in_parallel(20, lambda _: limit.attempt("1.2.3.4"))
    assert sum(isinstance(r, str) for r in results) == 5
    wait = next(r for r in results if isinstance(r, Refusal))
    assert wait.code == "signups" and 23 * 60 < wait.minutes <= 24 * 60
    ticket = limit.attempt("5.6.7.8")
    limit.checked_nothing("5.6.7.8", ticket)  # the database was down: given back
    for _ in range(5):
        assert isinstance(limit.attempt("5.6.7.8"), str)
    assert isinstance(limit.attempt("5.6.7.8"), Refusal)
