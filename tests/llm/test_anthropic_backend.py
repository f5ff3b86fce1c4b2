"""The Anthropic backend against a loopback server speaking the Messages API."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.fakes import wire
from tests.fakes.servers import Scripted, settings_for
from tutor.contract import TutorResponse
from tutor.llm import AuthError, ChatMessage, CompletionRequest, ConnectionFailed, RateLimited, ServerError
from tutor.llm.anthropic import OPENING_USER_TEXT, AnthropicProvider

HISTORY = [
    ChatMessage("system", "You are a tutor."),
    ChatMessage("system", "Reply with one JSON object."),
    ChatMessage("user", "Hi"),
    ChatMessage("assistant", '{"content": {}}'),
    ChatMessage("user", "What is anxiety?"),
]


def request(strategy: str = "json_schema", messages=None) -> CompletionRequest:
    return CompletionRequest(messages=list(messages or HISTORY), temperature=0.3, max_tokens=400, strategy=strategy)


def complete(settings, req=None):
    async def go():
        provider = AnthropicProvider(settings)
        try:
            return await provider.complete(req or request())
        finally:
            await provider.aclose()

    return asyncio.run(go())


def test_forced_tool_call_request_and_reply(anthropic_server):
    anthropic_server.script(wire.anthropic_tool_reply(wire.tutor_reply("Tool says hi"), tokens=(210, 70)))
    completion = complete(settings_for(anthropic_server))
    sent = anthropic_server.requests[0]
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == "test-key"
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers
    body = sent.json
    assert body["system"] == "You are a tutor.\n\nReply with one JSON object."
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["max_tokens"] == 400 and body["temperature"] == 0.3
    assert body["tool_choice"] == {"type": "tool", "name": "tutor_response"}
    (tool,) = body["tools"]
    assert tool["name"] == "tutor_response"
    assert set(tool["input_schema"]["required"]) == {"content", "meta"}
    assert "$ref" not in json.dumps(tool["input_schema"])
    reply = TutorResponse.model_validate_json(completion.text)
    assert reply.content.text_blocks[0].content == "Tool says hi"
    assert (completion.finish_reason, completion.tokens_in, completion.tokens_out) == ("stop", 210, 70)


def test_prompt_strategy_sends_no_tool_and_reads_text(anthropic_server):
    anthropic_server.script(wire.anthropic_text_reply(wire.tutor_json("plain")))
    completion = complete(settings_for(anthropic_server), request("prompt"))
    assert "tools" not in anthropic_server.requests[0].json
    assert "plain" in completion.text


def test_json_object_strategy_forces_an_open_object_tool(anthropic_server):
    anthropic_server.script(wire.anthropic_tool_reply(wire.tutor_reply()))
    complete(settings_for(anthropic_server), request("json_object"))
    (tool,) = anthropic_server.requests[0].json["tools"]
    assert tool["input_schema"] == {"type": "object"}


def test_max_tokens_stop_reason_is_length(anthropic_server):
    anthropic_server.script(wire.anthropic_tool_reply({"content": {}}, stop_reason="max_tokens"))
    assert complete(settings_for(anthropic_server)).finish_reason == "length"


def test_refusal_stop_reason_is_a_refusal(anthropic_server):
    anthropic_server.script(wire.anthropic_text_reply("I won't help with that.", stop_reason="refusal"))
    completion = complete(settings_for(anthropic_server), request("prompt"))
    assert completion.refusal == "I won't help with that." and completion.finish_reason == "refusal"


def test_consecutive_roles_are_merged_and_conversation_starts_with_user(anthropic_server):
    anthropic_server.script(wire.anthropic_tool_reply(wire.tutor_reply()))
    messages = [ChatMessage("system", "S"), ChatMessage("assistant", "Welcome!"),
                ChatMessage("user", "a"), ChatMessage("user", "b")]
    complete(settings_for(anthropic_server), request(messages=messages))
    assert anthropic_server.requests[0].json["messages"] == [
        {"role": "user", "content": OPENING_USER_TEXT},
        {"role": "assistant", "content": "Welcome!"},
        {"role": "user", "content": "a\n\nb"},
    ]


def test_system_only_opening_turn_gets_a_user_message(anthropic_server):
    anthropic_server.script(wire.anthropic_tool_reply(wire.tutor_reply()))
    complete(settings_for(anthropic_server), request(messages=[ChatMessage("system", "S")]))
    assert anthropic_server.requests[0].json["messages"] == [{"role": "user", "content": OPENING_USER_TEXT}]


def test_stream_assembles_tool_input_from_partial_json(anthropic_server):
    text = wire.tutor_json("streamed tool")
    anthropic_server.script(wire.anthropic_stream(text, pieces=6, tokens=(300, 80)))

    async def go():
        provider = AnthropicProvider(settings_for(anthropic_server))
        stream = provider.stream(request())
        deltas = [d async for d in stream]
        await provider.aclose()
        return deltas, stream.completion

    deltas, completion = asyncio.run(go())
    assert "".join(deltas) == text and len(deltas) == 6
    assert completion.text == text and completion.finish_reason == "stop"
    assert (completion.tokens_in, completion.tokens_out) == (300, 80)
    assert anthropic_server.requests[0].json["stream"] is True


def test_stream_of_text_block_with_max_tokens(anthropic_server):
    anthropic_server.script(wire.anthropic_stream(text='{"content": {"text_bl', stop_reason="max_tokens"))
    completion = complete(settings_for(anthropic_server, stream=True), request("prompt"))
    assert completion.text == '{"content": {"text_bl' and completion.finish_reason == "length"


def test_stream_error_event_is_a_server_error(anthropic_server):
    chunks = wire.anthropic_stream_chunks(wire.tutor_json(), stop=False)[:3]
    chunks.append('event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", '
                  '"message": "Overloaded"}}\n\n')
    anthropic_server.script(Scripted(200, sse_chunks=chunks))
    with pytest.raises(ServerError, match="Overloaded"):
        complete(settings_for(anthropic_server, stream=True))


def test_stream_without_message_stop_is_a_connection_failure(anthropic_server):
    anthropic_server.script(wire.anthropic_stream(wire.tutor_json(), stop=False))
    with pytest.raises(ConnectionFailed):
        complete(settings_for(anthropic_server, stream=True))


def test_error_bodies(anthropic_server):
    anthropic_server.script(
        wire.error(401, "invalid x-api-key", kind="anthropic", err_type="authentication_error"),
        wire.error(529, "Overloaded", kind="anthropic", err_type="overloaded_error"),
        wire.error(429, "rate", kind="anthropic", retry_after="2"),
    )
    settings = settings_for(anthropic_server)
    with pytest.raises(AuthError, match="invalid x-api-key"):
        complete(settings)
    with pytest.raises(ServerError):
        complete(settings)
    with pytest.raises(RateLimited) as info:
        complete(settings)
    assert info.value.retry_after == 2.0
