"""Builders for provider answers in each wire format (JSON bodies, SSE chunks, error bodies)."""

from __future__ import annotations

import json
from typing import Any

from tests.fakes.servers import Scripted

FAKE_MODEL = "fake-model-1"


def tutor_reply(text: str = "Anxiety is the body's alarm system.", **meta: Any) -> dict[str, Any]:
    """A small valid RESPONSE_SCHEMA object."""
    return {
        "content": {
            "text_blocks": [{"type": "paragraph", "content": text}],
            "next_step": {"prompt": "Shall we go on?", "suggestions": ["Yes, go on"]},
        },
        "meta": {"response_type": "educational", "emotion": "informative", **meta},
    }


def tutor_json(text: str = "Anxiety is the body's alarm system.") -> str:
    return json.dumps(tutor_reply(text))


def _split(text: str, pieces: int) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // max(1, pieces)))
    return [text[i : i + size] for i in range(0, len(text), size)]


def _sse(data: Any, event: str | None = None) -> str:
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n"


# --- OpenAI Chat Completions -------------------------------------------------------------


def openai_reply(
    content: str | None,
    *,
    finish_reason: str = "stop",
    tokens: tuple[int, int] = (120, 45),
    refusal: str | None = None,
    usage: bool = True,
    model: str = FAKE_MODEL,
) -> Scripted:
    body: dict[str, Any] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": refusal},
                "finish_reason": finish_reason,
            }
        ],
    }
    if usage:
        body["usage"] = {"prompt_tokens": tokens[0], "completion_tokens": tokens[1],
                         "total_tokens": sum(tokens)}
    return Scripted(200, body)


def openai_stream_chunks(
    content: str,
    *,
    pieces: int = 4,
    finish_reason: str | None = "stop",
    tokens: tuple[int, int] | None = (120, 45),
    refusal: str | None = None,
    done: bool = True,
    model: str = FAKE_MODEL,
) -> list[str]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return _sse({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": model,
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": piece}) for piece in _split(content, pieces)]
    if refusal:
        chunks += [chunk({"refusal": piece}) for piece in _split(refusal, 2)]
    if finish_reason:
        chunks.append(chunk({}, finish_reason))
    if tokens:
        chunks.append(_sse({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": model,
                            "choices": [], "usage": {"prompt_tokens": tokens[0],
                                                     "completion_tokens": tokens[1]}}))
    if done:
        chunks.append("data: [DONE]\n\n")
    return chunks


def openai_stream(content: str, **kw: Any) -> Scripted:
    delays = {k: kw.pop(k) for k in ("chunk_delay_s", "stall_after", "delay_s", "byte_delay_s") if k in kw}
    return Scripted(200, sse_chunks=openai_stream_chunks(content, **kw), **delays)


def error(status: int, message: str = "boom", *, kind: str = "openai", retry_after: str | None = None,
          err_type: str = "error") -> Scripted:
    headers = {"retry-after": retry_after} if retry_after is not None else {}
    if kind == "anthropic":
        body: dict[str, Any] = {"type": "error", "error": {"type": err_type, "message": message}}
    else:
        body = {"error": {"message": message, "type": err_type, "code": None}}
    return Scripted(status, body, headers)


# --- Anthropic Messages ------------------------------------------------------------------


def anthropic_tool_reply(
    tool_input: dict[str, Any],
    *,
    stop_reason: str = "tool_use",
    tokens: tuple[int, int] = (150, 60),
    model: str = FAKE_MODEL,
) -> Scripted:
    return Scripted(200, {
        "id": "msg_fake", "type": "message", "role": "assistant", "model": model,
        "content": [{"type": "tool_use", "id": "toolu_fake", "name": "tutor_response", "input": tool_input}],
        "stop_reason": stop_reason, "stop_sequence": None,
        "usage": {"input_tokens": tokens[0], "output_tokens": tokens[1]},
    })


def anthropic_text_reply(
    text: str, *, stop_reason: str = "end_turn", tokens: tuple[int, int] = (150, 60), model: str = FAKE_MODEL
) -> Scripted:
    return Scripted(200, {
        "id": "msg_fake", "type": "message", "role": "assistant", "model": model,
        "content": [{"type": "text", "text": text}] if text else [],
        "stop_reason": stop_reason, "stop_sequence": None,
        "usage": {"input_tokens": tokens[0], "output_tokens": tokens[1]},
    })


def anthropic_stream_chunks(
    json_text: str | None = None,
    *,
    text: str | None = None,
    pieces: int = 4,
    stop_reason: str = "tool_use",
    tokens: tuple[int, int] = (150, 60),
    stop: bool = True,
    model: str = FAKE_MODEL,
) -> list[str]:
    """A tool_use block streamed as input_json_delta (json_text), or a text block (text)."""
    chunks = [
        _sse({"type": "message_start", "message": {
            "id": "msg_fake", "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "usage": {"input_tokens": tokens[0], "output_tokens": 1}}}, "message_start"),
    ]
    if json_text is not None:
        chunks.append(_sse({"type": "content_block_start", "index": 0, "content_block": {
            "type": "tool_use", "id": "toolu_fake", "name": "tutor_response", "input": {}}},
            "content_block_start"))
        chunks.append(_sse({"type": "ping"}, "ping"))
        chunks += [_sse({"type": "content_block_delta", "index": 0,
                         "delta": {"type": "input_json_delta", "partial_json": p}}, "content_block_delta")
                   for p in _split(json_text, pieces)]
    else:
        chunks.append(_sse({"type": "content_block_start", "index": 0,
                            "content_block": {"type": "text", "text": ""}}, "content_block_start"))
        chunks += [_sse({"type": "content_block_delta", "index": 0,
                         "delta": {"type": "text_delta", "text": p}}, "content_block_delta")
                   for p in _split(text or "", pieces)]
    chunks.append(_sse({"type": "content_block_stop", "index": 0}, "content_block_stop"))
    chunks.append(_sse({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                        "usage": {"output_tokens": tokens[1]}}, "message_delta"))
    if stop:
        chunks.append(_sse({"type": "message_stop"}, "message_stop"))
    return chunks


def anthropic_stream(json_text: str | None = None, **kw: Any) -> Scripted:
    delays = {k: kw.pop(k) for k in ("chunk_delay_s", "stall_after", "delay_s", "byte_delay_s") if k in kw}
    return Scripted(200, sse_chunks=anthropic_stream_chunks(json_text, **kw), **delays)
