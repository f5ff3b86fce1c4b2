"""The context window: a setting wins; else llama.cpp's /props is asked once; a server that
cannot say leaves it unknown and nothing raises. The server here is a real loopback HTTP
server answering llama.cpp's own endpoints (/props, /tokenize, /apply-template)."""

from __future__ import annotations

import asyncio
import socket
import time
from dataclasses import replace

import httpx
import pytest

from tests.fakes.llama_endpoints import LlamaEndpoints
from tutor.llm import ChatMessage, LLMSettings
from tutor.llm import context as ctx
from tutor.llm.budget import MESSAGE_OVERHEAD_TOKENS


@pytest.fixture(autouse=True)
def fresh_cache():
    ctx.forget()
    yield
    ctx.forget()


def window(settings: LLMSettings, client: httpx.AsyncClient | None = None) -> int | None:
    return asyncio.run(ctx.context_window(settings, client))


def props_asks(server: LlamaEndpoints) -> int:
    return sum(1 for method, path, _, _ in server.requests if (method, path) == ("GET", "/props"))


def test_the_setting_wins_and_nothing_is_asked():
    with LlamaEndpoints() as server:
        assert window(server.settings(context_window=4096)) == 4096
        assert server.requests == []


def test_llama_cpp_props_is_asked_once_per_server_at_its_root():
    with LlamaEndpoints({"default_generation_settings": {"n_ctx": 8192}}) as server:
        settings = server.settings()

        async def twice():
            async with httpx.AsyncClient() as client:
                return [await ctx.context_window(settings, client) for _ in range(2)]

        assert asyncio.run(twice()) == [8192, 8192]
        assert window(settings) == 8192  # a new event loop, still cached
        assert props_asks(server) == 1 and server.requests[0][1] == "/props"  # not /v1/props


def test_top_level_n_ctx_is_accepted_and_a_key_is_sent():
    with LlamaEndpoints({"n_ctx": 2048}) as server:
        assert window(server.settings(api_key="sk-local-key")) == 2048
        assert server.requests[0][2]["authorization"] == "Bearer sk-local-key"


@pytest.mark.parametrize(
    ("props", "status"),
    [
        ({"error": {"message": "File Not Found"}}, 404),  # vLLM, Ollama: no such endpoint
        (b"<html>hello</html>", 200),  # a proxy's page
        ({"default_generation_settings": {"n_ctx": "lots"}}, 200),
        ({"default_generation_settings": {}}, 200),
        ([8192], 200),
    ],
)
def test_a_server_that_does_not_say_leaves_the_window_unknown_and_is_not_asked_again(props, status):
    with LlamaEndpoints(props, status) as server:
        settings = server.settings()
        assert window(settings) is None and window(settings) is None
        assert props_asks(server) == 1


def test_a_slow_server_is_given_up_on_quickly(monkeypatch):
    monkeypatch.setattr(ctx, "ASK_TIMEOUT_S", 0.2)
    with LlamaEndpoints(delay_s=1.0) as server:
        started = time.monotonic()
        assert window(server.settings()) is None
        assert time.monotonic() - started < 0.9


def test_no_server_means_unknown_and_it_is_asked_again_later():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    settings = LLMSettings(provider="openai", base_url=f"http://127.0.0.1:{port}/v1", model="m")
    assert window(settings) is None
    assert ctx._windows[f"http://127.0.0.1:{port}"][1] != float("inf")  # a transient answer expires


def test_a_server_error_is_asked_again_after_a_while(monkeypatch):
    with LlamaEndpoints({"error": {"message": "loading model"}}, 503) as server:
        settings = server.settings()
        assert window(settings) is None and window(settings) is None
        assert props_asks(server) == 1  # not within the minute
        ctx.forget()
        monkeypatch.setattr(ctx, "RETRY_UNKNOWN_AFTER_S", 0.0)
        assert window(settings) is None and window(settings) is None
        assert props_asks(server) == 3  # after it, again
        server.status, server.props = 200, {"default_generation_settings": {"n_ctx": 4096}}
        assert window(settings) == 4096 and window(settings) == 4096
        assert props_asks(server) == 4  # a real answer is kept


def test_other_providers_and_hosted_apis_are_not_asked():
    with LlamaEndpoints() as server:
        assert window(replace(server.settings(), provider="anthropic")) is None
        assert window(LLMSettings()) is None  # built-in
        assert server.requests == []
    hosted = LLMSettings(provider="openai", base_url="https://api.openai.com/v1", model="gpt-4o-mini")
    assert window(hosted) is None  # returns at once, no network


def test_a_window_named_in_a_refusal_is_remembered():
    with LlamaEndpoints({"error": {"message": "nope"}}, 404) as server:
        settings = server.settings()
        assert window(settings) is None
        ctx.learn(settings, 6144)
        assert window(settings) == 6144 and props_asks(server) == 1


def test_server_root_drops_only_a_trailing_v1():
    assert ctx.server_root("http://127.0.0.1:8080/v1") == "http://127.0.0.1:8080"
    assert ctx.server_root("http://127.0.0.1:8080/v1/") == "http://127.0.0.1:8080"
    assert ctx.server_root("http://proxy/llama") == "http://proxy/llama"


def test_count_tokens_uses_the_servers_tokenizer_and_template():
    messages = [ChatMessage("system", "be kind"), ChatMessage("user", "what is anxiety")]
    with LlamaEndpoints() as server:
        settings = server.settings()
        assert asyncio.run(ctx.count_tokens(settings, None, "one two three")) == 3
        # the fake tokenizer counts words: the template's markers join words across messages
        templated = "<|im_start|>system\nbe kind<|im_end|>\n<|im_start|>user\nwhat is anxiety<|im_end|>\n"
        assert asyncio.run(ctx.count_tokens(settings, None, messages)) == len(templated.split())
        server.apply_template = False  # an older server: contents plus our overhead per message
        assert asyncio.run(ctx.count_tokens(settings, None, messages)) == 5 + 2 * MESSAGE_OVERHEAD_TOKENS
    assert asyncio.run(ctx.count_tokens(LLMSettings(), None, "x")) is None
