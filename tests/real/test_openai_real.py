"""Our OpenAI-compatible backend against llama.cpp's server: what a real server streams and
returns for each strategy, with streaming on and off. Structure only, never wording."""

from __future__ import annotations

import asyncio
import json
import time

import jsonschema
import pytest

from tutor.llm import ChatMessage, Completion, CompletionRequest
from tutor.llm.openai import OpenAIProvider

pytestmark = pytest.mark.real_model

STRATEGIES = ("prompt", "json_object", "json_schema")
SYSTEM = (
    "You are a tutor. Reply with ONE JSON object: "
    '{"content": {"text_blocks": [{"type": "paragraph", "content": "..."}]}, '
    '"meta": {"response_type": "educational"}}'
)
# A request a base model answers in prose when nothing constrains it: only the server's
# grammar (response_format) can make the reply JSON.
PROSE_BAIT = [ChatMessage("system", "You are a poet."), ChatMessage("user", "Write a short poem about the sea.")]


def request(strategy: str = "prompt", *, messages=None, max_tokens: int = 120, temperature: float = 0.0):
    messages = messages or [ChatMessage("system", SYSTEM), ChatMessage("user", "What is anxiety?")]
    return CompletionRequest(messages=list(messages), temperature=temperature, max_tokens=max_tokens,
                             strategy=strategy)


def run(coro_fn):
    return asyncio.run(coro_fn())


def complete(settings, req: CompletionRequest) -> Completion:
    async def go():
        provider = OpenAIProvider(settings)
        try:
            return await provider.complete(req)
        finally:
            await provider.aclose()

    return run(go)


def streamed(settings, req: CompletionRequest) -> tuple[list[str], Completion]:
    async def go():
        provider = OpenAIProvider(settings)
        try:
            stream = provider.stream(req)
            deltas = [delta async for delta in stream]
            return deltas, stream.completion
        finally:
            await provider.aclose()

    return run(go)


def sent_schema(settings, req: CompletionRequest) -> dict:
    """The JSON Schema our request body gives the server for json_schema."""
    return OpenAIProvider(settings).build_body(req)["response_format"]["json_schema"]["schema"]


def assert_constrained_json(completion: Completion, req: CompletionRequest, settings) -> None:
    """What a grammar guarantees: one JSON object (whole when the model stopped by itself, a
    prefix of one when it hit max_tokens), valid against the schema we sent for json_schema."""
    text = completion.text.strip()
    assert text.startswith("{"), text[:200]
    if completion.finish_reason == "stop":
        data = json.loads(text)
        assert isinstance(data, dict)
        if req.strategy == "json_schema":
            jsonschema.validate(data, sent_schema(settings, req))


def test_stream_yields_several_deltas_then_a_completion(llama):
    deltas, completion = streamed(llama.settings(), request(max_tokens=48))
    assert len(deltas) >= 5  # token by token, not one lump at the end
    assert all(isinstance(d, str) and d for d in deltas)
    assert completion.text == "".join(deltas)
    assert completion.finish_reason in ("stop", "length")
    assert completion.tokens_in > 0 and 0 < completion.tokens_out <= 48
    assert completion.extra.get("streamed") and completion.model


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_complete_each_strategy(llama, strategy, stream):
    settings, req = llama.settings(stream=stream), request(strategy)
    completion = complete(settings, req)
    assert completion.text.strip()
    assert completion.finish_reason in ("stop", "length")
    assert completion.tokens_in > 0 and 0 < completion.tokens_out <= 120
    assert bool(completion.extra.get("streamed")) is stream
    if strategy != "prompt":
        assert_constrained_json(completion, req, settings)


@pytest.mark.parametrize("strategy", ["json_object", "json_schema"])
def test_response_format_constrains_streamed_replies_too(llama, strategy):
    """Issue 9 saw prose around a fragment with json_schema and streaming on. The server
    applies response_format to streamed requests exactly as to whole ones: at temperature 0
    the two replies are the same text, and JSON even where the model would write prose."""
    req = request(strategy, messages=PROSE_BAIT, max_tokens=80)
    whole = complete(llama.settings(stream=False), req)
    deltas, streamed_completion = streamed(llama.settings(), req)
    for completion in (whole, streamed_completion):
        assert_constrained_json(completion, req, llama.settings())
    assert streamed_completion.text == whole.text
    assert len(deltas) > 1


def test_without_response_format_the_same_request_is_prose(llama):
    # The control for the test above: the bait really does produce prose unconstrained.
    completion = complete(llama.settings(), request("prompt", messages=PROSE_BAIT, max_tokens=40))
    assert not completion.text.strip().startswith("{")


def test_closing_a_stream_early_stops_the_server_generating(llama):
    """What a Stop button relies on: once we stop reading and close the connection, the
    server cancels the generation at once instead of writing to max_tokens for nobody."""
    long_poem = [ChatMessage("system", "You are a poet."), ChatMessage("user", "Write a very long poem about the sea.")]

    async def go() -> bool:
        # No stop sequences: a chat-template marker the model writes would end the poem
        # before we close the stream, and this is about our closing it.
        provider = OpenAIProvider(llama.settings(chat_template="none"))
        try:
            stream = provider.stream(request(messages=long_poem, max_tokens=2000, temperature=0.7))
            read = 0
            async for _delta in stream:
                read += 1
                if read == 10:
                    break
            busy = llama.get("/slots")[1][0]["is_processing"]
            await stream.aclose()
            return busy
        finally:
            await provider.aclose()

    assert run(go)  # the server was still writing when we stopped reading
    deadline = time.monotonic() + 2.0
    while llama.get("/slots")[1][0]["is_processing"]:
        assert time.monotonic() < deadline, "the server kept generating after the stream was closed"
        time.sleep(0.05)
