"""OpenAI-compatible Chat Completions (OpenAI, Ollama, llama.cpp server, vLLM, ...).

With the prompt and json_object strategies the model writes free text, and a small one may
spell out its chat template's end-of-turn marker and go on with the next turn. Those markers
(tutor.llm.markers: TUTOR_LLM_CHAT_TEMPLATE, else the template llama.cpp's /props reveals)
are sent as `stop`, and a reply is cut at the first one the server wrote anyway (a streamed
one stops being read there): the finish reason is then `stop`.

Not with json_object on llama.cpp's server: it holds json_object to a JSON grammar, so a
marker can only come inside a string, where a stop sequence would end the reply mid-sentence
with its JSON unclosed. The content gate (tutor.llm.usable) cuts such a text at the marker
and keeps the rest of the reply.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

import httpx

from tutor.llm._http import WHOLE_BODY_EVENT, HTTPProvider, loads_event
from tutor.llm.base import Completion, CompletionRequest, Contract
from tutor.llm.config import LLMSettings
from tutor.llm.context import speaks_llama, template_markers
from tutor.llm.errors import BadResponse, ConnectionFailed, ServerError, error_detail
from tutor.llm.markers import FAMILIES, cut_at_marker
from tutor.llm.schema import SCHEMA_NAME, response_schema

PATH = "/chat/completions"
STOP_STRATEGIES = ("prompt", "json_object")  # free text: a grammar (json_schema) cannot write markers outside strings


def response_format(strategy: str, max_tokens: int = 2048, *, strict_openai: bool = True) -> dict[str, Any] | None:
    """Seed 001's strategies: A prompt only, B json_object, C strict json_schema. Servers
    that turn the schema into a grammar get a bounded one (tutor.llm.schema), so a small
    model cannot loop inside the grammar until the token limit; OpenAI gets the strict one."""
    if strategy == "json_object":
        return {"type": "json_object"}
    if strategy == "json_schema":
        schema = response_schema(max_tokens, strict_openai=strict_openai)
        return {"type": "json_schema", "json_schema": {"name": SCHEMA_NAME, "strict": True, "schema": schema}}
    return None


def contract_format(strategy: str, contract: Contract) -> dict[str, Any] | None:
    if strategy == "json_object":
        return {"type": "json_object"}
    if strategy == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": contract.name, "strict": True, "schema": contract.schema}}
    return None


class OpenAIProvider(HTTPProvider):
    name = "openai"
    path = PATH

    def __init__(self, settings: LLMSettings, *, client: httpx.AsyncClient | None = None):
        headers = {"authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
        super().__init__(settings, headers=headers, client=client)
        # OpenAI's own API prefers max_completion_tokens (reasoning models refuse max_tokens);
        # compatible servers only know max_tokens.
        host = urlsplit(settings.base_url or "").hostname or ""
        self._openai_itself = host == "api.openai.com"
        self._max_tokens_key = "max_completion_tokens" if self._openai_itself else "max_tokens"
        # The chat template's markers (see the module docstring); None until the server said.
        self._markers: tuple[str, ...] | None = FAMILIES[settings.chat_template] if settings.chat_template else None

    def _stops(self, request: CompletionRequest) -> tuple[str, ...]:
        """The stop sequences for this request (the template's markers, once known)."""
        if request.strategy not in STOP_STRATEGIES:
            return ()
        if request.strategy == "json_object" and speaks_llama(self.settings.base_url):
            return ()  # a JSON grammar: a marker only inside a string (module docstring)
        if self._markers is None:
            self._markers = template_markers(self.settings)
        return self._markers or ()

    def bounds_reply(self, request: CompletionRequest) -> bool:
        """The tutor's reply is sent a schema bounded to fit `request.max_tokens`
        (tutor.llm.schema): json_schema, on any server but OpenAI's own."""
        return request.strategy == "json_schema" and request.contract is None and not self._openai_itself

    async def complete(self, request: CompletionRequest) -> Completion:
        markers = self._stops(request)
        if self.settings.stream:
            return await self.stream(request).collect()  # cut as it is read (_StreamState)
        data = await self._http.post_json(self.path, self.build_body(request))
        return _cut(self._completion_from_body(data), markers)

    def build_body(self, request: CompletionRequest, *, stream: bool = False) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "temperature": request.temperature,
            self._max_tokens_key: request.max_tokens,
        }
        if request.contract is not None:
            fmt = contract_format(request.strategy, request.contract)
        else:
            fmt = response_format(request.strategy, request.max_tokens, strict_openai=self._openai_itself)
        if fmt is not None:
            body["response_format"] = fmt
        if speaks_llama(self.settings.base_url):  # llama.cpp keeps the prompt's KV cache for the next call;
            body["cache_prompt"] = True  # OpenAI's API refuses fields it does not know
            if stream:  # timings (cache_n) in every chunk, not only the last: a stream cut short still says
                body["timings_per_token"] = True
        if stops := self._stops(request):
            body["stop"] = list(stops)
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    def _new_stream_state(self) -> _StreamState:
        return _StreamState(model=self.model)

    async def _deltas(self, request: CompletionRequest, state: _StreamState) -> AsyncIterator[str]:
        state.markers = self._stops(request)
        async with self._events(request) as events:
            async for event in events:
                if event.event == WHOLE_BODY_EVENT:
                    state.whole = _cut(self._completion_from_body(loads_event(event)), state.markers)
                    yield state.whole.text
                    return
                if event.data.strip() == "[DONE]":
                    state.done = True
                    break
                chunk = loads_event(event)
                if "error" in chunk:
                    raise ServerError(f"error in stream: {error_detail(event.data)}")
                yield state.add(chunk)
                if state.marker_seen:
                    break  # the model has ended its turn: what follows is not the reply
            if not state.done and state.finish_reason is None:
                # A close-delimited stream cut short looks like a normal end to HTTP.
                raise ConnectionFailed("the stream ended before [DONE] or a finish_reason")

    def _completion_from_body(self, data: dict[str, Any]) -> Completion:
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise BadResponse(f"answer has no choices: {json.dumps(data)[:160]}")
        choice = choices[0]
        message = choice.get("message") or {}
        usage = data.get("usage") or {}
        return Completion(
            text=_content_text(message.get("content")),
            finish_reason=choice.get("finish_reason"),
            tokens_in=int(usage.get("prompt_tokens") or 0),
            tokens_out=int(usage.get("completion_tokens") or 0),
            model=str(data.get("model") or self.model),
            tokens_cached=cached_tokens(data),
            refusal=message.get("refusal") or None,
            extra={"id": data.get("id")} if data.get("id") else {},
        )


def _cut(completion: Completion, markers: tuple[str, ...]) -> Completion:
    text = cut_at_marker(completion.text, markers)
    return completion if text == completion.text else replace(completion, text=text, finish_reason="stop")


def cached_tokens(data: dict[str, Any]) -> int | None:
    """Prompt tokens the server read from its prompt cache, where it says: OpenAI's
    `usage.prompt_tokens_details.cached_tokens`, llama.cpp's `timings.cache_n` (its own
    `/completion` endpoint: `tokens_cached`)."""
    usage = data.get("usage")
    details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
    timings = data.get("timings")
    for value in (details.get("cached_tokens") if isinstance(details, dict) else None,
                  timings.get("cache_n") if isinstance(timings, dict) else None, data.get("tokens_cached")):
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def _content_text(content: Any) -> str:
    """`content` is a string, null (refusals), or (some servers) a list of text parts."""
    if content is None:
        return ""
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


class _StreamState:
    """Accumulates `delta.content`, `delta.refusal`, the finish reason and the usage chunk."""

    def __init__(self, model: str):
        self.model = model
        self.text: list[str] = []
        self.refusal: list[str] = []
        self.finish_reason: str | None = None
        self.tokens_in = 0
        self.tokens_out = 0
        self.tokens_cached: int | None = None
        self.whole: Completion | None = None
        self.done = False
        self.markers: tuple[str, ...] = ()  # cut the text at the first of these (tutor.llm.markers)
        self.marker_seen = False
        self._tail = ""  # the text's last characters, for a marker split across deltas

    def add(self, chunk: dict[str, Any]) -> str:
        if chunk.get("model"):
            self.model = str(chunk["model"])
        cached = cached_tokens(chunk)  # in the usage chunk (OpenAI) or the last one (llama.cpp's timings)
        if cached is not None:
            self.tokens_cached = cached
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.tokens_in = int(usage.get("prompt_tokens") or 0)
            self.tokens_out = int(usage.get("completion_tokens") or 0)
        delta_text = ""
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            piece = _content_text(delta.get("content"))
            if piece and self.markers and not self.marker_seen:
                piece = self._before_marker(piece)
            if piece:
                self.text.append(piece)
                delta_text += piece
            if delta.get("refusal"):
                self.refusal.append(str(delta["refusal"]))
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        return delta_text

    def _before_marker(self, piece: str) -> str:
        """`piece`, or its part before a marker that it ends (the marker then ends the reply)."""
        seen = self._tail + piece
        if not any(m in seen for m in self.markers):
            self._tail = seen[-max(map(len, self.markers)):]
            return piece
        self.marker_seen, self.finish_reason = True, "stop"
        text = "".join(self.text)
        kept = cut_at_marker(text + piece, self.markers)
        if len(kept) < len(text):  # the marker began in earlier deltas: take their part back
            self.text = [kept]
            return ""
        return kept[len(text):]

    def build(self) -> Completion:
        if self.whole is not None:
            return self.whole
        return Completion(
            text="".join(self.text),
            finish_reason=self.finish_reason,
            tokens_in=self.tokens_in,
            tokens_out=self.tokens_out,
            model=self.model,
            refusal="".join(self.refusal) or None,
            tokens_cached=self.tokens_cached,
            extra={"streamed": True},
        )
