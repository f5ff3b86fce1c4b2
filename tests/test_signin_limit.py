"""The failed sign-in limit counted in Redis, shared by every worker, and what happens when
Redis cannot be reached. Needs Redis at 127.0.0.1:6379 (each test counts under a namespace
of its own, deleted afterwards)."""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid

import pytest
import redis

from tutor import auth_routes, sessions, signin_limit, usage
from tutor.settings import ConfigError
from tutor.signin_limit import FailureLimit, FailureLimitFromEnv

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


def test_workers_share_the_count(namespace):
    one, two = workers(namespace)
    for attempt in range(10):
        worker = (one, two)[attempt % 2]
        assert worker.wait_minutes("ana", "1.2.3.4") == 0
        worker.failed("ana", "1.2.3.4")
    # The 11th try is refused on either worker, though each saw only five failures.
    assert two.wait_minutes("ana", "1.2.3.4") == 15
    assert one.wait_minutes("ana", "1.2.3.4") == 15
    # Another address, another name: not held back.
    assert two.wait_minutes("ana", "5.6.7.8") == 0 and two.wait_minutes("bob", "1.2.3.4") == 0
    # A success on one worker clears the count for both.
    one.succeeded("ana", "1.2.3.4")
    assert two.wait_minutes("ana", "1.2.3.4") == 0 and one.wait_minutes("ana", "1.2.3.4") == 0


def test_the_count_stays_below_the_limit_without_holding_back(namespace):
    one, two = workers(namespace)
    for _ in range(9):
        one.failed("ana", "1.2.3.4")
    assert two.wait_minutes("ana", "1.2.3.4") == 0
    two.failed("ana", "1.2.3.4")
    assert one.wait_minutes("ana", "1.2.3.4") == 15


def test_the_wait_counts_down_from_the_oldest_failure(namespace, monkeypatch):
    # The `limits` library stamps Redis entries with time.time(); move that clock.
    offset = [0.0]
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() + offset[0])
    one, two = workers(namespace, limit=3)
    one.failed("ana", "1.2.3.4")
    offset[0] = 60.0
    two.failed("ana", "1.2.3.4")
    two.failed("ana", "1.2.3.4")
    assert one.wait_minutes("ana", "1.2.3.4") == 14
    offset[0] = 60 * 10 + 1
    assert two.wait_minutes("ana", "1.2.3.4") == 5
    offset[0] = 60 * 14 + 59
    assert two.wait_minutes("ana", "1.2.3.4") == 1
    offset[0] = 60 * 15  # the first failure leaves the window: one more try
    assert two.wait_minutes("ana", "1.2.3.4") == 0
    one.failed("ana", "1.2.3.4")
    assert one.wait_minutes("ana", "1.2.3.4") == 1  # now the second failure is the oldest


def test_a_short_window_lets_the_next_try_through_once_it_passes(namespace):
    one, two = workers(namespace, limit=2, window_s=1)
    one.failed("ana", "1.2.3.4")
    two.failed("ana", "1.2.3.4")
    assert one.wait_minutes("ana", "1.2.3.4") == 1  # whole minutes, at least one
    time.sleep(1.1)
    assert two.wait_minutes("ana", "1.2.3.4") == 0


def test_redis_holds_neither_the_name_nor_the_address(namespace):
    (one,) = workers(namespace, count=1)
    one.failed("ana.secret", "203.0.113.77")
    keys = [key.decode() for key in redis.Redis.from_url(REDIS_URL).scan_iter(match=f"*{namespace}*")]
    assert len(keys) == 1
    assert "ana.secret" not in keys[0] and "203.0.113.77" not in keys[0]
    # Each key goes with its window, so a flood of made-up names cannot fill Redis.
    assert 0 < redis.Redis.from_url(REDIS_URL).ttl(keys[0]) <= 15 * 60


def test_unreachable_redis_falls_back_to_this_process_count_with_one_warning(caplog):
    now = [1000.0]
    limit = FailureLimit(limit=3, window_s=900, clock=lambda: now[0], redis_url=CLOSED_PORT)
    with caplog.at_level(logging.WARNING, logger="tutor.signin_limit"):
        for _ in range(3):
            assert limit.wait_minutes("ana", "1.2.3.4") == 0
            limit.failed("ana", "1.2.3.4")
        assert limit.wait_minutes("ana", "1.2.3.4") == 15  # still limited, never "no limit"
        assert limit.wait_minutes("bob", "1.2.3.4") == 0
        now[0] += 60 * 10 + 1
        assert limit.wait_minutes("ana", "1.2.3.4") == 5
        limit.succeeded("ana", "1.2.3.4")
        assert limit.wait_minutes("ana", "1.2.3.4") == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "TUTOR_REDIS_URL" in warnings[0]


def test_a_hanging_redis_costs_one_timeout_now_and_then_not_one_per_sign_in(caplog, monkeypatch):
    monkeypatch.setattr(usage, "RETRY_AFTER_S", 0.5)
    hanging = socket.create_server(("127.0.0.1", 0))  # connects, never answers
    limit = FailureLimit(limit=3, redis_url=f"redis://127.0.0.1:{hanging.getsockname()[1]}")
    with caplog.at_level(logging.WARNING, logger="tutor.signin_limit"):
        started = time.perf_counter()
        for _ in range(3):
            assert limit.wait_minutes("ana", "1.2.3.4") == 0
            limit.failed("ana", "1.2.3.4")
        assert limit.wait_minutes("ana", "1.2.3.4") == 15
        assert usage.REDIS_TIMEOUT_S <= time.perf_counter() - started < 3 * usage.REDIS_TIMEOUT_S
        time.sleep(0.5)
        started = time.perf_counter()
        assert limit.wait_minutes("ana", "1.2.3.4") == 15  # Redis tried again (and waited for), then memory
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
    limit.failed("ana", "1.2.3.4")
    other_worker.failed("ana", "1.2.3.4")
    assert limit.wait_minutes("ana", "1.2.3.4") == 0
    other_worker.failed("ana", "1.2.3.4")
    assert limit.wait_minutes("ana", "1.2.3.4") == 15  # three in Redis, one of them this worker's
    relay.stop()
    with caplog.at_level(logging.WARNING, logger="tutor.signin_limit"):
        assert limit.wait_minutes("ana", "1.2.3.4") == 0  # this worker's one: two more tries
        limit.failed("ana", "1.2.3.4")
        assert limit.wait_minutes("ana", "1.2.3.4") == 0
        limit.failed("ana", "1.2.3.4")
        assert limit.wait_minutes("ana", "1.2.3.4") == 15
    assert ["TUTOR_REDIS_URL" in r.getMessage() for r in caplog.records] == [True]


def test_memory_mode_without_redis_url():
    limit = FailureLimit.from_env({})
    assert limit.redis_url is None
    for _ in range(10):
        limit.failed("ana", "1.2.3.4")
    assert limit.wait_minutes("ana", "1.2.3.4") == 15
    limit.succeeded("ana", "1.2.3.4")
    assert limit._failures == {}


def test_memory_mode_forgets_the_oldest_names_in_a_flood(monkeypatch):
    monkeypatch.setattr(signin_limit, "MEMORY_KEYS_MAX", 50)
    limit = FailureLimit()
    for n in range(200):
        limit.failed(f"made-up-{n}", "1.2.3.4")
    assert len(limit._failures) == 50 and ("made-up-199", "1.2.3.4") in limit._failures


def test_the_redis_url_is_read_and_checked_as_the_usage_limits_read_it():
    assert FailureLimit.from_env({"TUTOR_REDIS_URL": REDIS_URL}).redis_url == REDIS_URL
    with pytest.raises(ConfigError, match="TUTOR_REDIS_URL"):
        FailureLimit.from_env({"TUTOR_REDIS_URL": "127.0.0.1:6379"})


def test_the_process_limit_is_built_from_the_environment_once_on_first_use(monkeypatch, namespace):
    assert isinstance(auth_routes.LIMIT, FailureLimitFromEnv)
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
    for _ in range(10):
        process.failed(name, "1.2.3.4")
    assert other.wait_minutes(name, "1.2.3.4") == 15
    other.succeeded(name, "1.2.3.4")
    assert process.wait_minutes(name, "1.2.3.4") == 0
