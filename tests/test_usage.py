"""Usage limits per learner (tutor.access.usage), counted in memory and in a real Redis."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import socket
import time

import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st

from tutor.access import usage
from tutor.access.usage import LimitReached, UsageLimits, UsageSettings, in_words
from tutor.settings import ConfigError

# A database of its own per test process, emptied by each test: with the core tier in two
# processes (pytest-xdist), one process's flush must not wipe the counts of a test the other
# is running (the learner keys are the same in both). Databases 12 and 14 serve no other test.
_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
REDIS_URL = f"redis://127.0.0.1:6379/{(12, 14)[_WORKER % 2]}"


def _flush_redis() -> None:
    redis.Redis.from_url(REDIS_URL).flushdb()


@pytest.fixture(params=["memory", "redis"])
def make(request):
    """Builds UsageLimits over the parametrised store (every rule runs against both)."""
    remote = request.param == "redis"
    if remote:
        _flush_redis()

    def build(**overrides) -> UsageLimits:
        return UsageLimits(UsageSettings(redis_url=REDIS_URL if remote else None, **overrides))

    yield build
    if remote:
        _flush_redis()


def run(coro):
    return asyncio.run(coro)


async def _refusal(coro) -> LimitReached:
    with pytest.raises(LimitReached) as caught:
        await coro
    return caught.value


def _seconds(message: str) -> float:
    """The wait a refusal names, in seconds ("in 20 s", "in 3 h 12 min", "in 4 min")."""
    m = re.search(r"in (?:(\d+) h)? ?(?:(\d+) min)? ?(?:(\d+) s)?(?:[.;]| —)", message)
    assert m and any(m.groups()), message
    h, mins, s = (int(g or 0) for g in m.groups())
    return h * 3600 + mins * 60 + s


# ------------------------------------------------------------------------ settings


def test_settings_have_working_defaults_and_zero_means_no_limit():
    s = UsageSettings.from_env({})
    assert (s.turns_per_minute, s.daily_tokens, s.conversations_per_day) == (30, 200_000, 20)
    assert s.model_calls_in_flight is None  # not set: what the model backend takes (tutor.llm.gate)
    assert UsageSettings.from_env({"TUTOR_MODEL_CALLS_IN_FLIGHT": "0"}).model_calls_in_flight == 0
    assert s.redis_url is None
    off = UsageSettings.from_env({"TUTOR_DAILY_TOKENS": "0", "TUTOR_TURNS_PER_MINUTE": "0",
                                  "TUTOR_REDIS_URL": "redis://127.0.0.1:6379"})
    assert off.daily_tokens == 0 and off.turns_per_minute == 0 and off.redis_url == "redis://127.0.0.1:6379"


@pytest.mark.parametrize("name, raw", [
    ("TUTOR_TURNS_PER_MINUTE", "many"), ("TUTOR_DAILY_TOKENS", "-5"),
    ("TUTOR_CONVERSATIONS_PER_DAY", "2.5"), ("TUTOR_MODEL_CALLS_IN_FLIGHT", "lots"),
])
def test_bad_settings_name_the_variable_and_a_value_that_works(name, raw):
    with pytest.raises(ConfigError) as caught:
        UsageSettings.from_env({name: raw})
    assert re.search(rf"{name}=\d+", str(caught.value)), str(caught.value)


def test_a_redis_url_that_is_not_one_is_refused_with_an_example():
    with pytest.raises(ConfigError, match=r"TUTOR_REDIS_URL=redis://127\.0\.0\.1:6379"):
        UsageSettings.from_env({"TUTOR_REDIS_URL": "127.0.0.1:6379"})


@pytest.mark.parametrize("seconds, words", [
    (0.2, "1 s"), (20, "20 s"), (59.5, "1 min"), (61, "2 min"), (3600, "1 h"), (3 * 3600 + 11 * 60 + 5, "3 h 12 min"),
])
def test_waits_read_as_relative_times(seconds, words):
    assert in_words(seconds) == words


# --------------------------------------------------------------------------- turns


def test_turns_per_minute_refuse_the_next_turn_calmly_and_say_when(make):
    limits = make(turns_per_minute=3)

    async def go():
        for _ in range(3):
            await limits.admit_turn("ada")
        refused = await _refusal(limits.admit_turn("ada"))
        await limits.admit_turn("grace")  # another learner is not held back
        return refused

    refused = run(go())
    assert refused.rule == "turns"
    assert refused.message.startswith("You're sending messages faster than the tutor can keep up — you can send again in")
    assert 1 <= _seconds(refused.message) <= 60
    assert 0 < refused.retry_after_s <= 60


@settings(max_examples=15, deadline=None)
async def admitted(limits: UsageLimits, learner: str = "burst") -> bool:
    """Whether one turn of `learner` gets through."""
    try:
        await limits.admit_turn(learner)
    except LimitReached:
        return False
    return True


@given(limit=st.integers(1, 20), burst=st.integers(1, 100))
def test_a_burst_of_concurrent_turns_never_lets_more_than_the_limit_through(limit, burst):
    limits = UsageLimits(UsageSettings(turns_per_minute=limit))

    async def go():
        return await asyncio.gather(*(admitted(limits) for _ in range(burst)))

    assert sum(run(go())) == min(limit, burst)


def test_a_burst_across_two_workers_sharing_redis_never_passes_the_limit():
    _flush_redis()
    workers = [UsageLimits(UsageSettings(turns_per_minute=12, redis_url=REDIS_URL)) for _ in range(2)]

    async def go():
        return await asyncio.gather(*(admitted(workers[i % 2]) for i in range(100)))

    try:
        assert sum(run(go())) == 12
    finally:
        _flush_redis()


# -------------------------------------------------------------------------- tokens


def test_daily_tokens_once_spent_refuse_new_turns_until_the_window_resets(make):
    limits = make(daily_tokens=1000, turns_per_minute=0)

    async def go():
        await limits.spend_tokens("ada", 600)
        await limits.admit_turn("ada")  # 400 left: the turn goes ahead
        await limits.spend_tokens("ada", 700)  # past the limit: still counted
        left = await limits.tokens_left("ada")
        refused = await _refusal(limits.admit_turn("ada"))
        await limits.admit_turn("grace")
        return left, refused

    left, refused = run(go())
    assert left == 0
    assert refused.rule == "tokens"
    assert "today's limit" in refused.message and "carry on in" in refused.message
    assert 23 * 3600 < _seconds(refused.message) <= 24 * 3600


def test_no_token_limit_when_daily_tokens_is_zero(make):
    limits = make(daily_tokens=0)

    async def go():
        await limits.spend_tokens("ada", 10**9)
        await limits.admit_turn("ada")
        return await limits.tokens_left("ada")

    assert run(go()) is None


# ------------------------------------------------------------------- conversations


def test_start_over_beyond_the_days_allowance_is_refused_with_a_clear_message(make):
    limits = make(conversations_per_day=2)

    async def go():
        await limits.admit_conversation("ada")
        await limits.admit_conversation("ada")
        refused = await _refusal(limits.admit_conversation("ada"))
        await limits.admit_conversation("ada", refusable=False)  # a module's first conversation: never refused
        await limits.admit_conversation("grace")
        return refused

    refused = run(go())
    assert refused.rule == "conversations"
    assert "started 2 new conversations today" in refused.message and "start over again in" in refused.message


# -------------------------------------------------------------------------- faults


def test_counts_are_shared_by_every_worker_on_the_same_redis():
    _flush_redis()
    one, two = (UsageLimits(UsageSettings(turns_per_minute=2, redis_url=REDIS_URL)) for _ in range(2))

    async def go():
        await one.admit_turn("ada")
        await two.admit_turn("ada")
        return await _refusal(one.admit_turn("ada"))

    try:
        assert run(go()).rule == "turns"
    finally:
        _flush_redis()


def test_redis_down_lets_learners_through_with_one_warning(caplog):
    limits = UsageLimits(UsageSettings(turns_per_minute=1, redis_url="redis://127.0.0.1:9/0"))

    async def go():
        for _ in range(3):
            await limits.admit_turn("ada")
            await limits.spend_tokens("ada", 10)

    with caplog.at_level(logging.WARNING, logger="tutor.access.usage"):
        run(go())
    warnings = [r.getMessage() for r in caplog.records if r.name == "tutor.access.usage"]
    assert len(warnings) == 1 and "TUTOR_REDIS_URL" in warnings[0]


def test_a_redis_that_hangs_lets_a_turn_through_after_the_timeout_not_never():
    """A Redis that accepts connections and never answers: a count gives up after
    REDIS_TIMEOUT_S (redis-py alone would wait forever, holding the database thread that
    admits the turn), the learner is let through, and Redis is left alone for a while:
    the next turns do not wait again."""
    hanging = socket.create_server(("127.0.0.1", 0))  # connects, never answers
    try:
        limits = UsageLimits(UsageSettings(turns_per_minute=1,
                                           redis_url=f"redis://127.0.0.1:{hanging.getsockname()[1]}/0"))
        started = time.monotonic()
        limits.admit_turn_now("ada")  # as the accept trip calls it
        assert time.monotonic() - started < 4 * usage.REDIS_TIMEOUT_S
        started = time.monotonic()
        for _ in range(3):
            limits.admit_turn_now("ada")
            run(limits.spend_tokens("ada", 10))
        assert time.monotonic() - started < usage.REDIS_TIMEOUT_S / 2
    finally:
        hanging.close()


# ------------------------------------------------------- anonymous: per address too


def test_a_new_browser_key_from_the_same_address_gets_no_fresh_turns(make):
    limits = make(turns_per_minute=2, daily_tokens=0, conversations_per_day=0)

    async def scenario():
        limits.seen_at("key-1", "203.0.113.5")
        await limits.admit_turn("key-1")
        await limits.admit_turn("key-1")
        limits.seen_at("key-2", "203.0.113.5")  # "Start fresh", or a private window: a new key
        refused = await _refusal(limits.admit_turn("key-2"))
        limits.seen_at("key-3", "198.51.100.9")  # another address is not held back
        await limits.admit_turn("key-3")
        await limits.admit_turn("key-4")  # a key whose address is unknown (accounts): its own count
        return refused

    refused = run(scenario())
    assert refused.rule == "turns" and 0 < _seconds(refused.message) <= 60


def test_tokens_and_new_conversations_count_per_address_too(make):
    limits = make(turns_per_minute=0, daily_tokens=1000, conversations_per_day=2)

    async def scenario():
        limits.seen_at("key-1", "203.0.113.5")
        await limits.spend_tokens("key-1", 1000)
        await limits.admit_conversation("key-1", refusable=False)
        await limits.admit_conversation("key-1", refusable=False)
        limits.seen_at("key-2", "203.0.113.5")
        tokens = await _refusal(limits.admit_turn("key-2"))
        opening = await _refusal(limits.check_tokens("key-2"))
        limits.seen_at("key-3", "198.51.100.9")
        await limits.admit_turn("key-3")
        await limits.admit_conversation("key-3")
        limits.seen_at("key-3", "203.0.113.5")  # the same browser, moved to the first address
        moved = await _refusal(limits.admit_turn("key-3"))
        return tokens, opening, moved

    tokens, opening, moved = run(scenario())
    assert tokens.rule == opening.rule == moved.rule == "tokens"


def test_a_new_browser_key_gets_no_fresh_conversations_from_the_same_address(make):
    limits = make(turns_per_minute=0, daily_tokens=0, conversations_per_day=2)

    async def scenario():
        limits.seen_at("key-1", "203.0.113.5")
        await limits.admit_conversation("key-1")
        await limits.admit_conversation("key-1")
        limits.seen_at("key-2", "203.0.113.5")
        return await _refusal(limits.admit_conversation("key-2"))

    assert run(scenario()).rule == "conversations"


def test_start_over_is_refused_once_todays_tokens_are_spent(make):
    limits = make(turns_per_minute=0, daily_tokens=500, conversations_per_day=20)

    async def scenario():
        await limits.spend_tokens("ada", 500)
        await limits.admit_conversation("ada", refusable=False)  # a module's first: never refused
        return await _refusal(limits.admit_conversation("ada"))

    assert run(scenario()).rule == "tokens"


def test_the_addresses_kept_are_bounded(monkeypatch):
    monkeypatch.setattr(usage, "PLACES_MAX", 3)
    limits = UsageLimits(UsageSettings())
    for n in range(10):
        limits.seen_at(f"key-{n}", f"203.0.113.{n}")
    limits.seen_at("key-7", "203.0.113.77")  # seen again: the most recent
    assert list(limits._places) == ["key-8", "key-9", "key-7"]


def test_an_operator_may_give_one_address_several_learners_allowance(make):
    limits = make(turns_per_minute=2, daily_tokens=0, conversations_per_day=0, learners_per_address=2)

    async def scenario():
        for key in ("kiosk-1", "kiosk-2"):  # two kiosks behind one address: two learners' turns
            limits.seen_at(key, "203.0.113.5")
            await limits.admit_turn(key)
            await limits.admit_turn(key)
        limits.seen_at("kiosk-3", "203.0.113.5")
        return await _refusal(limits.admit_turn("kiosk-3"))

    assert run(scenario()).rule == "turns"
    assert UsageSettings.from_env({"TUTOR_ANONYMOUS_LEARNERS_PER_ADDRESS": "30"}).learners_per_address == 30
    with pytest.raises(ConfigError, match="TUTOR_ANONYMOUS_LEARNERS_PER_ADDRESS"):
        UsageSettings.from_env({"TUTOR_ANONYMOUS_LEARNERS_PER_ADDRESS": "0"})
