"""Token budgets (seed 003): estimate a call before making it, trim history, or refuse.

Estimates are deliberately crude (4 characters per token plus a little per message): they
only need to stop runaway prompts, and they work the same for every backend. The budgets:

- TUTOR_TURN_TOKEN_BUDGET bounds one model call: estimated prompt + max_tokens. A call that
  would exceed it first loses its oldest history; a turn spends at most two such calls.
- TUTOR_CONVERSATION_TOKEN_BUDGET bounds what a whole conversation spends (reported usage,
  or estimates where a server reports none). Once spent, turns fail closed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from tutor.llm.base import ChatMessage, CompletionRequest
from tutor.llm.config import LLMSettings

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD_TOKENS = 4


def estimate_text_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def estimate_tokens(messages: list[ChatMessage]) -> int:
    return sum(estimate_text_tokens(m.content) + MESSAGE_OVERHEAD_TOKENS for m in messages)


def request_estimate(request: CompletionRequest) -> int:
    """What a call may cost at most: its prompt plus the reply tokens it allows."""
    return estimate_tokens(request.messages) + request.max_tokens


@dataclass(frozen=True)
class BudgetCheck:
    request: CompletionRequest  # possibly with trimmed history
    ok: bool
    trimmed: bool = False
    flag: str | None = None  # "turn_budget_exceeded" | "conversation_budget_exhausted"
    message: str | None = None  # for operators (audit log), names the variable


def check_budget(
    request: CompletionRequest, settings: LLMSettings, *, conversation_tokens_used: int = 0
) -> BudgetCheck:
    """Fit `request` into the configured budgets, trimming history if that is enough."""
    conv = settings.conversation_token_budget
    if conv is not None and conversation_tokens_used >= conv:
        return BudgetCheck(
            request,
            ok=False,
            flag="conversation_budget_exhausted",
            message=(
                f"Conversation token budget exhausted: {conversation_tokens_used} of "
                f"TUTOR_CONVERSATION_TOKEN_BUDGET={conv} tokens used"
            ),
        )
    limits: list[tuple[int, str]] = []
    if settings.turn_token_budget is not None:
        limits.append((settings.turn_token_budget, "turn"))
    if conv is not None:
        limits.append((conv - conversation_tokens_used, "conversation"))
    if not limits:
        return BudgetCheck(request, ok=True)
    limit, binding = min(limits)
    estimate = request_estimate(request)
    if estimate <= limit:
        return BudgetCheck(request, ok=True)

    messages = trim_history(request.messages, limit - request.max_tokens)
    trimmed = replace(request, messages=messages)
    estimate_after = request_estimate(trimmed)
    if estimate_after <= limit:
        return BudgetCheck(trimmed, ok=True, trimmed=messages != request.messages)
    if binding == "turn":
        message = (
            f"Turn token budget exceeded: the call needs about {estimate_after} tokens "
            f"(prompt + TUTOR_LLM_MAX_TOKENS={request.max_tokens}) even with history trimmed, "
            f"over TUTOR_TURN_TOKEN_BUDGET={settings.turn_token_budget}: raise the budget or "
            "shorten the module's instructions"
        )
        return BudgetCheck(trimmed, ok=False, flag="turn_budget_exceeded", message=message)
    message = (
        f"Conversation token budget exhausted: the next call needs about {estimate_after} tokens "
        f"but only {limit} of TUTOR_CONVERSATION_TOKEN_BUDGET={conv} remain"
    )
    return BudgetCheck(trimmed, ok=False, flag="conversation_budget_exhausted", message=message)


def trim_history(messages: list[ChatMessage], max_prompt_tokens: int) -> list[ChatMessage]:
    """Drop the oldest exchanges until the prompt fits, never the system text or the last turn.

    The conversation left always starts with a user message (some APIs insist), so an
    assistant message orphaned by a drop goes too.
    """
    head = [m for m in messages[: _leading_system(messages)]]
    body = list(messages[len(head) :])
    while len(body) > 1 and estimate_tokens(head + body) > max_prompt_tokens:
        body.pop(0)
        while len(body) > 1 and body[0].role == "assistant":
            body.pop(0)
    return head + body


def _leading_system(messages: list[ChatMessage]) -> int:
    count = 0
    for m in messages:
        if m.role != "system":
            break
        count += 1
    return count
