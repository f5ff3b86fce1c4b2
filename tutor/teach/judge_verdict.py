"""A model judge's reply is data; the score the learner gets is the server's.

A model judge (tutor.teach.judge_call) sends an overall score, feedback and a score per rubric
criterion. Small models copy the prompt's example ("score": 7) whatever they wrote for the
criteria, and its template feedback ("You explained ... well. To complete it, think about
..."); shown as it came, "Anxiety is a weakness, strong people don't get it." was "mastered"
at 7/10 with criteria 1/1/1, under template words in the green callout. So `settle`:

1. decides the score from the criteria the model scored, with the rubric's weights (a
   criterion it left out counts 0 and is flagged `judge_criteria_missing`), rounded half
   up like the built-in judge's;
2. applies the rules that keep any score honest (tutor.teach.builtin_judge.apply_rules): a
   misconception the check lists, two ideas the wrong way round or a relation of the
   example answer stated the other way (tutor.teach.judge_direction), an answer asking for a
   score, a list of terms, text copied from the lesson — each caps the score below mastery;
3. flags `judge_score_recomputed` when the model's overall score disagrees with its own
   criteria by more than a point (the operator's review list shows the turn; the judge's
   audit row says what the model claimed);
4. shows the model's feedback only when it is the model's own words for this verdict:
   feedback that is template or placeholder text, or the prompt's example for this check
   copied back (`judge_template_feedback`), that a rule contradicts (a correction must be
   shown), or that was written for the other side of the mastery threshold is replaced by
   the server's own words for the criteria (tutor.teach.builtin_judge.feedback_words, the
   built-in judge's).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from difflib import SequenceMatcher

from tutor.content.material import Check
from tutor.i18n import translator
from tutor.llm.placeholders import has_placeholder
from tutor.teach.builtin_judge import apply_rules, feedback_words
from tutor.teach.judge import MAX_ANSWER_CHARS, JudgeResult, example_reply
from tutor.text import words

__all__ = ["DISAGREEMENT", "Verdict", "copies_example", "criteria_score", "is_template_feedback", "settle"]

log = logging.getLogger(__name__)

DISAGREEMENT = 1.0  # points between the model's overall score and its criteria's that are flagged

# Wording of the judge prompt's template and of the fields' descriptions (tutor.teach.judge,
# seed 004), echoed back as if it were feedback.
_ECHOES = ("criterion name", "criteriascores", "accepted alternatives", "full credit needs", "(weight",
           "mastery threshold", "kind, specific feedback", "short sentences to the learner", "nhận xét chi tiết")
_TEMPLATE_WORDS = frozenset(words(
    "You explained well. To complete it, think about. Kind, specific feedback for the learner. "
    "1 to 3 short sentences to the learner. Feedback text string here your answer good great nice job "
    "criterion criteria score rubric N/A none null nhận xét chi tiết"))
_OWN_WORDS = 2  # fewer words than this outside the template's: an echo
_COPIED = 0.8  # this close (difflib's ratio) to the prompt's example feedback for the check: copied


@dataclass(frozen=True)
class Verdict:
    result: JudgeResult  # the server's score, the feedback shown, the model's criterion scores
    flags: list[str] = field(default_factory=list)
    model_score: int = 0  # what the model said overall, for the operator
    criteria_score: float = 0.0  # what its criteria give, before the rules


def criteria_score(check: Check, scores: dict[str, float]) -> float:
    """The rubric's weighted mean of criterion scores (0-10); a criterion not scored is 0."""
    criteria = check.rubric.criteria
    return sum(c.weight * scores.get(c.name, 0.0) for c in criteria) / sum(c.weight for c in criteria)


def is_template_feedback(feedback: str, check: Check | None = None) -> bool:
    """Placeholders, the prompt's template wording, the prompt's example feedback for `check`
    copied back, or nothing of the judge's own."""
    text = feedback.strip()
    if not text or has_placeholder(text):  # tutor.llm.placeholders
        return True
    folded = text.casefold()
    if any(echo in folded for echo in _ECHOES):
        return True
    if check is not None and _copies_feedback(folded, example_reply(check)["feedback"].casefold(), check):
        return True
    return sum(1 for w in words(text) if w not in _TEMPLATE_WORDS) < _OWN_WORDS


def _copies_feedback(folded: str, example: str, check: Check) -> bool:
    """`folded` is the example's feedback copied: close to it as a whole and in its own words
    once the criteria's descriptions and hints, which any feedback on them may quote, are taken
    out of both. The server's words for the criteria (feedback_words) quote the same
    descriptions in another frame and are no copy."""
    if SequenceMatcher(None, folded, example, autojunk=False).ratio() < _COPIED:
        return False
    quoted = sorted({q.strip().rstrip(". ").casefold() for c in check.rubric.criteria
                     for q in (c.description, c.hint or "") if q.strip()}, key=len, reverse=True)

    def frame(text: str) -> str:
        for q in quoted:
            text = text.replace(q, "\x00")
        return text

    return SequenceMatcher(None, frame(folded), frame(example), autojunk=False).ratio() >= _COPIED


def copies_example(check: Check, result: JudgeResult) -> bool:
    """The prompt's example for `check` sent back: its criterion scores, every one, and its
    feedback. That is no judgement of the answer (a small model copies it whatever the
    learner wrote), so the judge call treats it as an invalid reply."""
    example = example_reply(check)
    return (result.criteria_scores == {k: float(v) for k, v in example["criteriaScores"].items()}
            and is_template_feedback(result.feedback, check))


def settle(check: Check, result: JudgeResult, answer: str, *, material: Iterable[str] = (),
           language: str | None = None) -> Verdict:
    """The server's judgement of `answer` from a model judge's `result` (see the module
    docstring). `material`: what the learner was shown of the topic (copied answers)."""
    t = translator(language)
    scored = {name: value for name, value in result.criteria_scores.items() if name in check.rubric.names}
    flags: list[str] = []
    if len(scored) < len(check.rubric.criteria):
        flags.append("judge_criteria_missing")
    raw = criteria_score(check, scored)
    if abs(result.score - raw) > DISAGREEMENT:
        flags.append("judge_score_recomputed")
    text = answer[:MAX_ANSWER_CHARS]
    ruled = apply_rules(check, text, int(raw + 0.5 + 1e-9), material=material, t=t)
    if ruled.score < int(raw + 0.5 + 1e-9):
        flags.append("judge_capped")
    template = is_template_feedback(result.feedback, check)
    if template:
        flags.append("judge_template_feedback")
    other_side = (result.score >= check.threshold) != (ruled.score >= check.threshold)
    feedback = result.feedback.strip()
    if template or ruled.found or other_side:
        ratios = {c.name: scored.get(c.name, 0.0) / 10 for c in check.rubric.criteria}
        feedback = feedback_words(check, ratios, ruled, len(answer) > MAX_ANSWER_CHARS, t)
    if flags:
        log.warning("check %s: model judge said %s, its criteria give %.1f, the server scored %s (%s)",
                    check.id, result.score, raw, ruled.score, ", ".join(flags))
    settled = JudgeResult(score=ruled.score, feedback=feedback, criteria_scores=scored)
    return Verdict(settled, flags, result.score, round(raw, 2))
