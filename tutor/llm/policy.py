"""Turn policy: one provider call, parse. (Retries and fail-closed come with the backends.)"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from tutor.contract import ParsedReply, parse
from tutor.llm.base import Completion, CompletionRequest, Provider
from tutor.llm.config import LLMSettings


@dataclass
class AttemptRecord:
    attempt: int
    provider: str
    model: str
    strategy: str
    latency_ms: float
    tokens_in: int = 0
    tokens_out: int = 0
    outcome: str = "invalid"
    flags: list[str] = field(default_factory=list)
    error_class: str | None = None


@dataclass
class PolicyResult:
    parsed: ParsedReply
    attempts: list[AttemptRecord]
    flags: list[str]
    completion: Completion | None
    operator_message: str | None = None


async def run_turn(
    provider: Provider,
    request: CompletionRequest,
    settings: LLMSettings,
    *,
    fallback_suggestion: str | None = None,
) -> PolicyResult:
    started = time.perf_counter()
    completion = await provider.complete(request)
    parsed = parse(completion.text, finish_reason=completion.finish_reason)
    record = AttemptRecord(
        attempt=1,
        provider=provider.name,
        model=completion.model or provider.model,
        strategy=request.strategy,
        latency_ms=(time.perf_counter() - started) * 1000,
        tokens_in=completion.tokens_in,
        tokens_out=completion.tokens_out,
        outcome=parsed.outcome,
        flags=list(parsed.flags),
    )
    return PolicyResult(parsed, [record], list(parsed.flags), completion)
