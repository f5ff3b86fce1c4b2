"""Model calls whose answer is a small contract (a risk screen, a judge), not a lesson.

Seed 003's policy, in one place for every such contract:

- the answer must be one JSON object that the caller's `parse` accepts (canonical labels
  only; `parse` drops unknown ones and raises ValueError for anything invalid);
- attempt 1 runs at the configured temperature; attempt 2 at temperature 0 with the
  shortened input; still invalid (or no answer at all) -> `value` is None and the caller
  fails closed (flags the turn for review). A transport fault counts as a failed attempt.
- every call leaves an AttemptRecord (kind = the contract's name) for the audit log, and
  the whole call has one deadline.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from tutor.contract.extract import clean, scan_values
from tutor.llm.base import ChatMessage, CompletionRequest, Contract, Provider
from tutor.llm.config import LLMSettings
from tutor.llm.errors import LLMError
from tutor.llm.policy import AttemptRecord

__all__ = ["ContractOutcome", "call_contract", "first_object"]

log = logging.getLogger("tutor.llm")
T = TypeVar("T")


@dataclass
class ContractOutcome(Generic[T]):
    value: T | None
    attempts: list[AttemptRecord] = field(default_factory=list)
    problem: str | None = None  # why value is None: for the operator, never the learner


def first_object(raw: str) -> dict[str, Any] | None:
    """The first JSON object in a model's answer (fences, reasoning blocks and prose around
    it removed; nothing inside it rewritten)."""
    for found in scan_values(clean(raw).text).values:
        if isinstance(found.value, dict):
            return found.value
    return None


async def call_contract(
    provider: Provider,
    settings: LLMSettings,
    contract: Contract,
    messages: Callable[[bool], list[ChatMessage]],
    parse: Callable[[str], T],
    *,
    max_tokens: int,
    deadline_s: float,
) -> ContractOutcome[T]:
    """`messages(shortened)` builds the prompt; `parse(text)` returns the value or raises
    ValueError saying what is wrong."""
    outcome: ContractOutcome[T] = ContractOutcome(None)
    loop = asyncio.get_running_loop()
    ends = loop.time() + deadline_s
    for number, temperature in enumerate((settings.temperature, 0.0), start=1):
        request = CompletionRequest(
            messages=messages(number > 1), temperature=temperature, max_tokens=max_tokens,
            strategy=settings.strategy, contract=contract,  # type: ignore[arg-type]
        )
        record = AttemptRecord(
            attempt=number, provider=provider.name, model=provider.model, strategy=request.strategy,
            latency_ms=0.0, kind=contract.name, temperature=temperature,
        )
        outcome.attempts.append(record)
        started = time.perf_counter()
        try:
            remaining = ends - loop.time()
            if remaining <= 0:
                raise TimeoutError
            async with asyncio.timeout(remaining):
                completion = await provider.complete(request)
        except TimeoutError:
            record.error_class, record.outcome = "Deadline", "error"
            record.flags = ["deadline"]
            outcome.problem = f"{contract.name}: no answer within {deadline_s:g} s"
        except LLMError as exc:
            record.error_class, record.outcome = type(exc).__name__, "error"
            record.http_status, record.error = exc.status, exc.message[:300]
            record.hint = exc.operator_hint
            outcome.problem = f"{contract.name}: {exc.operator_message}"
        except Exception as exc:  # a provider bug must not reach the learner
            log.exception("%s call failed", contract.name)
            record.error_class, record.outcome = type(exc).__name__, "error"
            outcome.problem = f"{contract.name}: {type(exc).__name__}: {exc}"
        else:
            record.model = completion.model or provider.model
            record.tokens_in, record.tokens_out = completion.tokens_in, completion.tokens_out
            record.finish_reason = completion.finish_reason
            try:
                outcome.value = parse(completion.text)
            except ValueError as exc:
                record.error_class, record.error = "InvalidReply", str(exc)[:300]
                outcome.problem = f"{contract.name}: invalid answer ({exc})"
            else:
                record.outcome, outcome.problem = "valid", None
        record.latency_ms = round((time.perf_counter() - started) * 1000, 1)
        if outcome.value is not None:
            return outcome
        if loop.time() >= ends:
            break
    log.warning("%s failed closed: %s", contract.name, outcome.problem)
    return outcome
