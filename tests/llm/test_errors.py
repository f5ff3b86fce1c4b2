"""Error bodies as real servers send them, mapped to the right exception and operator hint;
no key or password in any error text we build."""

from __future__ import annotations

import asyncio
import socket

import pytest

from tests.fakes import wire
from tests.fakes.servers import Scripted, settings_for
from tutor.llm import BadRequest, ChatMessage, CompletionRequest, LLMSettings, ServerError, make_provider
from tutor.llm.errors import ContextOverflow, LLMError, RoleOrderRejected, error_for_status
from tutor.llm.redact import scrub

LLAMA_OVERFLOW = {"error": {"code": 400, "message": "request (9012 tokens) exceeds the available context size "
                            "(8192 tokens), try increasing it", "type": "exceed_context_size_error",
                            "n_prompt_tokens": 9012, "n_ctx": 8192}}
OPENAI_OVERFLOW = {"error": {"message": "This model's maximum context length is 128000 tokens. However, your "
                             "messages resulted in 130512 tokens. Please reduce the length of the messages.",
                             "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}
VLLM_OVERFLOW = {"object": "error", "type": "BadRequestError", "code": 400,
                 "message": "This model's maximum context length is 4096 tokens. However, you requested 5000 "
                            "tokens (3000 in the messages, 2000 in the completion). Please reduce the length."}
ANTHROPIC_OVERFLOW = {"type": "error", "error": {"type": "invalid_request_error",
                                                 "message": "prompt is too long: 210000 tokens > 200000 maximum"}}
MISTRAL_TEMPLATE = {"error": {"code": 400, "type": "invalid_request_error", "message":
                              "Conversation roles must alternate user/assistant/user/assistant/..."}}

REQUEST = CompletionRequest([ChatMessage("system", "s"), ChatMessage("user", "hi")], 0.7, 100)


def call(settings) -> LLMError:
    async def go():
        provider = make_provider(settings)
        try:
            await provider.complete(REQUEST)
        finally:
            await provider.aclose()

    with pytest.raises(LLMError) as info:
        asyncio.run(go())
    return info.value


@pytest.mark.parametrize(
    ("kind", "body", "window", "prompt"),
    [
        ("openai", LLAMA_OVERFLOW, 8192, 9012),
        ("openai", OPENAI_OVERFLOW, 128000, 130512),
        ("openai", VLLM_OVERFLOW, 4096, 3000),
        ("anthropic", ANTHROPIC_OVERFLOW, 200000, 210000),
    ],
)
def test_a_context_size_refusal_is_a_context_overflow_with_the_servers_figures(
        request, kind, body, window, prompt):
    server = request.getfixturevalue(f"{kind}_server")
    server.script(Scripted(400, body))
    error = call(settings_for(server, strategy="json_schema"))
    assert isinstance(error, ContextOverflow) and isinstance(error, BadRequest)
    assert not error.retryable and len(server.requests) == 1  # the transport does not resend it
    assert (error.context_window, error.prompt_tokens) == (window, prompt)
    hint = error.operator_message
    assert "TUTOR_LLM_CONTEXT" in hint and "llama-server -c" in hint and "longer than the model's context" in hint
    assert "TUTOR_LLM_STRATEGY" not in hint


def test_an_old_llama_cpp_overflow_without_figures_is_still_recognised():
    body = '{"error":{"code":400,"message":"the request exceeds the available context size. try increasing ' \
           'the context size or enable context shift","type":"invalid_request_error"}}'
    error = error_for_status(400, {}, body, base_url="http://x/v1", model="m")
    assert isinstance(error, ContextOverflow) and error.context_window is None


def test_role_alternation_gets_its_own_hint(openai_server):
    openai_server.script(Scripted(400, MISTRAL_TEMPLATE))
    error = call(settings_for(openai_server))
    assert isinstance(error, RoleOrderRejected) and not error.retryable
    assert "alternate" in error.operator_message and "TUTOR_LLM_STRATEGY" not in error.operator_message


def test_a_template_error_sent_as_500_is_not_retried(openai_server):
    openai_server.script(Scripted(500, MISTRAL_TEMPLATE), Scripted(500, MISTRAL_TEMPLATE))
    error = call(settings_for(openai_server))
    assert isinstance(error, RoleOrderRejected) and len(openai_server.requests) == 1


@pytest.mark.parametrize(
    ("strategy", "advised"),
    [("json_schema", True), ("json_object", True), (None, True), ("prompt", False)],
)
def test_a_400_advises_the_prompt_strategy_only_when_it_is_not_already_in_use(strategy, advised):
    body = '{"error": {"message": "response_format is not supported", "type": "invalid_request_error"}}'
    error = error_for_status(400, {}, body, base_url="http://x/v1", model="m", strategy=strategy)
    assert type(error) is BadRequest
    assert ("try TUTOR_LLM_STRATEGY=prompt" in error.operator_message) is advised
    if strategy == "prompt":
        assert "TUTOR_LLM_MODEL=m" in error.operator_message


def test_plain_server_errors_stay_retryable():
    error = error_for_status(503, {}, '{"error": {"message": "loading model"}}', base_url="u", model="m")
    assert isinstance(error, ServerError) and error.retryable


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Incorrect API key provided: sk-proj-abcdef123456. You can find your key", "abcdef123456"),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload", "eyJhbGci"),
        ("bearer sk-ant-api03-XYZXYZXYZXYZ rejected", "XYZXYZXYZ"),
        ("could not reach http://tutor:hunter2@10.0.0.5:8080/v1", "hunter2"),
        ('{"api_key": "local-secret-99"}', "local-secret-99"),
        ("GET https://gw.example/v1/models?key=AIzaSyD-123456&alt=json", "AIzaSyD-123456"),
        ("x-api-key: abc123def456", "abc123def456"),
    ],
)
def test_scrub_removes_secrets_and_keeps_the_rest(text, secret):
    cleaned = scrub(text)
    assert secret not in cleaned and "***" in cleaned
    assert scrub("request (9012 tokens) exceeds the available context size") == \
        "request (9012 tokens) exceeds the available context size"


def test_upstream_error_text_is_scrubbed_before_it_reaches_the_message_or_hint(openai_server):
    openai_server.script(wire.error(403, "key sk-live-abcdefghijk may not use this model"))
    error = call(settings_for(openai_server))
    assert "abcdefghijk" not in error.message and "abcdefghijk" not in error.operator_message


def test_a_password_in_the_base_url_never_reaches_the_hint():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # a refused connection: the hint names the base URL
    settings = LLMSettings(provider="openai", base_url=f"http://tutor:hunter2@127.0.0.1:{port}/v1", model="m",
                           max_retries=0, timeout_s=2.0)
    error = call(settings)
    assert "hunter2" not in error.message and "hunter2" not in error.operator_message
    assert f"127.0.0.1:{port}" in error.operator_message
