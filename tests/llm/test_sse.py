"""The event-stream line protocol, fed like httpx feeds it (lines, arbitrary splits)."""

from __future__ import annotations

import asyncio
import re

from hypothesis import given
from hypothesis import strategies as st

from tutor.llm.base import Completion
from tutor.llm.sse import CompletionStream, SSEEvent, aiter_sse


def events_of(text: str) -> list[SSEEvent]:
    async def lines():  # split like httpx's line decoder: \n, \r\n or \r only
        for line in re.split(r"\r\n|\n|\r", text):
            yield line

    async def go():
        return [e async for e in aiter_sse(lines())]

    return asyncio.run(go())


def test_events_data_comments_and_multiline_data():
    text = (": keep-alive\n\nevent: message_start\ndata: {\"a\": 1}\n\n"
            "data: line one\ndata: line two\nid: 7\n\ndata: [DONE]\n\n")
    assert events_of(text) == [
        SSEEvent("message_start", '{"a": 1}'),
        SSEEvent("message", "line one\nline two", "7"),
        SSEEvent("message", "[DONE]", "7"),
    ]


def test_last_event_without_blank_line_is_kept():
    assert events_of("data: tail") == [SSEEvent("message", "tail")]


def test_crlf_lines():
    assert events_of("event: x\r\ndata: y\r\n\r\n") == [SSEEvent("x", "y")]


payloads = st.text(alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=40)


@given(st.lists(st.tuples(st.sampled_from(["", "ping", "content_block_delta"]), payloads), max_size=8))
def test_round_trip(events):
    text = "".join((f"event: {name}\n" if name else "") + f"data: {data}\n\n" for name, data in events)
    assert events_of(text) == [SSEEvent(name or "message", data) for name, data in events]


def test_completion_stream_is_ready_only_after_the_end():
    async def deltas():
        yield "ab"
        yield ""
        yield "c"

    stream = CompletionStream(deltas(), lambda: Completion(text="abc"))

    async def go():
        seen = []
        async for d in stream:
            seen.append(d)
            try:
                stream.completion
            except RuntimeError:
                seen.append("not yet")
        return seen

    assert asyncio.run(go()) == ["ab", "not yet", "c", "not yet"]
    assert stream.completion.text == "abc"
