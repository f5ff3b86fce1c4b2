"""Reading one streamed reply: previews for whoever listens, Stop, and runaway decoding.

`read_stream` drains a provider's stream into a Completion. On the way it

- hands the growing text to a `TurnListener` (the web page's preview; throttling is the
  listener's business, so this loop stays cheap);
- stops at once when the `stop` event is set: the read in flight is cancelled, which
  closes the HTTP stream, and the Completion says `finish_reason="stopped"`;
- feeds every delta to a RepetitionWatcher; a looping reply is cut there
  (`finish_reason="repetition"`) instead of being paid for up to the token limit;
- ends at the turn's `deadline` (event-loop time) like a Stop (`finish_reason="deadline"`):
  HTTP timeouts are per read, so a server trickling a byte a second, or one that never
  sends its headers, would otherwise hold the turn for as long as it likes;
- keeps what had arrived when the stream breaks after some text (the connection drops, the
  server falls silent or sends an error event): `finish_reason="interrupted"`, the error
  named in `extra` (`error_class`, `error`, `hint`) for the audit. A stream that breaks
  before any text raises, as before, and the policy may try the call again.
"""

from __future__ import annotations

import asyncio
from contextlib import suppress
from dataclasses import replace
from typing import Protocol

from tutor.llm.base import Completion, CompletionRequest
from tutor.llm.errors import TransportError
from tutor.llm.watch import RepetitionWatcher

__all__ = ["TurnListener", "read_stream"]


class TurnListener(Protocol):
    """Told about a turn while it happens (the web page implements it)."""

    async def text(self, raw: str) -> None:
        """The whole raw text of the reply being written, so far."""

    async def status(self, status: str) -> None:
        """"reasking": the reply so far is dropped and written again."""


async def read_stream(
    provider,
    request: CompletionRequest,
    *,
    listener: TurnListener | None = None,
    stop: asyncio.Event | None = None,
    deadline: float | None = None,
) -> Completion:
    loop = asyncio.get_running_loop()
    stream = provider.stream(request)
    watcher = RepetitionWatcher()
    text, cut = "", None
    broken: TransportError | None = None

    async def consume() -> None:
        nonlocal text, cut, broken
        try:
            async for delta in stream:
                text += delta
                if watcher.feed(delta):
                    cut = "repetition"
                    return
                if listener is not None:
                    await listener.text(text)
                if stop is not None and stop.is_set():
                    cut = "stopped"
                    return
        except TransportError as exc:
            if not text:
                raise
            cut, broken = "interrupted", exc

    if stop is None and deadline is None:
        await consume()
    else:
        # One reader task raced once against the learner's Stop and the deadline (not a
        # race per event: that cost a future, callbacks and a timer for every delta). The
        # read in flight may be the request itself (connecting, waiting for the headers).
        reader = asyncio.ensure_future(consume())
        stop_wait = asyncio.ensure_future(stop.wait()) if stop is not None else None
        try:
            waits = {reader} if stop_wait is None else {reader, stop_wait}
            timeout = None if deadline is None else max(0.0, deadline - loop.time())
            await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            if not reader.done():
                cut = "stopped" if stop_wait is not None and stop_wait.done() else "deadline"
        finally:
            if not reader.done():  # cut, or our own caller cancelled: unwind the stream's
                reader.cancel()    # generators, which closes the connection
                with suppress(BaseException):
                    await reader
            if stop_wait is not None:
                stop_wait.cancel()
        if not reader.cancelled():
            reader.result()  # the stream's error, as the provider raised it
    if cut is not None:
        with suppress(Exception):
            await stream.aclose()
    if cut is None:
        return stream.completion
    partial = stream.partial()
    extra = {**partial.extra, "cut": cut}
    if cut == "repetition" and watcher.reason:
        extra["repetition"] = watcher.reason
    if broken is not None:
        extra.update(error_class=type(broken).__name__, error=broken.message, hint=broken.operator_hint)
    return replace(partial, text=text, finish_reason=cut, extra=extra)
