"""The built-in judge: scores an answer against a check's rubric with no model.

How it scores, in the order a learner would want it explained:

1. Each key point is found when the answer contains its phrase or one of its accepted
   alternatives as whole words (case and accents ignored; a trailing '*' accepts any
   ending; a plural 's' is ignored; one extra word may sit between a phrase's words).
2. A criterion scores the share of its key points found, out of `needs` (default: all),
   from 0 to 10. The answer's score is the weighted average, rounded half up.
3. Three rules keep the score honest, each capping it below any mastery threshold and
   saying why in the feedback:
   - a misconception the check lists, stated word for word without a negation in the 3
     words before it
     ("not", "never", "don't" ...): capped at 3, and the author's correction is shown;
   - two contrasted ideas swapped (tutor.teach.judge_meaning), or a relation of the check's
     model answer stated the other way round ("stress takes water out" where it pours in;
     "it is not useful in any amount" where a little is useful; tutor.teach.judge_direction):
     capped at 3, and the learner is asked to look again;
   - a list of terms rather than an explanation: at least 6 words of which fewer than 1 in 4
     are ordinary connecting words (is, because, the, và, là ...): capped at 4, asked to
     connect the ideas in a sentence;
   - text copied from the lesson: most of its 8-word runs appear in the material passed
     in: capped at 4, asked for the learner's own words.
4. Only the first MAX_ANSWER_CHARS characters are read.

Feedback names what was there and what was missing, kindly and once each: "You covered X.
A good next step: think about Y." (at mastery: "You could also mention Y.").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tutor.content.material import Check, Criterion
from tutor.i18n import Translator, translator
from tutor.teach.judge import MAX_ANSWER_CHARS, JudgeResult
from tutor.teach.judge_direction import reversed_idea
from tutor.teach.judge_meaning import (
    CONNECTING,
    JUDGE_ADDRESSED_CAP,
    Clauses,
    addressed_to_judge,
    anchors_of,
    is_term_list,
    negated_before,
)
from tutor.teach.phrases import AnswerText, compile_phrase
from tutor.text import words

if TYPE_CHECKING:  # pragma: no cover
    from tutor.content.modules import Module

__all__ = ["COPY_CAP", "LIST_CAP", "MISCONCEPTION_CAP", "Ruled", "apply_rules", "feedback_words", "judge_builtin",
           "next_step", "topic_material"]

MISCONCEPTION_CAP = 3
LIST_CAP = 4
COPY_CAP = 4
_LIST_MIN_WORDS = 6
_LIST_MAX_SHARE = 0.25
_SHINGLE = 8
_COPY_SHARE = 0.6


def judge_builtin(check: Check, answer: str, *, material: Iterable[str] = (), language: str | None = None
                  ) -> JudgeResult:
    """Score `answer` against `check`'s rubric. `material`: the lesson texts the learner has
    seen (topic content, source sections), used only to spot a copied answer. The feedback
    is in `language` (the module's)."""
    t = translator(language)
    text = answer[:MAX_ANSWER_CHARS] if isinstance(answer, str) else ""
    cut = isinstance(answer, str) and len(answer) > MAX_ANSWER_CHARS
    found = AnswerText(text)
    if not found.words:
        feedback = t("There's no answer here yet. Have a go in your own words; a sentence or two is plenty. "
                     "The question was: {question}", question=check.question)
        return JudgeResult(score=0, feedback=feedback, criteria_scores={c.name: 0.0 for c in check.rubric.criteria})
    parts = Clauses.read(check, text)
    anchored = bool(anchors_of(check))
    ratios = {c.name: parts.ratio(c, anchored) for c in check.rubric.criteria}
    total_weight = sum(c.weight for c in check.rubric.criteria)
    raw = 10 * sum(c.weight * ratios[c.name] for c in check.rubric.criteria) / total_weight
    rules = apply_rules(check, text, int(raw + 0.5), material=material, t=t, found=found, parts=parts)
    feedback = feedback_words(check, ratios, rules, cut, t)
    return JudgeResult(
        score=rules.score, feedback=feedback, criteria_scores={k: round(10 * v, 1) for k, v in ratios.items()}
    )


@dataclass(frozen=True)
class Ruled:
    """A score after the rules that keep it honest, and what the learner is told about them."""

    score: int
    wrong: list[str]  # corrections: a misconception stated, two ideas the wrong way round
    notes: list[str]  # why a cap applied (asked the judge for a score, a list of terms, copied text)
    named: frozenset[str] = frozenset()  # criteria a correction already names

    @property
    def found(self) -> bool:
        return bool(self.wrong or self.notes)


def apply_rules(check: Check, text: str, score: int, *, material: Iterable[str] = (), t: Translator,
                found: AnswerText | None = None, parts: Clauses | None = None) -> Ruled:
    """The rules of step 3 (module docstring) on `score`, whoever gave it: this judge, or a
    model judge's criteria (tutor.teach.judge_verdict). `text`: the answer as read (at most
    MAX_ANSWER_CHARS)."""
    found = found if found is not None else AnswerText(text)
    parts = parts if parts is not None else Clauses.read(check, text)
    swap = parts.swapped(check)
    wrong = [m.feedback.strip() for m in check.misconceptions if _states(found, m.phrases)]
    notes: list[str] = []
    if swap is not None:
        wrong.append(t("Careful: it sounds like two ideas are the wrong way round. Think again about {first}, "
                       "and about {second}.", first=swap[0].description.rstrip(". "),
                       second=swap[1].description.rstrip(". ")))
    turned = reversed_idea(check, parts) if swap is None and not wrong else None
    if turned is not None:
        wrong.append(t("Careful: one part looks the wrong way round: \u201c{part}\u201d. Have another look at "
                       "which way that goes.", part=turned.answer_clause))
    if wrong:
        score = min(score, MISCONCEPTION_CAP)
    if addressed_to_judge(text) and score > JUDGE_ADDRESSED_CAP:
        score = JUDGE_ADDRESSED_CAP
        notes.append(t("I can only score what your answer explains, so asking for a score doesn't change it. "
                       "Tell me in your own words what you know."))
    listed = _is_term_list(found, text)
    if listed and score > LIST_CAP:
        score = LIST_CAP
        notes.append(t("You've named some of the right ideas. Try joining them up in a sentence or two that "
                       "explains how they fit together."))
    if _is_copied(found, material) and score > COPY_CAP:
        score = COPY_CAP
        notes.append(t("This looks copied from the lesson text. Try putting it in your own words; "
                       "that's what makes it stick."))
    named = frozenset({swap[0].name, swap[1].name}) if swap is not None else frozenset()
    if turned is not None:  # what the turned clause speaks of is not "covered"
        said = parts.found[turned.index]
        named |= {c.name for c in check.rubric.criteria if any(said.contains_any(p.phrasings) for p in c.points)}
    return Ruled(score, wrong, notes, named)


def topic_material(module: Module, topic_id: str) -> list[str]:
    """What the learner was shown for a topic: its content and the source sections it points
    at (for spotting an answer pasted back from the lesson)."""
    topic = module.topic(topic_id)
    if topic is None:
        return []
    texts = [topic.content] if topic.content else []
    for ref in topic.sources:
        source_id, _, section_id = ref.partition("#")
        source = module.loaded_sources.get(source_id)
        if source is not None:
            texts += [s.text for s in source.sections if not section_id or s.id == section_id]
    return texts


def _states(found: AnswerText, phrases: Sequence[str]) -> bool:
    """A phrase is stated unless one of the few words just before it negates it."""
    for phrase in phrases:
        for start, _end in found.find(compile_phrase(phrase), gap=0):  # misconceptions: exact
            if not negated_before(found, start):
                return True
    return False


def _is_term_list(found: AnswerText, text: str) -> bool:
    if len(found.raw) < _LIST_MIN_WORDS:
        return False
    connecting = sum(1 for w in found.raw if w in CONNECTING)
    return connecting / len(found.raw) < _LIST_MAX_SHARE or is_term_list(text)


def _is_copied(found: AnswerText, material: Iterable[str]) -> bool:
    runs = _shingles(found.raw)
    if len(runs) < 3:
        return False
    seen: set[tuple[str, ...]] = set()
    for text in material:
        seen |= _shingles(words(text))
    return len(runs & seen) / len(runs) >= _COPY_SHARE


def _shingles(ws: Sequence[str]) -> set[tuple[str, ...]]:
    return {tuple(ws[i:i + _SHINGLE]) for i in range(len(ws) - _SHINGLE + 1)}


def feedback_words(check: Check, ratios: Mapping[str, float], ruled: Ruled, cut: bool, t: Translator) -> str:
    """The server's feedback for criteria met to `ratios` (0-1 each) and a score after the
    rules (`ruled`): what was there, what is missing, once each — a criterion is named at
    most once (the one to work on next is named only as the next step), and an answer at
    mastery gets no "to complete it", at most what it could also mention. Also said for a
    model judge's criteria when its own words cannot be shown (tutor.teach.judge_verdict)."""
    score, wrong, notes, named = ruled.score, ruled.wrong, ruled.notes, ruled.named
    # The most important first; criteria a correction already names (`named`) are not named again.
    criteria = sorted((c for c in check.rubric.criteria if c.name not in named), key=lambda c: -c.weight)
    full = [c for c in criteria if ratios[c.name] >= 1.0]
    todo = [c for c in criteria if ratios[c.name] < 1.0]
    todo.sort(key=lambda c: ratios[c.name] == 0)  # part-way first: closest to done
    mastered = score >= check.threshold
    nudge = todo[0] if todo else None
    partly = [c for c in todo if 0 < ratios[c.name] < 1.0 and c is not nudge]
    parts: list[str] = []
    if cut:
        parts.append(t("That's a long answer, so I focused on the first part of it."))
    if mastered:
        parts.append(t("Well done!") if not todo else t("Nicely done."))
    elif full or partly or (nudge is not None and ratios[nudge.name] > 0):
        parts.append(t("Good start."))
    else:
        parts.append(t("Thanks for having a go."))
    if full:
        parts.append(t("You covered {ideas}.", ideas=_join([c.description for c in full], t)))
    if partly:
        parts.append(t("You're part of the way on {ideas}.", ideas=_join([c.description for c in partly], t)))
    parts += wrong + notes
    if nudge is None and not mastered:
        parts.append(t("Have another go whenever you like."))
    elif nudge is not None:
        if mastered:
            parts.append(t("You could also mention {hint}.", hint=(nudge.hint or nudge.description).rstrip(". ")))
        else:
            parts.append(next_step(check, t, nudge))
            parts.append(t("Have another go whenever you like."))
    return " ".join(parts)


def next_step(check: Check, t: Translator, criterion: Criterion | None = None) -> str:
    """"A good next step: think about Y." for `criterion`, by default the check's weightiest
    (the first of equals): after a partial answer, and for a learner who does not know where
    to start."""
    criterion = criterion or max(check.rubric.criteria, key=lambda c: c.weight)
    hint = (criterion.hint or criterion.description).rstrip(". ")
    if hint.casefold().startswith("that "):  # "think about that in the right amount…" reads wrong
        return t("A good next step: say {hint}.", hint=hint)
    return t("A good next step: think about {hint}.", hint=hint)


def _join(items: list[str], t: Translator) -> str:
    items = [i.rstrip(". ") for i in items]
    return items[0] if len(items) == 1 else t("{first}; and {last}", first="; ".join(items[:-1]), last=items[-1])
