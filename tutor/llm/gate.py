"""A cap on model calls in flight in this process, with a fair queue the learner can see.

Every model call (the tutor's reply, the re-ask, the risk screen, the judge) goes through
one `ModelGate`: at most `slots` calls run at once; the rest wait in arrival order (FIFO),
and each waiting turn is told its place in line as it moves (`queued(position)`, then
`queued(0)` once it has a slot), so the page can say "you're 3rd in line…" instead of
hanging silently. The gate wraps the provider (`gated`), so a call waits inside whatever
time limit its caller set: a tutor turn's queue wait counts inside its deadline
(`TUTOR_LLM_DEADLINE`; the streamed read or `asyncio.timeout_at` cancels the wait like a
slow request), and a learner's Stop ends it too.

How many slots: the operator's TUTOR_MODEL_CALLS_IN_FLIGHT when set (0: no cap); otherwise
what the backend can take (`for_backend`): a llama.cpp server says in `GET /props`
(`total_slots`, its `--parallel`), and the gate is sized from that on its first call. A
server that does not say (vLLM, Ollama) and the hosted APIs get no cap: their limit is
requests per minute, which their 429s with Retry-After already enforce (the transport waits
and retries), and a fixed cap below a class's size only made half of it wait a whole model
turn in line.

News of the line is paced: the first "you're in line" at once, then a new place at most
every `news_every_s` (1 s) per waiting turn, and "your turn" (`queued(0)`) at once. Each
message is a frame to the page; telling every step of a fast-moving line cost a class of
200 about 10,000 frames.

Who hears about the queue is carried by a context variable (`reporting(listener)`), set by
the engine around a turn, so the providers' signatures stay as they are.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from tutor.i18n import Phrase
from tutor.llm import context
from tutor.llm.base import Completion, CompletionRequest, Provider
from tutor.llm.config import LLMSettings
from tutor.llm.sse import CompletionStream

__all__ = ["ModelGate", "gated", "queue_line", "reporting"]

log = logging.getLogger(__name__)

QUEUE_NEWS_EVERY_S = 1.0  # a waiting turn hears of a new place in line at most this often

# (slots, final): final False while asking again later might give another answer.
Sizer = Callable[[], Awaitable[tuple[int | None, bool]]]

# Whoever listens to the turn being answered in this task (a TurnListener with an optional
# `queued(position)` method), or None.
_LISTENER: contextvars.ContextVar[Any] = contextvars.ContextVar("tutor_queue_listener", default=None)


class reporting:  # noqa: N801 - used like a function: `async with reporting(listener):`
    """Model calls made inside this block (`with` or `async with`) tell `listener` their
    place in the queue."""

    def __init__(self, listener: Any) -> None:
        self.listener = listener
        self._token: contextvars.Token | None = None

    def __enter__(self) -> None:
        self._token = _LISTENER.set(self.listener)

    def __exit__(self, *exc: Any) -> None:
        if self._token is not None:
            _LISTENER.reset(self._token)
            self._token = None

    async def __aenter__(self) -> None:
        self.__enter__()

    async def __aexit__(self, *exc: Any) -> None:
        self.__exit__(*exc)


def queue_line(position: int) -> Phrase:
    """The calm line a learner sees while their turn waits for a model slot (a Phrase: the
    page shows it in the module's language)."""
    if position == 1:
        return Phrase("Many learners are asking at once — you're next in line…")
    return Phrase("Many learners are asking at once — you're {place} in line…", place=_ordinal(position))


def _ordinal(n: int) -> Phrase:
    """"3rd": one msgid per English suffix, so each language words its ordinals ("thứ 3")."""
    if 10 <= n % 100 <= 20 or n % 10 not in (1, 2, 3):
        return Phrase("{n}th", n=n)
    if n % 10 == 1:
        return Phrase("{n}st", n=n)
    return Phrase("{n}nd", n=n) if n % 10 == 2 else Phrase("{n}rd", n=n)


class _Waiter:
    __slots__ = ("granted", "position", "wake")

    def __init__(self, loop: asyncio.AbstractEventLoop, position: int) -> None:
        self.granted = False
        self.position = position  # 1: next in line; kept up to date by ModelGate._moved
        self.wake: asyncio.Future[None] = loop.create_future()

    def nudge(self) -> None:
        if not self.wake.done():
            self.wake.set_result(None)


class ModelGate:
    """At most `slots` holders at once; the rest wait first come, first served.

    A slot freed goes straight to the first waiter (never to a newcomer), so nobody is
    overtaken. Meant for one event loop (the app's); `slots` None means no cap. With a
    `sizer`, the number is asked for on the first call (and again, while the answer is not
    final, on later calls)."""

    def __init__(self, slots: int | None, *, sizer: Sizer | None = None,
                 news_every_s: float = QUEUE_NEWS_EVERY_S) -> None:
        self.slots = slots
        self.busy = 0
        self.most = 0  # the most calls in flight at once so far (tests, benchmarks)
        self.news_every_s = news_every_s
        self._sizer = sizer
        self._queue: deque[_Waiter] = deque()
        self._held: dict[int, int] = {}  # slots held, by the turn (its listener) holding them

    @classmethod
    def for_backend(cls, cap: int | None, settings: LLMSettings, provider: Provider | None = None) -> ModelGate:
        """The gate for this backend: `cap` is TUTOR_MODEL_CALLS_IN_FLIGHT (None: not set, so
        the backend's own number; 0: no cap). See the module docstring for why."""
        if cap is not None or not context.may_have_props(settings):
            return cls(cap or None)

        async def sizer() -> tuple[int | None, bool]:
            return await context.server_slots(settings, getattr(provider, "client", None))

        return cls(None, sizer=sizer)

    @property
    def waiting(self) -> int:
        return len(self._queue)

    @property
    def capped(self) -> bool:
        """Whether calls may have to wait (a cap, or one still to be asked for)."""
        return self.slots is not None or self._sizer is not None

    async def _size(self) -> None:
        assert self._sizer is not None
        try:
            slots, final = await self._sizer()
        except Exception:  # noqa: BLE001 - not knowing only means no cap for now
            log.debug("model slots unknown", exc_info=True)
            slots, final = None, False
        if final:
            self._sizer = None
        if slots != self.slots:
            log.info("model calls in flight capped at %s (the server's own slots)", slots)
            self.slots = slots
            self._admit()

    def _admit(self) -> None:
        """Waiters the new size has room for go in (a cap that grew, or went)."""
        while self._queue and (self.slots is None or self.busy < self.slots):
            first = self._queue.popleft()
            first.granted = True
            self.busy += 1
            first.nudge()
        self._moved()

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        if self._sizer is not None:
            await self._size()
        turn = id(_LISTENER.get())
        if self.slots is not None and (self.busy >= self.slots or self._queue):
            await self._wait_in_line()
        else:
            self.busy += 1
        self.most = max(self.most, self.busy)
        self._held[turn] = self._held.get(turn, 0) + 1
        try:
            yield
        finally:
            if self._held[turn] == 1:
                del self._held[turn]
            else:
                self._held[turn] -= 1
            self._release()

    async def _wait_in_line(self) -> None:
        listener = _LISTENER.get()
        tell = getattr(listener, "queued", None)
        loop = asyncio.get_running_loop()
        waiter = _Waiter(loop, len(self._queue) + 1)
        self._queue.append(waiter)
        told, told_at = 0, 0.0
        try:
            while not waiter.granted:
                position = waiter.position
                pause = None  # wait for the line to move
                if tell is not None and position != told and not self._behind_itself(listener, position):
                    pause = told_at + self.news_every_s - loop.time() if told else 0.0
                    if pause <= 0:  # the first place at once; later ones paced
                        told, told_at, pause = position, loop.time(), None
                        await _quietly(tell, position)
                        continue
                if pause is None:
                    await waiter.wake
                else:
                    await asyncio.wait((waiter.wake,), timeout=pause)
                if waiter.wake.done():
                    waiter.wake = loop.create_future()
            if told:
                await _quietly(tell, 0)
        except BaseException:  # cancelled (Stop, the deadline): leave the line, or pass the slot on
            if waiter.granted:
                self._release()
            else:
                self._queue.remove(waiter)
                self._moved()
            raise

    def _behind_itself(self, listener: Any, position: int) -> bool:
        """Whether a turn next in line waits only for its own other call (the model safety
        screen runs beside the reply): no other learner is in the way, so nothing is said."""
        return position == 1 and self._held.get(id(listener), 0) == self.busy

    def _release(self) -> None:
        # Over a cap that shrank (calls run uncapped while the server's size was unknown),
        # a freed slot is not passed on until the calls in flight are within it.
        if self._queue and (self.slots is None or self.busy <= self.slots):
            first = self._queue.popleft()
            first.granted = True  # the slot passes on: `busy` stays the same
            first.nudge()
            self._moved()
        else:
            self.busy -= 1

    def _moved(self) -> None:
        """The line moved: each waiter whose place changed learns its new one. One pass
        (each waiter looking itself up in the line cost O(n²) per release, exactly when the
        line is long)."""
        for position, waiter in enumerate(self._queue, 1):
            if waiter.position != position:
                waiter.position = position
                waiter.nudge()


async def _quietly(tell: Any, position: int) -> None:
    try:
        await tell(position)
    except Exception:  # a page that went away must not cost the turn its place
        log.debug("queue position not shown", exc_info=True)


class _GatedProvider:
    """A provider whose every call holds a slot of the gate; everything else is the
    wrapped provider's (name, model, client, aclose)."""

    def __init__(self, inner: Provider, gate: ModelGate) -> None:
        self.inner = inner
        self.gate = gate

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def complete(self, request: CompletionRequest) -> Completion:
        async with self.gate.slot():
            return await self.inner.complete(request)


class _GatedStreamingProvider(_GatedProvider):
    def stream(self, request: CompletionRequest) -> CompletionStream:
        inner = self.inner.stream(request)  # type: ignore[attr-defined]
        return CompletionStream(self._deltas(inner), inner.partial)

    async def _deltas(self, inner: CompletionStream) -> AsyncIterator[str]:
        # The slot is waited for inside the iteration, where the reader races Stop and the
        # deadline; it is held until the stream ends or the reader closes it.
        async with self.gate.slot():
            async with contextlib.aclosing(inner.__aiter__()) as deltas:  # type: ignore[type-var]
                async for delta in deltas:
                    yield delta


def gated(provider: Provider, gate: ModelGate | None) -> Provider:
    """`provider` with its calls capped by `gate` (the built-in tutor makes no model calls
    and is never queued)."""
    if gate is None or not gate.capped or provider.name == "builtin":
        return provider
    cls = _GatedStreamingProvider if hasattr(provider, "stream") else _GatedProvider
    return cls(provider, gate)  # type: ignore[return-value]
