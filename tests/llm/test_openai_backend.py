"""The OpenAI-compatible backend against a loopback server speaking Chat Completions."""

from __future__ import annotations

import asyncio
import json
import socket

import jsonschema
import pytest

from tests.fakes import wire
from tests.fakes.servers import Scripted, settings_for
from tutor.contract import TutorResponse
from tutor.llm import (
    AuthError,
    BadRequest,
    BadResponse,
    ChatMessage,
    CompletionRequest,
    ConnectionFailed,
    NotFound,
    RateLimited,
    RequestTimeout,
    ServerError,
)
from tutor.llm.openai import OpenAIProvider

MESSAGES = [ChatMessage("system", "You are a tutor. Reply in JSON."), ChatMessage("user", "What is anxiety?")]


def request(strategy: str = "prompt", **kw) -> CompletionRequest:
    return CompletionRequest(messages=list(MESSAGES), temperature=0.4, max_tokens=300, strategy=strategy, **kw)


def complete(settings, req=None):
    async def go():
        provider = OpenAIProvider(settings)
        try:
            return await provider.complete(req or request())
        finally:
            await provider.aclose()

    return asyncio.run(go())


def test_complete_sends_chat_completions_and_reads_reply(openai_server):
    openai_server.script(wire.openai_reply(wire.tutor_json("Hello"), tokens=(111, 22)))
    completion = complete(settings_for(openai_server))
    sent = openai_server.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer test-key"
    assert sent.json["model"] == "fake-model-1"
    assert sent.json["messages"] == [{"role": m.role, "content": m.content} for m in MESSAGES]
    assert sent.json["temperature"] == 0.4 and sent.json["max_tokens"] == 300
    assert "response_format" not in sent.json and "stream" not in sent.json
    assert TutorResponse.model_validate_json(completion.text).content.text_blocks[0].content == "Hello"
    assert (completion.finish_reason, completion.tokens_in, completion.tokens_out) == ("stop", 111, 22)
    assert completion.model == "fake-model-1" and completion.refusal is None


def test_no_key_means_no_authorization_header(openai_server):
    openai_server.script(wire.openai_reply(wire.tutor_json()))
    complete(settings_for(openai_server, api_key=None))
    assert "authorization" not in openai_server.requests[0].headers


def test_json_object_strategy_asks_for_json_object(openai_server):
    openai_server.script(wire.openai_reply(wire.tutor_json()))
    complete(settings_for(openai_server), request("json_object"))
    assert openai_server.requests[0].json["response_format"] == {"type": "json_object"}


def test_json_schema_strategy_sends_a_strict_schema_our_replies_satisfy(openai_server):
    openai_server.script(wire.openai_reply(wire.tutor_json()))
    complete(settings_for(openai_server), request("json_schema"))
    fmt = openai_server.requests[0].json["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "tutor_response" and fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    # What a strict-mode model emits: every key present, optional ones null.
    reply = {
        "content": {
            "text_blocks": [{"type": "paragraph", "content": "Hi", "level": None}],
            "forms": None, "media": None, "citations": None,
            "next_step": {"prompt": None, "suggestions": ["Go on"], "can_skip": None},
        },
        "meta": {"response_type": "conversational", "progress": None, "module_state": None, "emotion": None},
    }
    jsonschema.validate(reply, schema)
    TutorResponse.model_validate(reply)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**reply, "extra": 1}, schema)


def test_refusal_field_is_reported(openai_server):
    openai_server.script(wire.openai_reply(None, refusal="I can't help with that."))
    completion = complete(settings_for(openai_server))
    assert completion.text == "" and completion.refusal == "I can't help with that."


def test_length_finish_reason_is_reported(openai_server):
    openai_server.script(wire.openai_reply('{"content": {"text_blocks": [', finish_reason="length"))
    assert complete(settings_for(openai_server)).finish_reason == "length"


def test_stream_yields_deltas_and_assembles_completion(openai_server):
    text = wire.tutor_json("Streaming works")
    openai_server.script(wire.openai_stream(text, pieces=5, tokens=(90, 30)))

    async def go():
        provider = OpenAIProvider(settings_for(openai_server))
        stream = provider.stream(request("json_object"))
        deltas = [d async for d in stream]
        await provider.aclose()
        return deltas, stream.completion

    deltas, completion = asyncio.run(go())
    assert len(deltas) == 5 and "".join(deltas) == text
    assert completion.text == text and completion.finish_reason == "stop"
    assert (completion.tokens_in, completion.tokens_out) == (90, 30)
    sent = openai_server.requests[0].json
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert openai_server.requests[0].headers["accept"] == "text/event-stream"


@pytest.mark.parametrize("strategy", ["json_object", "json_schema"])
def test_streamed_body_carries_the_same_response_format(openai_server, strategy):
    # Issue 9 suspected response_format went missing when streaming; it must not.
    openai_server.script(wire.openai_reply(wire.tutor_json()), wire.openai_stream(wire.tutor_json()))
    complete(settings_for(openai_server), request(strategy))
    complete(settings_for(openai_server, stream=True), request(strategy))
    whole, streamed = (r.json for r in openai_server.requests)
    assert streamed["stream"] is True and "stream" not in whole
    assert streamed["response_format"] == whole["response_format"]
    assert streamed["response_format"]["type"] == strategy


def test_stream_setting_makes_complete_stream(openai_server):
    openai_server.script(wire.openai_stream(wire.tutor_json(), finish_reason="length"))
    completion = complete(settings_for(openai_server, stream=True))
    assert openai_server.requests[0].json["stream"] is True
    assert completion.finish_reason == "length" and completion.extra.get("streamed")


def test_stream_refusal_deltas(openai_server):
    openai_server.script(wire.openai_stream("", refusal="I cannot do that."))
    completion = complete(settings_for(openai_server, stream=True))
    assert completion.refusal == "I cannot do that." and completion.text == ""


def test_server_ignoring_stream_flag_still_works(openai_server):
    openai_server.script(wire.openai_reply(wire.tutor_json("whole body")))
    completion = complete(settings_for(openai_server, stream=True))
    assert "whole body" in completion.text and completion.tokens_in == 120


def test_stream_cut_short_is_a_connection_failure(openai_server):
    openai_server.script(wire.openai_stream(wire.tutor_json(), finish_reason=None, tokens=None, done=False))
    with pytest.raises(ConnectionFailed):
        complete(settings_for(openai_server, stream=True))


def test_error_chunk_in_stream_is_a_server_error(openai_server):
    chunks = wire.openai_stream_chunks("{", done=False, finish_reason=None, tokens=None)
    chunks.append('data: {"error": {"message": "overloaded", "type": "server_error"}}\n\n')
    openai_server.script(Scripted(200, sse_chunks=chunks))
    with pytest.raises(ServerError, match="overloaded"):
        complete(settings_for(openai_server, stream=True))


@pytest.mark.parametrize(
    ("status", "exc", "hint"),
    [
        (401, AuthError, "The model endpoint rejected the API key (401): check TUTOR_LLM_API_KEY"),
        (403, AuthError, "TUTOR_LLM_API_KEY"),
        (404, NotFound, "TUTOR_LLM_MODEL=fake-model-1"),
        (400, BadRequest, "TUTOR_LLM_STRATEGY=prompt"),
        (503, ServerError, "503"),
    ],
)
def test_error_statuses_map_to_exceptions_with_operator_hints(openai_server, status, exc, hint):
    openai_server.script(wire.error(status, "nope"))
    with pytest.raises(exc) as info:
        complete(settings_for(openai_server, strategy="json_schema"))
    assert hint in info.value.operator_message
    assert info.value.status == status


def test_a_400_never_suggests_the_strategy_already_in_use(openai_server):
    openai_server.script(wire.error(400, "nope"))
    with pytest.raises(BadRequest) as info:
        complete(settings_for(openai_server, strategy="prompt"))
    assert "TUTOR_LLM_STRATEGY=prompt" not in info.value.operator_message


def test_wrong_base_url_is_a_not_found_naming_the_variable(openai_server):
    settings = settings_for(openai_server, base_url=f"http://127.0.0.1:{openai_server.port}/api")
    with pytest.raises(NotFound) as info:
        complete(settings)
    assert "TUTOR_LLM_BASE_URL" in info.value.operator_message


@pytest.mark.parametrize(("header", "seconds"), [("3", 3.0), ("0.25", 0.25)])
def test_rate_limit_carries_retry_after(openai_server, header, seconds):
    openai_server.script(wire.error(429, "slow down", retry_after=header))
    with pytest.raises(RateLimited) as info:
        complete(settings_for(openai_server))
    assert info.value.retry_after == seconds and info.value.retryable


def test_non_json_body_is_a_bad_response(openai_server):
    openai_server.script(Scripted(200, b"<html>gateway</html>", {"content-type": "text/html"}))
    with pytest.raises(BadResponse):
        complete(settings_for(openai_server))


def test_missing_choices_is_a_bad_response(openai_server):
    openai_server.script(Scripted(200, {"object": "chat.completion", "choices": []}))
    with pytest.raises(BadResponse):
        complete(settings_for(openai_server))


def test_slow_server_times_out(openai_server):
    openai_server.script(Scripted(200, {"choices": []}, delay_s=1.0))
    with pytest.raises(RequestTimeout) as info:
        complete(settings_for(openai_server, timeout_s=0.1))
    assert "TUTOR_LLM_TIMEOUT" in info.value.operator_message


def test_stream_that_stalls_times_out(openai_server):
    openai_server.script(wire.openai_stream(wire.tutor_json(), stall_after=2, delay_s=1.0))
    with pytest.raises(RequestTimeout):
        complete(settings_for(openai_server, timeout_s=0.1, stream=True))


def test_dropped_connection_is_a_connection_failure(openai_server):
    openai_server.script(Scripted(drop=True))
    with pytest.raises(ConnectionFailed):
        complete(settings_for(openai_server))


def test_nothing_listening_is_a_connection_failure_naming_the_url(openai_server):
    with socket.socket() as s:  # a port that was free a moment ago
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings = settings_for(openai_server, base_url=f"http://127.0.0.1:{port}/v1")
    with pytest.raises(ConnectionFailed) as info:
        complete(settings)
    assert "is the server running" in info.value.operator_message
    assert json.dumps(info.value.operator_message)  # plain text, loggable


def test_one_provider_serves_several_event_loops(openai_server):
    # CLIs and tests drive one provider from successive asyncio.run() calls.
    openai_server.script(wire.openai_reply(wire.tutor_json("one")), wire.openai_reply(wire.tutor_json("two")))
    provider = OpenAIProvider(settings_for(openai_server))
    first = asyncio.run(provider.complete(request()))
    second = asyncio.run(provider.complete(request()))
    asyncio.run(provider.aclose())
    assert "one" in first.text and "two" in second.text


def test_json_schema_sent_to_a_local_server_is_bounded_to_fit_the_token_limit(openai_server):
    from tutor.llm.schema import worst_case_tokens

    openai_server.script(wire.openai_reply(wire.tutor_json()))
    settings = settings_for(openai_server, strategy="json_schema", max_tokens=500)
    complete(settings, CompletionRequest(list(MESSAGES), 0.7, 500, "json_schema"))
    schema = openai_server.requests[0].json["response_format"]["json_schema"]["schema"]
    text_blocks = schema["properties"]["content"]["properties"]["text_blocks"]
    assert text_blocks["maxItems"] >= 1
    assert worst_case_tokens(schema) <= 500  # a grammar from it must end before the limit
