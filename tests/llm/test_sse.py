"""The event-stream protocol, fed as the socket delivers it: raw bytes, split anywhere."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from tutor.llm.base import Completion
from tutor.llm.sse import CompletionStream, SSEDecoder, SSEEvent, aiter_sse


def events_of(*chunks: bytes | str) -> list[SSEEvent]:
    async def reads():
        for chunk in chunks:
            yield chunk.encode("utf-8") if isinstance(chunk, str) else chunk

    async def go():
        return [e async for e in aiter_sse(reads())]

    return asyncio.run(go())


def split_at(data: bytes, cuts: list[int]) -> list[bytes]:
    cuts = sorted({min(c, len(data)) for c in cuts})
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)])]


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
    assert events_of("data: a\n\ndata: tail\n") == [SSEEvent("message", "a"), SSEEvent("message", "tail")]


def test_crlf_and_cr_lines():
    assert events_of("event: x\r\ndata: y\r\n\r\n") == [SSEEvent("x", "y")]
    assert events_of("data: a\rdata: b\r\rdata: c\r\r") == [SSEEvent("message", "a\nb"), SSEEvent("message", "c")]


def test_crlf_split_between_reads_is_one_line_end():
    # CR closes one read and LF opens the next: one line end, not a line end and a blank line.
    assert events_of("data: a\r", "\ndata: b\r\n\r\n") == [SSEEvent("message", "a\nb")]
    assert events_of("data: a\r\n\r", "\ndata: b\r\n\r\n") == [SSEEvent("message", "a"), SSEEvent("message", "b")]
    assert events_of("data: a\r", "\n", "\r", "\n") == [SSEEvent("message", "a")]


def test_a_multibyte_character_split_between_reads_arrives_whole():
    text = "data: Angst – страх – 不安 – 🫁\n\n".encode()
    for cut in range(1, len(text)):
        assert events_of(text[:cut], text[cut:]) == [SSEEvent("message", "Angst – страх – 不安 – 🫁")], cut


def test_comments_and_keep_alives_between_and_inside_events_are_skipped():
    assert events_of(": ping\n\n", ":\n", "\nevent: x\n: inside\ndata: 1\n\n: trailing") == [SSEEvent("x", "1")]


def test_an_event_larger_than_one_read_is_assembled():
    data = "é" * 50_000
    raw = f"data: {data}\n\n".encode()
    assert events_of(*[raw[i:i + 4096] for i in range(0, len(raw), 4096)]) == [SSEEvent("message", data)]


def test_a_blank_line_split_between_reads_dispatches_once():
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n") == []
    assert decoder.feed(b"\n") == [SSEEvent("message", "a")]  # at once, not at the next event
    assert decoder.feed(b"\n\n") == [] and decoder.end() == []


def test_a_byte_order_mark_is_dropped_even_when_split():
    assert events_of(b"\xef", b"\xbb\xbfdata: x\n\n") == [SSEEvent("message", "x")]


payloads = st.text(alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=40)


@given(st.lists(st.tuples(st.sampled_from(["", "ping", "content_block_delta"]), payloads), max_size=8),
       st.sampled_from(["\n", "\r\n", "\r"]), st.lists(st.integers(0, 2000), max_size=12))
def test_round_trip_with_any_line_ending_and_any_split(events, eol, cuts):
    text = "".join((f"event: {name}{eol}" if name else "") + f"data: {data}{eol}{eol}" for name, data in events)
    chunks = split_at(text.encode("utf-8"), cuts)
    assert events_of(*chunks) == [SSEEvent(name or "message", data) for name, data in events]


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
