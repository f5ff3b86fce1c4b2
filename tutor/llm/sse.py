"""Server-sent events: the protocol both providers stream in, and a completion stream.

`SSEDecoder` follows the WHATWG event-stream rules the providers rely on: `event:` names the
event, `data:` lines accumulate (joined by newlines), `id:` sets the last event id (kept for
the events after it), a blank line dispatches, lines starting with `:` are comments
(keep-alives), and lines end in CRLF, LF or CR. It reads the body's bytes as they come off
the socket and decodes UTF-8 once per event: events end at a blank line, which no byte of
a multibyte character can be part of, so a character split across two reads arrives whole.
`CompletionStream` hands out text deltas as they arrive and the assembled Completion once
the stream is exhausted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass

from tutor.llm.base import Completion


@dataclass(frozen=True, slots=True)
class SSEEvent:
    event: str = "message"
    data: str = ""
    id: str | None = None


class SSEDecoder:
    """Bytes in (any split), events out: `feed(chunk)` for each read, `end()` once."""

    __slots__ = ("_parts", "_skip_lf", "_started", "_id")

    def __init__(self) -> None:
        self._parts: list[bytes] = []  # the unfinished event's bytes, line endings made LF
        self._skip_lf = False  # the last read ended in CR: an LF opening the next one ends the same line
        self._started = False  # past a possible byte order mark
        self._id: str | None = None

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        if not chunk:
            return []
        if not self._started:
            if sum(map(len, self._parts)) + len(chunk) < 3:  # too short to tell a byte order mark
                self._parts.append(chunk)
                return []
            chunk = b"".join((*self._parts, chunk)).removeprefix(b"\xef\xbb\xbf")
            self._parts, self._started = [], True
        if self._skip_lf and chunk[:1] == b"\n":
            chunk = chunk[1:]
        if b"\r" in chunk:
            self._skip_lf = chunk[-1:] == b"\r"
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        else:
            self._skip_lf = False
        parts = self._parts
        if b"\n\n" not in chunk and not (chunk[:1] == b"\n" and parts and parts[-1][-1:] == b"\n"):
            if chunk:
                parts.append(chunk)
            return []
        if parts:
            parts.append(chunk)
            chunk = b"".join(parts)
        *blocks, rest = chunk.split(b"\n\n")
        self._parts = [rest] if rest else []
        events = []
        for block in blocks:
            if block:
                event = self._event(block, dispatch=True)
                if event is not None:
                    events.append(event)
        return events

    def end(self) -> list[SSEEvent]:
        """A stream cut off without the final blank line still delivers its last event."""
        block = b"".join(self._parts)
        if not self._started:
            block = block.removeprefix(b"\xef\xbb\xbf")
        self._parts, self._started = [], True
        event = self._event(block, dispatch=False) if block else None
        return [event] if event is not None else []

    def _event(self, block: bytes, *, dispatch: bool) -> SSEEvent | None:
        text = block.decode("utf-8", "replace")
        if text.startswith("data: ") and "\n" not in text:  # the usual event: one data line
            return SSEEvent("message", text[6:], self._id)
        event, data = "", []
        for line in text.split("\n"):
            if not line or line[0] == ":":
                continue
            name, _, value = line.partition(":")
            if value[:1] == " ":
                value = value[1:]
            if name == "data":
                data.append(value)
            elif name == "event":
                event = value
            elif name == "id":
                self._id = value
            # "retry" and unknown fields are ignored, as the spec says.
        if data or (event and dispatch):
            return SSEEvent(event or "message", "\n".join(data), self._id)
        return None


async def aiter_sse(chunks: AsyncIterator[bytes]) -> AsyncIterator[SSEEvent]:
    """Events from an async iterator of raw body bytes, split anywhere."""
    decoder = SSEDecoder()
    async for chunk in chunks:
        for event in decoder.feed(chunk):
            yield event
    for event in decoder.end():
        yield event


class CompletionStream:
    """Async iterator of text deltas; `.completion` is ready once iteration has finished.

    The HTTP request runs inside the iteration, so transport errors surface from the
    `async for` (as LLMError subclasses). A reader that stops early calls `aclose()`,
    which closes the connection at once; `partial()` is what had arrived by then.
    """

    def __init__(self, deltas: AsyncIterator[str], finish: Callable[[], Completion]):
        self._deltas = deltas
        self._finish = finish
        self._completion: Completion | None = None

    def __aiter__(self) -> AsyncIterator[str]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[str]:
        async with aclosing(self._deltas) as deltas:
            async for delta in deltas:
                if delta:
                    yield delta
        self._completion = self._finish()

    @property
    def completion(self) -> Completion:
        if self._completion is None:
            raise RuntimeError("the stream has not been read to the end yet")
        return self._completion

    def partial(self) -> Completion:
        """What the stream had delivered so far (for a reader that stopped early)."""
        return self._completion or self._finish()

    async def aclose(self) -> None:
        await self._deltas.aclose()  # type: ignore[attr-defined]

    async def collect(self) -> Completion:
        """Read the whole stream and return the assembled Completion."""
        async for _ in self:
            pass
        return self.completion
