"""One exception hierarchy for everything that can go wrong talking to a model.

The turn policy only needs two facts about a failure: may it be retried, and what should
an operator do about it. Each class answers both, so the policy never inspects HTTP codes.
"""

from __future__ import annotations

import email.utils
import json
import time


class LLMError(Exception):
    """Base class: a model call did not produce a completion."""

    retryable = False

    def __init__(self, message: str, *, status: int | None = None, operator_hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.operator_hint = operator_hint

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


class ProviderFailure(LLMError):
    """A provider raised something that is not an LLMError (a bug, kept from the learner)."""


def error_detail(body: str) -> str:
    """The human part of an OpenAI- or Anthropic-style error body, else the body's start."""
    try:
        data = json.loads(body)
    except (ValueError, TypeError):
        return " ".join(body.split())[:200]
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
        if isinstance(err, str):
            return err[:300]
    return " ".join(body.split())[:200]


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


def error_for_status(status: int, headers, body: str, *, base_url: str, model: str) -> LLMError:
    """Map a non-2xx answer to the exception (and operator advice) it deserves."""
    detail = error_detail(body)
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
    if status >= 500:
        return ServerError(
            f"{status} server error: {detail}",
            status=status,
            operator_hint=f"The model endpoint kept failing ({status}): {detail}",
        )
    return BadRequest(
        f"{status} rejected: {detail}",
        status=status,
        operator_hint=(
            f"The model endpoint rejected the request ({status}: {detail}); if it does not support "
            "structured output, try TUTOR_LLM_STRATEGY=prompt"
        ),
    )
