"""The model's half of a turn: the request built from the teaching plan and the history
(tutor.turns.prompts), and the turn policy called (tutor.llm.policy.run_turn). A failure of
ours becomes a calm apology, an apology alone the built-in tutor's turn
(tutor.turns.fallback_lesson), and the app's own words are put in the module's language."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from tutor import progress as progress_mod
from tutor.content.modules import Module
from tutor.contract import ParsedReply
from tutor.i18n import translator
from tutor.llm.base import CompletionRequest, Provider, TurnContext, folded
from tutor.llm.config import LLMSettings
from tutor.llm.policy import PolicyResult, apology_response, run_turn
from tutor.llm.replies import ENGINE_ERROR_TEXT, localize_own_words
from tutor.llm.streaming import TurnListener
from tutor.progress import ProgressState
from tutor.turns import fallback_lesson, prompts

if TYPE_CHECKING:  # pragma: no cover
    from tutor.teach.teaching import TurnPlan
    from tutor.turns.conversations import PendingTurn
    from tutor.turns.turn_store import TurnInputs

log = logging.getLogger(__name__)


def model_request(settings: LLMSettings, module: Module, plan: TurnPlan, inputs: TurnInputs,
                  pending: PendingTurn | None, detected: frozenset[str]) -> CompletionRequest:
    """What the tutor is asked this turn: the prompt's messages and the turn's context."""
    interim = plan.interim
    messages = prompts.build_messages(module, interim, inputs.history, pending.prompt_text if pending else None,
                                      teaching=plan.context)
    context = TurnContext(
        module=module,
        progress=interim,
        detected=detected,
        learner=pending.learner_input if pending else None,
        turn_index=inputs.turn_index,
        teaching=plan.context,
        asked=frozenset(folded(m.content) for m in inputs.history if m.role == "user")
        | ({folded(pending.prompt_text)} if pending and pending.prompt_text else set()),
    )
    return CompletionRequest(
        messages=messages,
        temperature=settings.temperature,
        max_tokens=settings.max_tokens,
        strategy=settings.strategy,  # type: ignore[arg-type]
        context=context,
    )


async def call_policy(
    provider: Provider, settings: LLMSettings, request: CompletionRequest, module: Module, state: ProgressState,
    tokens_used: int, listener: TurnListener | None, stop: asyncio.Event,
) -> PolicyResult:
    nxt = progress_mod.next_topic(module, state)
    t = translator(module.language)  # the tutor's own words in the module's language
    suggestion = t("Tell me about {topic}", topic=nxt.title) if nxt is not None else None
    try:
        result = await run_turn(
            provider, request, settings,
            fallback_suggestion=suggestion, conversation_tokens_used=tokens_used,
            listener=listener, stop=stop,
        )
    except Exception as exc:  # the learner must never be stuck on our bug
        log.exception("turn policy failed")
        flags = ["engine_error", "needs_review"]
        apology = apology_response(ENGINE_ERROR_TEXT, suggestion)
        result = PolicyResult(ParsedReply("invalid", apology, flags, [type(exc).__name__], ""), [], flags, None)
    result = fallback_lesson.lesson_instead(result, request, module.language)  # no apology alone
    localize_own_words(result.parsed.response, module.language)
    return result
