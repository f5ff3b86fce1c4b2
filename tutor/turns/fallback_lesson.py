"""When the model cannot give a turn, the built-in tutor gives it, so a class keeps learning
through an outage.

The turn policy (tutor.llm.policy) fails closed with a calm apology when nothing the model
sent is worth showing: the re-ask failed too, the deadline passed with nothing readable, the
server is down, or our own code failed around the call (`engine_error`). An apology alone
leaves the learner waiting for a model that may be gone for an hour; instead the learner
gets the built-in tutor's authored turn for where they are (tutor.llm.builtin, the same
walk that runs when no model is configured), under one line saying the tutor is having
trouble. What the learner is shown counts as shown: the server's progress bookkeeping reads
it like any reply (tutor.teach.teaching.finish).

Marked as such everywhere it is kept: the stored turn's flags say `builtin_fallback` (and
no longer `fallback_apology`: the learner did not get only an apology); its audit rows keep
every failed model call and add one row with provider `builtin`, kind and outcome
`fallback`, which the operator console counts apart from model calls; the raw text stays
the model's (what an operator reviews). The model never reads this turn as its own words:
tutor.turns.turn_store.model_memory gives it a one-line stand-in.

Kept as they are: replies the model had already streamed part of (deadline, Stop keep what
arrived), a Stop before any text (the learner chose it), and the budget's apology (a spent
conversation asks for a new one on purpose; the model was not the problem).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from tutor.contract import TextBlock, parse
from tutor.i18n import N_, translator
from tutor.llm.base import CompletionRequest
from tutor.llm.builtin import BuiltinTutor, compose_reply
from tutor.llm.policy import AttemptRecord, PolicyResult

__all__ = ["FALLBACK_FLAG", "TROUBLE_TEXT", "lesson_instead", "wants_lesson"]

log = logging.getLogger(__name__)

FALLBACK_FLAG = "builtin_fallback"
TROUBLE_TEXT = N_("The tutor is having trouble answering right now, so this part of the lesson comes straight "
                  "from the module.")
# Apologies made because no model reply could be shown ...
_FAILED = frozenset({"fallback_apology", "engine_error"})
# ... but not those the app makes on purpose: a spent budget asks for a new conversation.
_DELIBERATE = frozenset({"turn_budget_exceeded", "conversation_budget_exhausted", "context_exceeded"})


def wants_lesson(result: PolicyResult) -> bool:
    """The turn failed closed with only the app's apology to show."""
    flags = set(result.parsed.flags)
    return bool(flags & _FAILED) and not flags & _DELIBERATE


def lesson_instead(result: PolicyResult, request: CompletionRequest, language: str | None) -> PolicyResult:
    """`result`, or, when it is an apology for a model that could not be heard, the built-in
    tutor's turn for `request.context` under the trouble line (see the module docstring).
    The apology stays when there is no turn context or the built-in tutor fails too."""
    if not wants_lesson(result) or request.context is None:
        return result
    started = time.perf_counter()
    try:
        built = parse(compose_reply(request.context))
    except Exception:  # the apology is still there for the learner
        log.exception("the built-in tutor could not stand in for the model")
        return result
    if built.response is None:  # pragma: no cover - compose_reply writes the contract's JSON
        return result
    response = built.response
    trouble = TextBlock(type="info", content=translator(language)(TROUBLE_TEXT))
    response.content.text_blocks = [trouble, *response.content.text_blocks]
    flags = [f for f in result.parsed.flags if f != "fallback_apology"]
    flags += [FALLBACK_FLAG] if FALLBACK_FLAG not in flags else []
    record = AttemptRecord(
        attempt=len(result.attempts) + 1, provider=BuiltinTutor.name, model=BuiltinTutor().model,
        strategy=request.strategy, latency_ms=round((time.perf_counter() - started) * 1000, 1),
        outcome="fallback", flags=[FALLBACK_FLAG], kind="fallback",
    )
    log.warning("no usable model reply (%s): the built-in tutor gave the turn",
                ", ".join(f for f in result.parsed.flags if f != "needs_review"))
    parsed = replace(result.parsed, response=response, flags=flags)
    return replace(result, parsed=parsed, attempts=[*result.attempts, record],
                   flags=[f for f in result.flags if f != "fallback_apology"] + [FALLBACK_FLAG])
