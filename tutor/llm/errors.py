"""One exception hierarchy for everything that can go wrong talking to a model.

The turn policy only needs two facts about a failure: may it be retried, and what should
an operator do about it. Each class answers both, so the policy never inspects HTTP codes.
Error text goes to operators only (logs, audit), never to learners, and every message and
hint is passed through `scrub()` (tutor.llm.redact) so a key or a URL password cannot leak
into either.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from typing import Any

from tutor.llm.redact import scrub


class LLMError(Exception):
    """Base class: a model call did not produce a completion."""

    retryable = False

    def __init__(self, message: str, *, status: int | None = None, operator_hint: str | None = None):
        message = scrub(message)
        super().__init__(message)
        self.message = message
        self.status = status
        self.operator_hint = scrub(operator_hint) if operator_hint else operator_hint

    @property
    def operator_message(self) -> str:
        return self.operator_hint or self.message


class TransportError(LLMError):
    """The request may succeed if sent again (network trouble, overload, a garbled answer)."""

    retryable = True


class RequestTimeout(TransportError):
    """No answer (or no next chunk) within TUTOR_LLM_TIMEOUT seconds."""


class ConnectionFailed(TransportError):
    """Could not connect, or the connection broke mid-answer."""


class RateLimited(TransportError):
    """HTTP 429; `retry_after` is the server's wish in seconds, when it said one."""

    def __init__(self, message: str, *, retry_after: float | None = None, **kw):
        super().__init__(message, **kw)
        self.retry_after = retry_after


class ServerError(TransportError):
    """HTTP 5xx (or 529 overloaded), or an error event in the middle of a stream."""


class BadResponse(TransportError):
    """A 2xx answer we could not read (not JSON, no choices); proxies do this under load."""


class RequestRejected(LLMError):
    """The endpoint refused the request itself: sending it again will not help."""


class AuthError(RequestRejected):
    """HTTP 401/403: the key is missing, wrong, or lacks access."""


class NotFound(RequestRejected):
    """HTTP 404: wrong base URL or a model the endpoint does not serve."""


class BadRequest(RequestRejected):
    """HTTP 400/422 and other 4xx: the endpoint does not accept what we sent."""


class ContextOverflow(BadRequest):
    """The conversation is longer than the model's context window (HTTP 400 and kin).

    Sending the same request again cannot help, so it is not retried as it stands; the
    policy trims the history (`budget.trim_harder`) and tries once more. The server's own
    figures, when its error names them, ride along so the retry can fit exactly.
    """

    def __init__(self, message: str, *, context_window: int | None = None,
                 prompt_tokens: int | None = None, **kw):
        super().__init__(message, **kw)
        self.context_window = context_window  # the server's limit in tokens, when it said
        self.prompt_tokens = prompt_tokens  # what it counted for our prompt, when it said


class RoleOrderRejected(BadRequest):
    """The server's chat template refused the order of roles (e.g. two user messages in a row)."""


class DeadlineExceeded(LLMError):
    """The turn's model work ran past TUTOR_LLM_DEADLINE (transport retries, their backoff
    and the re-ask all count). Not retried: the turn ends with what had arrived, or a calm
    apology, and the learner can go on."""

    def __init__(self, deadline_s: float, elapsed_s: float, *, after: LLMError | None = None):
        cause = f"; the last try failed: {after.message}" if after is not None else ""
        super().__init__(
            f"no complete reply within TUTOR_LLM_DEADLINE={deadline_s:g}s ({elapsed_s:.1f}s into the turn){cause}",
            operator_hint=(
                f"The model did not finish this turn within TUTOR_LLM_DEADLINE={deadline_s:g}s (retries "
                "and the re-ask included), so it was cut off: check the server's load, lower "
                "TUTOR_LLM_MAX_TOKENS, or raise TUTOR_LLM_DEADLINE for a slow model"
                + (f" (last error: {after.operator_message})" if after is not None else "")
            ),
        )
        self.deadline_s = deadline_s
        self.elapsed_s = elapsed_s


class ProviderFailure(LLMError):
    """A provider raised something that is not an LLMError (a bug, kept from the learner)."""




def _error_fields(body: str) -> tuple[str, dict[str, Any]]:
    """(the human part of an error body, its error object) for OpenAI-, Anthropic- and
    llama.cpp-style bodies; for anything else, the start of the body and {}."""
    try:
        data = json.loads(body)
    except (ValueError, TypeError):
        return " ".join(body.split())[:200], {}
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300], err
        if isinstance(err, str):
            return err[:300], data
    return " ".join(body.split())[:200], {}


def error_detail(body: str) -> str:
    """The human part of an OpenAI- or Anthropic-style error body, else the body's start."""
    return scrub(_error_fields(body)[0])


# What servers say when the prompt (plus the reply allowance) is longer than the model's
# context: llama.cpp, OpenAI and its many imitators, vLLM, Anthropic, Gemini's OpenAI API.
_OVERFLOW_WORDS = (
    "exceeds the available context size",
    "context_length_exceeded",
    "maximum context length",
    "context length exceeded",
    "prompt is too long",
    "input token count",
    "exceed_context_size_error",
)
_OVERFLOW_FIGURES = [  # (context window, prompt tokens) as the servers phrase them
    re.compile(r"request \((?P<prompt>\d+) tokens\) exceeds the available context size \((?P<ctx>\d+) tokens\)"),
    re.compile(r"maximum context length is (?P<ctx>\d+) tokens"),
    re.compile(r"(?P<prompt>\d+) in the messages"),
    re.compile(r"messages resulted in (?P<prompt>\d+) tokens"),
    re.compile(r"prompt is too long: (?P<prompt>\d+) tokens > (?P<ctx>\d+) maximum"),
]
_ROLE_ORDER_WORDS = ("must alternate", "alternating user/assistant")


def _is_overflow(detail: str, err: dict[str, Any]) -> bool:
    words = " ".join(str(err.get(k) or "") for k in ("type", "code")) + " " + detail
    words = words.lower()
    return any(w in words for w in _OVERFLOW_WORDS)


def _overflow_figures(detail: str, err: dict[str, Any]) -> tuple[int | None, int | None]:
    ctx = err.get("n_ctx") if isinstance(err.get("n_ctx"), int) else None
    prompt = err.get("n_prompt_tokens") if isinstance(err.get("n_prompt_tokens"), int) else None
    for pattern in _OVERFLOW_FIGURES:
        match = pattern.search(detail)
        if match is None:
            continue
        found = match.groupdict()
        if ctx is None and found.get("ctx"):
            ctx = int(found["ctx"])
        if prompt is None and found.get("prompt"):
            prompt = int(found["prompt"])
    return ctx, prompt


def context_overflow(status: int, detail: str, err: dict[str, Any] | None = None) -> ContextOverflow:
    """The error for "the conversation no longer fits the model's context"."""
    ctx, prompt = _overflow_figures(detail, err or {})
    figures = ""
    if prompt and ctx:
        figures = f" ({prompt} prompt tokens, context {ctx})"
    elif ctx:
        figures = f" (context {ctx} tokens)"
    return ContextOverflow(
        f"{status} context exceeded: {detail}",
        status=status,
        context_window=ctx,
        prompt_tokens=prompt,
        operator_hint=(
            f"The conversation is longer than the model's context window{figures}: Tutor trims "
            "the oldest history and retries once. Set TUTOR_LLM_CONTEXT to the server's context "
            "size (llama-server -c, Ollama num_ctx, vLLM --max-model-len) so Tutor trims before "
            "sending, or give the server a larger context, or lower TUTOR_LLM_MAX_TOKENS"
        ),
    )


def parse_retry_after(headers) -> float | None:
    """Seconds to wait from `retry-after-ms` or `Retry-After` (seconds or an HTTP date)."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def error_for_status(
    status: int, headers, body: str, *, base_url: str, model: str, strategy: str | None = None
) -> LLMError:
    """Map a non-2xx answer to the exception (and operator advice) it deserves.

    `strategy` is the TUTOR_LLM_STRATEGY the request was sent with; when it is known to be
    `prompt`, a refused request is not blamed on structured output.
    """
    raw_detail, err = _error_fields(body)
    detail = scrub(raw_detail)
    if status == 401:
        return AuthError(
            f"401 Unauthorized: {detail}",
            status=status,
            operator_hint="The model endpoint rejected the API key (401): check TUTOR_LLM_API_KEY",
        )
    if status == 403:
        return AuthError(
            f"403 Forbidden: {detail}",
            status=status,
            operator_hint=(
                f"The model endpoint refused access (403): check that TUTOR_LLM_API_KEY may use "
                f"model {model!r} ({detail})"
            ),
        )
    if status == 404:
        return NotFound(
            f"404 Not Found: {detail}",
            status=status,
            operator_hint=(
                f"The model endpoint answered 404 ({detail}): check TUTOR_LLM_BASE_URL={base_url} "
                f"and TUTOR_LLM_MODEL={model}"
            ),
        )
    if status == 429:
        return RateLimited(
            f"429 Too Many Requests: {detail}",
            status=status,
            retry_after=parse_retry_after(headers),
            operator_hint=f"The model endpoint kept rate-limiting us (429): {detail}",
        )
    # Some servers answer these with a 500; either way, resending the same request cannot help.
    if _is_overflow(detail, err):
        return context_overflow(status, detail, err)
    if any(w in detail.lower() for w in _ROLE_ORDER_WORDS):
        return RoleOrderRejected(
            f"{status} rejected: {detail}",
            status=status,
            operator_hint=(
                f"The model server's chat template requires user and assistant messages to "
                f"alternate and refused this conversation ({status}: {detail}). Tutor sends them "
                "alternating, so report this with the audit record; meanwhile a template that "
                "accepts any order avoids it (e.g. llama-server --chat-template chatml)"
            ),
        )
    if status >= 500:
        return ServerError(
            f"{status} server error: {detail}",
            status=status,
            operator_hint=f"The model endpoint kept failing ({status}): {detail}",
        )
    if strategy == "prompt":  # no structured output was asked for: it cannot be the cause
        advice = (f"check that it serves TUTOR_LLM_MODEL={model} and accepts TUTOR_LLM_MAX_TOKENS "
                  "and TUTOR_LLM_TEMPERATURE")
    elif strategy is None:
        advice = ("if it does not support structured output and TUTOR_LLM_STRATEGY is not prompt, "
                  "try TUTOR_LLM_STRATEGY=prompt")
    else:
        advice = (f"if it does not support structured output (TUTOR_LLM_STRATEGY={strategy}), "
                  "try TUTOR_LLM_STRATEGY=prompt")
    return BadRequest(
        f"{status} rejected: {detail}",
        status=status,
        operator_hint=f"The model endpoint rejected the request ({status}: {detail}); {advice}",
    )
