"""Model backends behind one async interface, and the turn policy that drives them."""

from tutor.llm.base import ChatMessage, Completion, CompletionRequest, LearnerInput, Provider, TurnContext
from tutor.llm.budget import check_budget, estimate_tokens, request_estimate
from tutor.llm.config import ConfigError, LLMSettings
from tutor.llm.errors import (
    AuthError,
    BadRequest,
    BadResponse,
    ConnectionFailed,
    LLMError,
    NotFound,
    ProviderFailure,
    RateLimited,
    RequestRejected,
    RequestTimeout,
    ServerError,
    TransportError,
)
from tutor.llm.factory import make_provider
from tutor.llm.policy import AttemptRecord, PolicyResult, run_turn

__all__ = [
    "AttemptRecord",
    "AuthError",
    "BadRequest",
    "BadResponse",
    "ChatMessage",
    "Completion",
    "CompletionRequest",
    "ConfigError",
    "ConnectionFailed",
    "LLMError",
    "LLMSettings",
    "LearnerInput",
    "NotFound",
    "PolicyResult",
    "Provider",
    "ProviderFailure",
    "RateLimited",
    "RequestRejected",
    "RequestTimeout",
    "ServerError",
    "TransportError",
    "TurnContext",
    "check_budget",
    "estimate_tokens",
    "make_provider",
    "request_estimate",
    "run_turn",
]
