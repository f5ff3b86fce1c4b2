"""Usage limits per learner: turns per minute, model tokens per day, new conversations
per day — and the settings of the process-wide cap on model calls (tutor.llm.gate).

One place for each rule, counted with the `limits` library: in this process's memory, or
in Redis when `TUTOR_REDIS_URL` is set, so every worker counts against the same numbers.
Limits are per learner (their key, hashed), never per conversation: starting over does
not give a learner a fresh token budget. In anonymous mode a learner is only a key their
browser made, so the web layer also tells where each key was last seen (`seen_at`): every
rule then counts per address too, and a new key from the same address in the same window
gets no fresh allowance.

- turns: a moving window of one minute, checked (and counted) when a learner message or
  form is accepted, before it is stored and before any model call;
- tokens: a daily window counting each model call's tokens_in + tokens_out (as in the
  audit rows; the built-in tutor makes no model calls and spends none); once spent, new
  turns are refused until the window resets, and so are "start over" and a conversation's
  opening turn (`check_tokens`), which call the model too;
- conversations: a moving window of a day; "start over" beyond it is refused (a module's
  first conversation is always allowed, and counted).

A refusal raises `LimitReached` with a calm message for the learner that says when they
can go on. A store that cannot be reached (Redis down) lets the learner through and logs
one warning: the limits protect the model bill, not the lesson.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from limits import RateLimitItemPerDay, RateLimitItemPerMinute
from limits.storage import MemoryStorage, storage_from_string
from limits.strategies import FixedWindowRateLimiter, MovingWindowRateLimiter

from tutor.i18n import N_, Phrase
from tutor.settings import ConfigError, EnvReader

__all__ = ["LimitReached", "UsageLimits", "UsageSettings", "in_words"]

log = logging.getLogger(__name__)

WARN_EVERY_S = 30.0  # one warning per this many seconds while the counting store is down
PLACES_MAX = 100_000  # anonymous learners whose address is kept (the oldest go first)


@dataclass(frozen=True)
class UsageSettings:
    turns_per_minute: int = 30  # 0: no limit (README, "Limits": why 30)
    daily_tokens: int = 200_000  # 0: no limit
    conversations_per_day: int = 20  # 0: no limit
    # Anonymous mode: how many learners' allowance one address has (a new browser key from
    # the same address shares it). 1: none more than one learner's; raise it for a room of
    # kiosks behind one address.
    learners_per_address: int = 1
    # Per process. None (not set): what the backend takes (tutor.llm.gate.ModelGate.for_backend:
    # a llama.cpp server's slots; no cap for hosted APIs, whose limit is requests per minute).
    model_calls_in_flight: int | None = None  # 0: no cap
    redis_url: str | None = None  # None: counted in this process's memory

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> UsageSettings:
        env = os.environ if env is None else env
        get = EnvReader(env)
        redis_url = get.text("TUTOR_REDIS_URL")
        if redis_url is not None and not redis_url.startswith(("redis://", "rediss://", "unix://")):
            raise ConfigError(
                f"TUTOR_REDIS_URL={redis_url!r} is not a Redis URL: set e.g. TUTOR_REDIS_URL=redis://127.0.0.1:6379"
            )
        return cls(
            turns_per_minute=get.integer("TUTOR_TURNS_PER_MINUTE", cls.turns_per_minute, low=0),
            daily_tokens=get.integer("TUTOR_DAILY_TOKENS", cls.daily_tokens, low=0),
            conversations_per_day=get.integer("TUTOR_CONVERSATIONS_PER_DAY", cls.conversations_per_day, low=0),
            learners_per_address=get.integer("TUTOR_ANONYMOUS_LEARNERS_PER_ADDRESS", cls.learners_per_address,
                                             low=1),
            model_calls_in_flight=get.integer("TUTOR_MODEL_CALLS_IN_FLIGHT", cls.model_calls_in_flight, low=0),
            redis_url=redis_url,
        )


class LimitReached(Exception):
    """A learner's turn or new conversation refused by a limit; `message` is for them."""

    def __init__(self, rule: str, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.rule = rule  # turns | tokens | conversations
        self.message = message
        self.retry_after_s = retry_after_s


def in_words(seconds: float) -> Phrase:
    """A wait as a learner reads it: "20 s", "4 min", "3 h 12 min" (a Phrase: the page
    shows it in the module's language)."""
    s = max(1, math.ceil(seconds))
    if s < 60:
        return Phrase("{seconds} s", seconds=s)
    minutes = math.ceil(s / 60)
    if minutes < 60:
        return Phrase("{minutes} min", minutes=minutes)
    hours, minutes = divmod(minutes, 60)
    return Phrase("{hours} h", hours=hours) if minutes == 0 else \
        Phrase("{hours} h {minutes} min", hours=hours, minutes=minutes)


# Raised as Phrases: the chat page (or the start page) shows them in its language.
TURNS_TEXT = N_("You're sending messages faster than the tutor can keep up — you can send again in {wait}.")
TOKENS_TEXT = N_("You've reached today's limit for the tutor. You can carry on in {wait} — everything so far is saved.")
CONVERSATIONS_TEXT = N_(
    "You've started {count} new conversations today, the most for one day. You can start over again in {wait}; "
    "until then you can carry on with the conversation you have."
)


class UsageLimits:
    """The three per-learner rules over one counting store (memory or Redis).

    Calls to Redis run in a worker thread, so the event loop never waits on the network;
    the in-memory store is called directly (its operations take microseconds)."""

    def __init__(self, settings: UsageSettings | None = None, *, clock=time.time) -> None:
        self.settings = settings or UsageSettings()
        self.clock = clock
        self._storage = redis_storage(self.settings.redis_url) if self.settings.redis_url else _Memory()
        self._remote = self.settings.redis_url is not None
        self._moving = MovingWindowRateLimiter(self._storage)
        self._fixed = FixedWindowRateLimiter(self._storage)
        s = self.settings
        self._turns = RateLimitItemPerMinute(s.turns_per_minute, namespace="tutor-turns") if s.turns_per_minute else None
        self._tokens = RateLimitItemPerDay(s.daily_tokens, namespace="tutor-tokens") if s.daily_tokens else None
        self._conversations = (RateLimitItemPerDay(s.conversations_per_day, namespace="tutor-conversations")
                               if s.conversations_per_day else None)
        # Anonymous mode, per address: as many learners' allowance as TUTOR_ANONYMOUS_LEARNERS_PER_ADDRESS.
        n = s.learners_per_address
        self._address_turns = (RateLimitItemPerMinute(s.turns_per_minute * n, namespace="tutor-turns-address")
                               if s.turns_per_minute else None)
        self._address_tokens = (RateLimitItemPerDay(s.daily_tokens * n, namespace="tutor-tokens-address")
                                if s.daily_tokens else None)
        self._address_conversations = (
            RateLimitItemPerDay(s.conversations_per_day * n, namespace="tutor-conversations-address")
            if s.conversations_per_day else None)
        self._outage = RedisOutage(log, "usage limits not counted")
        self._places: dict[str, str] = {}  # anonymous learner key -> the address it was last seen at
        self._places_lock = threading.Lock()

    def seen_at(self, learner_key: str, address: str) -> None:
        """Anonymous mode: this learner's browser is at `address`; from now on every rule
        counts for the address as well as for the key (the web layer calls this at each
        page load and send, in the process that then admits the turn)."""
        if not learner_key or not address:
            return
        with self._places_lock:
            self._places.pop(learner_key, None)  # most recent last, so the oldest go first
            self._places[learner_key] = address
            if len(self._places) > PLACES_MAX:
                del self._places[next(iter(self._places))]

    def _counts(self, learner_key: str, item: Any, address_item: Any) -> list[tuple[Any, str]]:
        """The counts a learner's use goes to: theirs, and their address's when known."""
        address = self._places.get(learner_key)
        counts = [(item, hashed_key(learner_key))]
        return counts + [(address_item, hashed_key("address:" + address))] if address else counts

    # --------------------------------------------------------------------- rules

    async def admit_turn(self, learner_key: str) -> None:
        """Count one learner turn, or raise LimitReached (nothing counted) when the learner
        has spent today's tokens or sent too many turns in the last minute."""
        if self._remote:
            await asyncio.to_thread(self.admit_turn_now, learner_key)
        else:
            self.admit_turn_now(learner_key)

    def admit_turn_now(self, learner_key: str) -> None:
        """admit_turn in the calling thread: for the database call that stores the learner's
        message (tutor.turns.conversations.accept), which admits the turn inside its transaction —
        after finding a resend already stored (never counted, never refused) and before
        storing anything (a refused message is not stored)."""
        self.check_tokens_now(learner_key)
        if self._turns is None:
            return
        for item, who in self._counts(learner_key, self._turns, self._address_turns):
            if not self._call(self._moving.hit, item, who):
                wait = self._wait(self._call(self._moving.get_window_stats, item, who))
                raise LimitReached("turns", Phrase(TURNS_TEXT, wait=in_words(wait)), wait)

    async def check_tokens(self, learner_key: str) -> None:
        """Raise LimitReached when the learner (or, anonymous, their address) has spent
        today's tokens: before any model call a learner causes outside a turn (an opening)."""
        if self._remote:
            await asyncio.to_thread(self.check_tokens_now, learner_key)
        else:
            self.check_tokens_now(learner_key)

    def check_tokens_now(self, learner_key: str) -> None:
        if self._tokens is None:
            return
        for item, who in self._counts(learner_key, self._tokens, self._address_tokens):
            if not self._call(self._fixed.test, item, who):
                wait = self._wait(self._call(self._fixed.get_window_stats, item, who))
                raise LimitReached("tokens", Phrase(TOKENS_TEXT, wait=in_words(wait)), wait)

    async def spend_tokens(self, learner_key: str, tokens: int) -> None:
        """Count model tokens against the learner's day (past the limit too: the next turn
        is refused)."""
        if self._tokens is None or tokens <= 0:
            return
        for item, who in self._counts(learner_key, self._tokens, self._address_tokens):
            await self._run(self._fixed.hit, item, who, cost=int(tokens), default=True)

    async def admit_conversation(self, learner_key: str, *, refusable: bool = True) -> None:
        """Count a new conversation; when `refusable` (start over), raise LimitReached
        instead once the day's allowance is used — or today's tokens, which its opening
        turn would spend."""
        if refusable:
            await self.check_tokens(learner_key)
        if self._conversations is None:
            return
        for item, who in self._counts(learner_key, self._conversations, self._address_conversations):
            if await self._run(self._moving.hit, item, who) or not refusable:
                continue
            reset = await self._run(self._moving.get_window_stats, item, who)
            wait = self._wait(reset)
            text = Phrase(CONVERSATIONS_TEXT, count=item.amount, wait=in_words(wait))
            raise LimitReached("conversations", text, wait)

    async def tokens_left(self, learner_key: str) -> int | None:
        """Tokens the learner may still spend today (None: no limit)."""
        if self._tokens is None:
            return None
        stats = await self._run(self._fixed.get_window_stats, self._tokens, hashed_key(learner_key))
        return stats.remaining if stats is not None else None

    def reset(self) -> None:
        """Forget every count (tests)."""
        self._storage.reset()

    # ----------------------------------------------------------------- internals

    def _wait(self, stats: Any) -> float:
        if stats is None:
            return 60.0
        return max(1.0, stats.reset_time - self.clock())

    async def _run(self, fn, *args: Any, default: Any = None, **kwargs: Any) -> Any:
        """One call to the counting store, off the event loop when it is Redis."""
        if self._remote:
            return await asyncio.to_thread(self._call, fn, *args, default=default, **kwargs)
        return self._call(fn, *args, default=default, **kwargs)

    def _call(self, fn, *args: Any, default: Any = None, **kwargs: Any) -> Any:
        """One call to the counting store; if it cannot be reached (or failed a moment ago:
        RedisOutage), let the learner through."""
        if self._outage.ongoing():
            return True if fn.__name__ in ("hit", "test") else default
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # Redis down or refusing: the lesson goes on, uncounted
            self._outage.began(exc)
            return True if fn.__name__ in ("hit", "test") else default


class _Memory(MemoryStorage):
    """limits' in-process storage, sweeping expired entries every SWEEP_S instead of 10 ms
    after each hit. Its sweep walks every key (a day's token counters stay for a day), so at
    10 ms it cost ~1 ms of CPU per turn with 200 learners and would grow with each learner
    seen that day. Limits stay exact: reads check expiry themselves; the sweep only frees
    memory. (Overrides the parent's private scheduler, name-mangled.)"""

    SWEEP_S = 5.0

    def _MemoryStorage__schedule_expiry(self) -> None:
        if not self.timer.is_alive():
            self.timer = threading.Timer(self.SWEEP_S, self._MemoryStorage__expire_events)
            self.timer.daemon = True
            self.timer.start()


REDIS_TIMEOUT_S = 1.0
RETRY_AFTER_S = 10.0  # after a call to Redis failed, it is left alone this long


class RedisOutage:
    """Redis as a counting store (usage limits, failed sign-ins) after a call to it failed:
    left alone for RETRY_AFTER_S, so a Redis that hangs costs one REDIS_TIMEOUT_S wait now
    and then, not one per call (each held a database thread while it waited); one warning
    per WARN_EVERY_S names TUTOR_REDIS_URL. Callers decide what counts meanwhile."""

    def __init__(self, logger: logging.Logger, what: str) -> None:
        self.logger, self.what = logger, what
        self._until = self._warned_at = -math.inf

    def ongoing(self) -> bool:
        return time.monotonic() < self._until

    def began(self, exc: Exception) -> None:
        now = time.monotonic()
        self._until = now + RETRY_AFTER_S
        if now - self._warned_at >= WARN_EVERY_S:
            self._warned_at = now
            self.logger.warning("%s (%s): check that Redis is running at TUTOR_REDIS_URL", self.what,
                                type(exc).__name__)


def redis_storage(url: str) -> Any:
    """The `limits` storage at a Redis URL, giving up on each call after REDIS_TIMEOUT_S:
    redis-py waits forever by default, and a Redis that hangs would hold the database
    thread admitting a turn (tutor.turns.conversations.accept) or a sign-in for as long."""
    return storage_from_string(url, socket_connect_timeout=REDIS_TIMEOUT_S, socket_timeout=REDIS_TIMEOUT_S)


def hashed_key(learner_key: str) -> str:
    # The learner key identifies a learner like a password; the counting store needn't know it.
    return hashlib.sha256(learner_key.encode("utf-8")).hexdigest()[:32]
