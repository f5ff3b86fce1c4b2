"""The model client against llama.cpp's server: the chat template's end markers it reveals are
sent as stop sequences and never reach a free-text reply (the prompt strategy; json_object
gets none: the server holds it to a JSON grammar), and a kept-alive connection the server
hung up while the client's event loop was busy is not reused (the server closes idle
connections after 5 s). Structure only, never wording."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from tutor.llm import ChatMessage, CompletionRequest
from tutor.llm._transport import AiohttpTransport
from tutor.llm.context import context_window
from tutor.llm.markers import END_MARKERS, START_MARKERS
from tutor.llm.openai import OpenAIProvider

pytestmark = pytest.mark.real_model

SYSTEM = ('You are a tutor. Reply with ONE JSON object: {"content": {"text_blocks": [{"type": "paragraph", '
          '"content": "..."}]}, "meta": {"response_type": "educational"}}')
SERVER_KEEP_ALIVE_S = 5.0  # llama-server (cpp-httplib) closes a connection idle this long


def request(strategy: str, question: str = "What is anxiety?") -> CompletionRequest:
    return CompletionRequest([ChatMessage("system", SYSTEM), ChatMessage("user", question)], 0.9, 80, strategy)


def test_the_servers_template_markers_are_stop_sequences_and_never_reach_a_reply(llama):
    props = llama.props()
    template_markers = [m for m in (*END_MARKERS, *START_MARKERS) if m in props.get("chat_template", "")]
    assert template_markers, "llama-server reports a chat template with end-of-turn markers"

    async def go(strategy: str, stream: bool):
        settings = llama.settings(strategy=strategy, stream=stream)
        provider = OpenAIProvider(settings)
        try:
            await context_window(settings, provider.client)  # the policy asks /props before a turn
            body = provider.build_body(request(strategy))
            completions = [await provider.complete(request(strategy, q))
                           for q in ("What is anxiety?", "How do I breathe slowly?")]
            return body, completions
        finally:
            await provider.aclose()

    for strategy, stream in (("prompt", False), ("prompt", True)):
        body, completions = asyncio.run(go(strategy, stream))
        assert set(template_markers) <= set(body["stop"])
        for completion in completions:  # may be empty: the tiny model may end its turn at once
            assert not [m for m in (*END_MARKERS, *START_MARKERS) if m in completion.text], completion.text
    # json_object: the server's JSON grammar ends the reply; a stop could only cut a string.
    body, completions = asyncio.run(go("json_object", True))
    assert "stop" not in body
    for completion in completions:
        assert completion.text.lstrip().startswith("{"), completion.text


def test_a_connection_the_server_hung_up_while_the_loop_was_busy_is_not_used_again(llama):
    settings = llama.settings(strategy="json_object", max_retries=0)
    # A client keeping connections longer than the server does (ours keeps them 5 s, as long
    # as llama-server: each side's clock starts at a slightly different moment, so the same
    # race happens at the edge; a longer keep-alive makes it happen every time).
    limits = httpx.Limits(max_connections=10, max_keepalive_connections=10, keepalive_expiry=60.0)

    async def go():
        client = httpx.AsyncClient(transport=AiohttpTransport(limits), timeout=settings.timeout_s)
        provider = OpenAIProvider(settings, client=client)
        try:
            await provider.complete(request("json_object"))
            await asyncio.sleep(SERVER_KEEP_ALIVE_S - 0.5)
            time.sleep(1.5)  # the event loop is busy when the server hangs up
            return await provider.complete(request("json_object", "How do I breathe slowly?"))
        finally:
            await client.aclose()

    # No ConnectionFailed ("Server disconnected"): the hung-up connection was left, a new one used.
    assert asyncio.run(go()).finish_reason in ("stop", "length")
