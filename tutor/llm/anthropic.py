"""Anthropic Messages API: the reply is the input of one forced tool call.

Strategies map as: `prompt` asks for JSON in plain text (seed 001's A); `json_object` forces
the `tutor_response` tool with an open object schema (B: JSON guaranteed, shape from the
prompt); `json_schema` forces it with the full RESPONSE_SCHEMA (C).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from tutor.llm._http import WHOLE_BODY_EVENT, HTTPProvider, loads_event
from tutor.llm.base import ChatMessage, Completion, CompletionRequest, Contract
from tutor.llm.config import LLMSettings
from tutor.llm.errors import BadResponse, ConnectionFailed, ServerError, error_detail
from tutor.llm.schema import SCHEMA_NAME, tool_schema

PATH = "/v1/messages"
TOOL_DESCRIPTION = "Send your reply to the learner: one structured tutor response."
# The Messages API needs at least one user message, and the first must be the user's.
OPENING_USER_TEXT = "(The learner has opened the conversation. Please begin.)"
STOP_REASONS = {"end_turn": "stop", "tool_use": "stop", "stop_sequence": "stop", "max_tokens": "length"}


def tool_spec(strategy: str, contract: Contract | None = None) -> dict[str, Any] | None:
    """The forced tool whose input is the reply: RESPONSE_SCHEMA, or another contract's."""
    if strategy == "json_object":
        schema: dict[str, Any] = {"type": "object"}
    elif strategy == "json_schema":
        schema = contract.schema if contract is not None else tool_schema()
    else:
        return None
    if contract is not None:
        return {"name": contract.name, "description": f"Send your answer: one {contract.name} object.",
                "input_schema": schema}
    return {"name": SCHEMA_NAME, "description": TOOL_DESCRIPTION, "input_schema": schema}


def system_blocks(messages: list[ChatMessage]) -> list[dict[str, Any]] | None:
    """The system text as blocks, with a prompt-cache breakpoint (`cache_control`) after
    the part that is the same on every turn (`ChatMessage.cached_prefix`: rules, module,
    instructions, contract), so later turns read it from Anthropic's cache; None when no
    system message has such a part."""
    system = [m for m in messages if m.role == "system"]
    if not any(m.cached_prefix for m in system):
        return None
    blocks: list[dict[str, Any]] = []
    for m in system:
        stable, rest = m.content[: m.cached_prefix], m.content[m.cached_prefix :].lstrip("\n")
        if stable:
            blocks.append({"type": "text", "text": stable, "cache_control": {"type": "ephemeral"}})
        if rest:
            blocks.append({"type": "text", "text": rest})
    return blocks


def to_messages(messages: list[ChatMessage]) -> tuple[str, list[dict[str, str]]]:
    """System text (top-level `system`) and alternating user/assistant turns."""
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    turns: list[dict[str, str]] = []
    for m in messages:
        if m.role == "system":
            continue
        if turns and turns[-1]["role"] == m.role:  # e.g. a re-ask right after the learner's turn
            turns[-1] = {"role": m.role, "content": f"{turns[-1]['content']}\n\n{m.content}"}
        else:
            turns.append({"role": m.role, "content": m.content})
    if not turns or turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": OPENING_USER_TEXT})
    return system, turns


class AnthropicProvider(HTTPProvider):
    name = "anthropic"
    path = PATH

    def __init__(self, settings: LLMSettings, *, client: httpx.AsyncClient | None = None):
        headers = {"anthropic-version": settings.anthropic_version}
        if settings.api_key:
            headers["x-api-key"] = settings.api_key
        super().__init__(settings, headers=headers, client=client)

    def build_body(self, request: CompletionRequest, *, stream: bool = False) -> dict[str, Any]:
        system, turns = to_messages(request.messages)
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "messages": turns,
        }
        if system:
            body["system"] = system_blocks(request.messages) or system
        tool = tool_spec(request.strategy, request.contract)
        if tool is not None:
            body["tools"] = [tool]
            body["tool_choice"] = {"type": "tool", "name": tool["name"]}
        if stream:
            body["stream"] = True
        return body

    def _new_stream_state(self) -> _StreamState:
        return _StreamState(self.model)

    async def _deltas(self, request: CompletionRequest, state: _StreamState) -> AsyncIterator[str]:
        async with self._events(request) as events:
            async for event in events:
                if event.event == WHOLE_BODY_EVENT:
                    state.whole = self._completion_from_body(loads_event(event))
                    yield state.whole.text
                    return
                if event.event == "ping":
                    continue
                data = loads_event(event)
                kind = data.get("type", event.event)
                if kind == "error":
                    raise ServerError(f"error in stream: {error_detail(event.data)}")
                yield state.add(kind, data)
                if kind == "message_stop":
                    break
            if not state.stopped:
                raise ConnectionFailed("the stream ended before message_stop")

    def _completion_from_body(self, data: dict[str, Any]) -> Completion:
        content = data.get("content")
        if not isinstance(content, list):
            raise BadResponse(f"answer has no content list: {json.dumps(data)[:160]}")
        tool_input = next(
            (b.get("input") for b in content if isinstance(b, dict) and b.get("type") == "tool_use"),
            None,
        )
        prose = "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
        text = json.dumps(tool_input, ensure_ascii=False) if tool_input is not None else prose
        usage = data.get("usage") or {}
        stop_reason = data.get("stop_reason")
        return Completion(
            text=text,
            finish_reason=_finish_reason(stop_reason),
            tokens_in=_input_tokens(usage),
            tokens_out=int(usage.get("output_tokens") or 0),
            model=str(data.get("model") or self.model),
            tokens_cached=_cached_tokens(usage),
            refusal=(prose or "refused") if stop_reason == "refusal" else None,
            extra={"stop_reason": stop_reason},
        )


def _finish_reason(stop_reason: str | None) -> str | None:
    if stop_reason is None:
        return None
    return STOP_REASONS.get(stop_reason, stop_reason)


def _cached_tokens(usage: dict[str, Any]) -> int | None:
    value = usage.get("cache_read_input_tokens")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _input_tokens(usage: dict[str, Any]) -> int:
    # Cached prompt tokens are still prompt tokens for budgets and audit.
    return sum(
        int(usage.get(key) or 0)
        for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )


class _StreamState:
    """Assembles message_start / content_block_* / message_delta events into a Completion."""

    def __init__(self, model: str):
        self.model = model
        self.blocks: dict[int, dict[str, Any]] = {}
        self.stop_reason: str | None = None
        self.tokens_in = 0
        self.tokens_out = 0
        self.tokens_cached: int | None = None
        self.stopped = False
        self.whole: Completion | None = None

    def add(self, kind: str, data: dict[str, Any]) -> str:
        if kind == "message_start":
            message = data.get("message") or {}
            self.model = str(message.get("model") or self.model)
            usage = message.get("usage") or {}
            self.tokens_in = _input_tokens(usage)
            self.tokens_out = int(usage.get("output_tokens") or 0)
            self.tokens_cached = _cached_tokens(usage)
        elif kind == "content_block_start":
            block = data.get("content_block") or {}
            self.blocks[int(data.get("index", len(self.blocks)))] = {
                "type": block.get("type"),
                "parts": [block["text"]] if block.get("text") else [],
            }
        elif kind == "content_block_delta":
            block = self.blocks.setdefault(int(data.get("index", 0)), {"type": None, "parts": []})
            delta = data.get("delta") or {}
            piece = delta.get("partial_json") if delta.get("type") == "input_json_delta" else delta.get("text")
            if piece:
                block["parts"].append(piece)
                return piece
        elif kind == "message_delta":
            self.stop_reason = (data.get("delta") or {}).get("stop_reason") or self.stop_reason
            usage = data.get("usage") or {}
            if usage.get("output_tokens") is not None:
                self.tokens_out = int(usage["output_tokens"])
            if usage.get("input_tokens"):
                self.tokens_in = _input_tokens(usage)
        elif kind == "message_stop":
            self.stopped = True
        return ""

    def build(self) -> Completion:
        if self.whole is not None:
            return self.whole
        ordered = [self.blocks[i] for i in sorted(self.blocks)]
        tool = next((b for b in ordered if b["type"] == "tool_use"), None)
        prose = "".join("".join(b["parts"]) for b in ordered if b["type"] == "text")
        text = "".join(tool["parts"]) if tool is not None else prose
        return Completion(
            text=text,
            finish_reason=_finish_reason(self.stop_reason),
            tokens_in=self.tokens_in,
            tokens_out=self.tokens_out,
            model=self.model,
            refusal=(prose or "refused") if self.stop_reason == "refusal" else None,
            tokens_cached=self.tokens_cached,
            extra={"stop_reason": self.stop_reason, "streamed": True},
        )
