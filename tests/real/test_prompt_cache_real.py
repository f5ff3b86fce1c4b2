"""Prompt caching against the real llama.cpp server: two turns of a conversation share the
system message's stable part (rules, module, instructions, contract), so the second turn's
prompt is read partly from the server's cache, and the app hears how much (timings.cache_n,
in every streamed chunk, into the attempt's tokens_cached)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest

from tutor.content.modules import load_library
from tutor.llm import CompletionRequest, make_provider, run_turn
from tutor.progress import ProgressState
from tutor.turns.prompts import build_messages

pytestmark = pytest.mark.real_model

ROOT = Path(__file__).resolve().parents[2]


def test_the_second_turn_reads_the_stable_prefix_from_the_servers_cache(llama):
    module = load_library(ROOT / "modules").get("understanding_anxiety")
    first = build_messages(module, ProgressState(), [], "What does anxiety do in the body?")
    second = build_messages(module, ProgressState(tuple(module.topic_ids[:2])), [], "Why does my heart race?")
    assert first[0].content[: first[0].cached_prefix] == second[0].content[: second[0].cached_prefix]
    settings = replace(llama.settings(), max_tokens=8, stream=True, max_retries=0, deadline_s=240, timeout_s=240)
    provider = make_provider(settings)

    async def go():
        try:
            out = []
            for messages in (first, second):
                result = await run_turn(provider, CompletionRequest(messages, 0.0, 8, "prompt"), settings)
                out.append(result.attempts[0])
            return out
        finally:
            await provider.aclose()

    one, two = asyncio.run(go())
    assert two.tokens_cached is not None, "the server did not say, in a stream, what it read from its cache"
    # More than the rules alone (~250 tokens: all that the previous layout's turns had in
    # common); not necessarily all ~1,900 tokens of the stable part, as Gemma's sliding-window
    # cache goes back to a checkpoint. The first turn may find the prefix already cached too
    # (a server the session's other tests used), so the two are not compared.
    assert two.tokens_cached >= 512, (one, two)
    assert two.tokens_cached <= two.tokens_in
