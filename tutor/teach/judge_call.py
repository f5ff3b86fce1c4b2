"""The judge as a model call: seed 004's JUDGE contract through seed 003's policy
(tutor.llm.contract_call): attempt 1 at the configured temperature, attempt 2 at 0 with the
answer shortened; no valid answer -> no score (the caller flags the turn judge_failed and
needs_review). A reply that only copies the prompt's example (copies_example) is invalid
like any other. Unknown criterion names are dropped and logged (validate_judge) and named
on the attempt's audit record. A valid reply is data: the score and the feedback shown are
settled by the server (tutor.teach.judge_verdict); what it changed is flagged, on the turn
and on the attempt's audit record, whose hint says what the model had claimed."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tutor.content.material import Check
from tutor.llm.base import Contract, Provider
from tutor.llm.config import LLMSettings
from tutor.llm.contract_call import call_contract
from tutor.llm.policy import AttemptRecord
from tutor.teach.judge import JudgeResult, judge_messages, judge_schema, validate_judge
from tutor.teach.judge_verdict import copies_example, settle

if TYPE_CHECKING:  # pragma: no cover
    from tutor.content.modules import Module

__all__ = ["CONTRACT_NAME", "JudgeCall", "judge_with_model"]

CONTRACT_NAME = "judge"
MAX_TOKENS = 400
DEADLINE_S = 30.0  # of the turn's deadline, at most this much goes to judging
SHORTENED_CHARS = 1500  # attempt 2 reads at most this much of a long answer


@dataclass
class JudgeCall:
    result: JudgeResult | None
    attempts: list[AttemptRecord] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)  # criterion names the model made up
    problem: str | None = None  # for the operator
    flags: list[str] = field(default_factory=list)  # what the server changed of the model's judgement


async def judge_with_model(
    provider: Provider, settings: LLMSettings, module: Module | None, check: Check, answer: str,
    material: Iterable[str] = (),
) -> JudgeCall:
    """`material`: what the learner was shown of the check's topic (an answer copied from it
    is capped, as the built-in judge caps it)."""
    dropped: list[str] = []

    def parse(raw: str) -> JudgeResult:
        result, unknown, problem = validate_judge(raw, check)
        if result is None:
            raise ValueError(problem or "no usable judgement")
        if copies_example(check, result):
            raise ValueError("the judge copied the prompt's example reply instead of judging the answer")
        dropped.extend(n for n in unknown if n not in dropped)
        return result

    def messages(shortened: bool):
        return judge_messages(check, answer[:SHORTENED_CHARS] if shortened else answer, module)

    outcome = await call_contract(
        provider, settings, Contract(CONTRACT_NAME, judge_schema(check)), messages, parse,
        max_tokens=MAX_TOKENS, deadline_s=min(DEADLINE_S, settings.deadline_s),
    )
    if outcome.value is None:
        return JudgeCall(None, outcome.attempts, dropped, outcome.problem)
    verdict = settle(check, outcome.value, answer, material=material, language=module.language if module else None)
    for record in outcome.attempts:
        if record.outcome == "valid":
            record.flags = [*record.flags, *(["unknown_criteria_dropped"] if dropped else []), *verdict.flags]
            if verdict.flags:
                record.hint = (f"The judge model scored {verdict.model_score}/10 overall; its criteria give "
                               f"{verdict.criteria_score:g}; the learner was scored {verdict.result.score}/10 "
                               f"({', '.join(verdict.flags)}). A larger judge model, or TUTOR_LLM_STRATEGY="
                               "json_schema, follows the rubric more closely.")
    return JudgeCall(verdict.result, outcome.attempts, dropped, outcome.problem, verdict.flags)
