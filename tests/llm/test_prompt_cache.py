"""Prompt caching: every turn's prompt starts with the same long stable part (rules, module,
instructions, contract), so a server's prompt cache can keep it. Real loopback HTTP servers
record what the app sends: OpenAI-compatible (nothing extra: OpenAI caches identical
prefixes by itself and refuses fields it does not know), llama.cpp (`cache_prompt`), and
Anthropic (a `cache_control` breakpoint on the stable system block); the cached-token
counts they answer with are kept in the attempt's audit detail."""

from __future__ import annotations

import asyncio
import json

import pytest
from sqlmodel import select

from tests.fakes.llama_endpoints import LlamaEndpoints
from tests.fakes.servers import FakeLLMServer, Scripted, settings_for
from tests.fakes.wire import anthropic_text_reply, openai_reply, tutor_reply
from tutor.content.modules import load_library
from tutor.llm import ChatMessage, CompletionRequest, make_provider, run_turn
from tutor.llm import context as ctx
from tutor.llm.base import LearnerInput
from tutor.storage.store import AuditEvent, Store
from tutor.turns.engine import Engine
from tutor.turns.prompts import CONTRACT_BLOCK, GLOBAL_RULES, stable_prompt

MODULE = "understanding_anxiety"
REPLY = json.dumps(tutor_reply("Let's keep going."))


@pytest.fixture(autouse=True)
def fresh_props():
    ctx.forget()
    yield
    ctx.forget()


def three_turns(store: Store, settings) -> None:
    """The opening turn and two learner messages, through the real engine."""
    engine = Engine(store, make_provider(settings), load_library(), settings)

    async def go() -> None:
        view = await engine.open("ada", MODULE)
        for text in ("What does anxiety do in the body?", "Why does my heart race?"):
            await engine.send(view.id, LearnerInput(text=text))

    asyncio.run(go())


def common_prefix(a: str, b: str) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def assert_stable_and_long(systems: list[str]) -> str:
    stable = stable_prompt(load_library().get(MODULE))
    assert len(systems) >= 3
    for before, after in zip(systems, systems[1:]):
        assert common_prefix(before, after) >= len(stable)  # byte for byte, turn after turn
        assert before != after  # what changes (progress, passages) comes after it
    assert stable.startswith(GLOBAL_RULES) and stable.endswith(CONTRACT_BLOCK)
    assert "## Author instructions" in stable and "## Module: " in stable
    assert all(len(stable) > 0.75 * len(s) for s in systems)  # most of every system message
    return stable


def test_consecutive_turns_send_a_byte_identical_long_prefix_and_nothing_openai_would_refuse(store):
    with FakeLLMServer("openai") as server:
        def answer(_request):
            scripted = openai_reply(REPLY)
            scripted.body["usage"]["prompt_tokens_details"] = {"cached_tokens": 1792}  # as OpenAI reports
            return scripted

        server.default = answer
        three_turns(store, settings_for(server, max_retries=0))
        tutor_calls = [r.json for r in server.requests if CONTRACT_BLOCK in r.json["messages"][0]["content"]]
    assert_stable_and_long([body["messages"][0]["content"] for body in tutor_calls])
    assert all("cache_prompt" not in body for body in tutor_calls)  # api.openai.com: 400 for unknown fields
    with store.session() as s:
        details = [json.loads(a.detail_json) for a in s.exec(select(AuditEvent).where(AuditEvent.provider == "openai"))]
    assert details and all(d["tokens_cached"] == 1792 for d in details)


def test_a_llama_cpp_server_is_asked_to_keep_the_prompt_cache_and_says_what_it_reused():
    with LlamaEndpoints() as server:
        server.chat_reply, server.cache_n = REPLY, 812
        settings = server.settings(strategy="prompt", max_retries=0, stream=False)
        request = CompletionRequest([ChatMessage("system", "Be kind.", cached_prefix=8),
                                     ChatMessage("user", "hi")], 0.7, 256, "prompt")
        result = asyncio.run(run_turn(make_provider(settings), request, settings))
        chats = [body for method, path, _, body in server.requests if path == "/v1/chat/completions"]
    assert chats and all(body["cache_prompt"] is True for body in chats)  # /props answered first
    assert all("timings_per_token" not in body for body in chats)  # only streams need it in every chunk
    assert [m["content"] for m in chats[0]["messages"]] == ["Be kind.", "hi"]
    assert result.attempts[0].tokens_cached == 812


def test_anthropic_requests_mark_the_stable_system_block_for_caching(store):
    with FakeLLMServer("anthropic") as server:
        def answer(_request):
            scripted = anthropic_text_reply(REPLY)
            scripted.body["usage"].update(cache_read_input_tokens=1650, cache_creation_input_tokens=0)
            return scripted

        server.default = answer
        three_turns(store, settings_for(server, max_retries=0))
        bodies = [r.json for r in server.requests if isinstance(r.json.get("system"), list)]
    assert len(bodies) >= 3
    stable = assert_stable_and_long(["".join(b["text"] for b in body["system"]) for body in bodies])
    for body in bodies:
        first, *rest = body["system"]
        assert first == {"type": "text", "text": stable, "cache_control": {"type": "ephemeral"}}
        assert rest and all("cache_control" not in block for block in rest)  # what changes is not cached
    with store.session() as s:
        details = [json.loads(a.detail_json) for a in s.exec(select(AuditEvent).where(AuditEvent.provider == "anthropic"))]
    assert details and all(d["tokens_cached"] == 1650 for d in details)


def test_a_streamed_anthropic_reply_reports_its_cached_tokens():
    from tests.fakes.wire import anthropic_stream

    with FakeLLMServer("anthropic") as server:
        scripted: Scripted = anthropic_stream(REPLY)
        scripted.sse_chunks = [c.replace('"input_tokens": ', '"cache_read_input_tokens": 77, "input_tokens": ', 1)
                               if "message_start" in c else c for c in scripted.sse_chunks]
        server.script(scripted)
        settings = settings_for(server, max_retries=0, stream=True)
        request = CompletionRequest([ChatMessage("system", "Be kind.", cached_prefix=8),
                                     ChatMessage("user", "hi")], 0.7, 256, "prompt")
        result = asyncio.run(run_turn(make_provider(settings), request, settings))
    assert result.attempts[0].tokens_cached == 77
