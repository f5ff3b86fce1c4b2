"""A cap on model calls in flight in this process, with a fair queue the learner can see.

Every model call (the tutor's reply, the re-ask, the risk screen, the judge) goes through
one `ModelGate`: at most `slots` calls run at once; the rest wait in arrival order (FIFO),
and each waiting turn is told its place in line as it moves (`queued(position)`, then
`queued(0)` once it has a slot), so the page can say "you're 3rd in line…" instead of
hanging silently. The gate wraps the provider (`gated`), so a call waits inside whatever
time limit its caller set: a tutor turn's queue wait counts inside its deadline
(`TUTOR_LLM_DEADLINE`; the streamed read or `asyncio.timeout_at` cancels the wait like a
slow request), and a learner's Stop ends it too.

Who hears about the queue is carried by a context variable (`reporting(listener)`), set by
the engine around a turn, so the providers' signatures stay as they are.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

from tutor.i18n import Phrase
from tutor.llm.base import Completion, CompletionRequest, Provider
from tutor.llm.sse import CompletionStream

__all__ = ["ModelGate", "gated", "queue_line", "reporting"]

log = logging.getLogger(__name__)

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
    overtaken. Meant for one event loop (the app's); `slots` None means no cap."""

    def __init__(self, slots: int | None) -> None:
        self.slots = slots
        self.busy = 0
        self.most = 0  # the most calls in flight at once so far (tests, benchmarks)
        self._queue: deque[_Waiter] = deque()

    @property
    def waiting(self) -> int:
        return len(self._queue)

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        if self.slots is not None and (self.busy >= self.slots or self._queue):
            await self._wait_in_line()
        else:
            self.busy += 1
        self.most = max(self.most, self.busy)
        try:
            yield
        finally:
            self._release()

    async def _wait_in_line(self) -> None:
        listener = _LISTENER.get()
        tell = getattr(listener, "queued", None)
        waiter = _Waiter(asyncio.get_running_loop(), len(self._queue) + 1)
        self._queue.append(waiter)
        told = 0
        try:
            while not waiter.granted:
                position = waiter.position
                if tell is not None and position != told:
                    told = position
                    await _quietly(tell, position)
                if waiter.granted:
                    break
                await waiter.wake
                waiter.wake = asyncio.get_running_loop().create_future()
            if tell is not None:
                await _quietly(tell, 0)
        except BaseException:  # cancelled (Stop, the deadline): leave the line, or pass the slot on
            if waiter.granted:
                self._release()
            else:
                self._queue.remove(waiter)
                self._moved()
            raise

    def _release(self) -> None:
        if self._queue:
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
    if gate is None or gate.slots is None or provider.name == "builtin":
        return provider
    cls = _GatedStreamingProvider if hasattr(provider, "stream") else _GatedProvider
    return cls(provider, gate)  # type: ignore[return-value]
