"""Streamed turns over loopback HTTP: previews, Stop, the repetition cut, the re-ask status."""

from __future__ import annotations

import asyncio
import json
import time

from tests.fakes import wire
from tests.fakes.servers import settings_for
from tutor.llm import ChatMessage, CompletionRequest, make_provider, run_turn

MESSAGES = [ChatMessage("system", "Reply with one JSON object."), ChatMessage("user", "What is anxiety?")]


class Listener:
    def __init__(self, stop_after: int | None = None, stop: asyncio.Event | None = None):
        self.texts: list[str] = []
        self.statuses: list[str] = []
        self.stop_after = stop_after
        self.stop = stop

    async def text(self, raw: str) -> None:
        self.texts.append(raw)
        if self.stop_after is not None and len(self.texts) >= self.stop_after and self.stop is not None:
            self.stop.set()

    async def status(self, status: str) -> None:
        self.statuses.append(status)


def play(server, listener=None, stop=None, **overrides):
    settings = settings_for(server, stream=True, strategy="json_object", **overrides)

    async def go():
        provider = make_provider(settings)
        try:
            request = CompletionRequest(MESSAGES, 0.7, settings.max_tokens, "json_object")
            return await run_turn(provider, request, settings, listener=listener, stop=stop)
        finally:
            await provider.aclose()

    return asyncio.run(go())


def test_a_streamed_reply_reaches_the_listener_growing_then_parses(openai_server):
    reply = wire.tutor_json("Anxiety is the body's alarm system, and it can be retrained.")
    openai_server.script(wire.openai_stream(reply, pieces=12))
    listener = Listener()
    result = play(openai_server, listener)
    assert result.parsed.outcome == "valid" and "stopped" not in result.flags
    assert len(listener.texts) >= 6
    assert all(b.startswith(a) for a, b in zip(listener.texts, listener.texts[1:]))
    assert listener.texts[-1] == reply and listener.statuses == []
    assert openai_server.requests[0].json["stream"] is True
    assert openai_server.requests[0].json["response_format"] == {"type": "json_object"}


def test_stop_ends_the_turn_at_once_and_keeps_what_arrived(openai_server):
    # Thirty different sentences (the same one thirty times would be a loop, never shown).
    reply = json.dumps(wire.tutor_reply(" ".join(f"Anxiety is the body's alarm, reason {i}." for i in range(30))))
    # 40 pieces, 0.25 s apart: the whole reply would take 10 s
    openai_server.script(wire.openai_stream(reply, pieces=40, chunk_delay_s=0.25))
    stop = asyncio.Event()
    listener = Listener(stop_after=8, stop=stop)
    started = time.monotonic()
    result = play(openai_server, listener, stop=stop)
    elapsed = time.monotonic() - started
    assert elapsed < 4.0  # stopped after ~8 pieces, not after all 40
    assert "stopped" in result.flags and "reasked" not in result.flags
    assert len(openai_server.requests) == 1  # a stop is never re-asked
    shown = result.parsed.response.content.text_blocks[0].content
    assert shown and "Anxiety is the body's alarm, reason 0." in shown
    assert listener.texts[-1].startswith(result.parsed.raw[:20]) and len(result.parsed.raw) < len(reply)
    assert result.attempts[0].flags.count("stopped") == 1 and result.attempts[0].finish_reason == "stopped"


def test_stop_before_any_text_tells_the_learner_calmly(openai_server):
    openai_server.script(wire.openai_stream(wire.tutor_json(), pieces=4, delay_s=1.5))
    stop = asyncio.Event()

    async def go():
        settings = settings_for(openai_server, stream=True, strategy="json_object")
        provider = make_provider(settings)
        try:
            request = CompletionRequest(MESSAGES, 0.7, 512, "json_object")
            task = asyncio.ensure_future(run_turn(provider, request, settings, stop=stop))
            await asyncio.sleep(0.3)
            stop.set()
            return await asyncio.wait_for(task, 1.0)
        finally:
            await provider.aclose()

    result = asyncio.run(go())
    assert "stopped" in result.flags
    assert "stopped" in result.parsed.response.content.text_blocks[0].content


def test_a_reply_repeating_its_block_is_cut_early_and_shown_once(openai_server):
    loop = '{"type": "paragraph", "content": "Breathe slowly and notice your breath."}, '
    looping = '{"content": {"text_blocks": [' + loop * 60  # never closes: runs to the limit
    openai_server.script(wire.openai_stream(looping, pieces=120, finish_reason="length"))
    result = play(openai_server, Listener())
    assert result.parsed.outcome == "repaired" and "repetition" in result.flags
    blocks = result.parsed.response.content.text_blocks
    assert [b.content for b in blocks] == ["Breathe slowly and notice your breath."]
    first = result.attempts[0]
    assert first.finish_reason == "repetition" and "repetition" in first.flags
    assert first.tokens_out < len(looping) // 8  # cut early, not paid for up to the limit
    assert len(openai_server.requests) == 1


def test_a_reply_looping_inside_its_text_is_cut_and_reasked_with_a_status(openai_server):
    looping = '{"content": {"text_blocks": [{"type": "paragraph", "content": "Breathe' + " and breathe" * 300
    openai_server.script(
        wire.openai_stream(looping, pieces=200, finish_reason="length"),
        wire.openai_stream(wire.tutor_json("Breathe slowly."), pieces=4),
    )
    listener = Listener()
    result = play(openai_server, listener)
    assert result.parsed.outcome == "valid" and {"repetition", "reasked"} <= set(result.flags)
    assert result.parsed.response.content.text_blocks[0].content == "Breathe slowly."
    first = result.attempts[0]
    assert first.finish_reason == "repetition" and first.tokens_out < len(looping) // 8
    assert listener.statuses == ["reasking"]
    reask = openai_server.requests[1].json["messages"]
    assert [m["role"] for m in reask] == ["system", "user"]
    assert "repeating" in reask[-1]["content"]


def test_an_estimated_reply_never_counts_more_tokens_than_the_limit_allowed(openai_server):
    # A stream the watcher cuts has no usage chunk; 3 characters a token overcounts real
    # tokenizers, but the server cannot have written more than max_tokens.
    looping = '{"content": {"text_blocks": [{"type": "paragraph", "content": "Breathe' + " and breathe" * 300
    openai_server.script(wire.openai_stream(looping, pieces=200, finish_reason="length", tokens=None),
                         wire.openai_stream(wire.tutor_json("Breathe slowly."), pieces=4))
    result = play(openai_server, Listener(), max_tokens=64)
    first = result.attempts[0]
    assert "tokens_estimated" in first.flags and first.tokens_out == 64
