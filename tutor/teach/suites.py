"""Evidence suites for teaching: retrieval questions and judged answers, and their scores.

`evals/teach/questions.yaml`: learner questions, each with the topic that answers it.
`evals/teach/answers.yaml`: answers to the module's checks, each with the band of scores a
fair tutor would give. `tutor teach eval` runs both against a module (tutor/cli/teach_cmd.py).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from tutor.teach.builtin_judge import judge_builtin, topic_material
from tutor.teach.retrieval import Index

if TYPE_CHECKING:  # pragma: no cover
    from tutor.content.modules import Module

__all__ = [
    "DEFAULT_BANDS",
    "GOALS",
    "AnswerCase",
    "JudgeReport",
    "Question",
    "RetrievalReport",
    "SuiteError",
    "count",
    "evaluate_judge",
    "evaluate_retrieval",
    "load_answers",
    "load_questions",
]

GOALS = {"top1": 0.85, "top3": 0.95, "refused": 0.90, "judge": 0.90, "good_mastered": 0.90, "intent": 0.85}
DEFAULT_BANDS = {"good": (7, 10), "partial": (3, 6), "wrong": (0, 3), "swapped": (0, 3), "gaming": (0, 4)}
# A question's `topic:` may name no topic: `none` (off topic: the tutor must say the module
# does not cover it) or `medical` (a medicine, dose or diagnosis: the authored referral).
REFUSALS = ("none", "medical")
NEVER_MASTERED = ("wrong", "swapped", "gaming")


class SuiteError(ValueError):
    """A suite file that cannot be used; the message says where."""


@dataclass(frozen=True)
class Question:
    text: str
    topic: str
    lang: str = "en"
    also: tuple[str, ...] = ()
    held_out: bool = False


@dataclass(frozen=True)
class AnswerCase:
    check: str
    kind: str
    text: str
    band: tuple[int, int]
    lang: str = "en"


@dataclass(frozen=True)
class IntentCase:
    text: str
    intent: str
    check: str | None
    lang: str = "en"


def _load(path: str | Path, key: str) -> tuple[str, list[dict[str, Any]]]:
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise SuiteError(f"{path}: cannot read the suite: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("module"), str):
        raise SuiteError(f"{path}: a suite is a mapping with `module:` and `{key}:`")
    items = data.get(key)
    if not isinstance(items, list) or not items or not all(isinstance(i, dict) for i in items):
        raise SuiteError(f"{path}: `{key}:` needs a non-empty list of mappings")
    return data["module"], items


def load_questions(path: str | Path, module: Module) -> list[Question]:
    module_id, items = _load(path, "questions")
    _same_module(path, module_id, module)
    known = set(module.topic_ids)
    out = []
    for i, item in enumerate(items):
        text, topic, also = item.get("q"), item.get("topic"), tuple(item.get("also") or ())
        if not isinstance(text, str) or not text.strip():
            raise SuiteError(f"{path}: questions[{i}]: `q:` must be the question text")
        for name in (topic, *also):
            if name not in known and not (name == topic and name in REFUSALS):
                raise SuiteError(f"{path}: questions[{i}]: unknown topic {name!r} in module {module.id!r}")
        out.append(Question(text, topic, str(item.get("lang", "en")), also, bool(item.get("held_out", False))))
    return out


def load_answers(path: str | Path, module: Module) -> list[AnswerCase]:
    module_id, items = _load(path, "answers")
    _same_module(path, module_id, module)
    out = []
    for i, item in enumerate(items):
        check, kind, text = item.get("check"), item.get("kind"), item.get("text")
        if module.find_check(str(check)) is None:
            raise SuiteError(f"{path}: answers[{i}]: unknown check {check!r} in module {module.id!r}")
        if kind not in DEFAULT_BANDS:
            raise SuiteError(f"{path}: answers[{i}]: kind must be one of {', '.join(DEFAULT_BANDS)}")
        if not isinstance(text, str):
            raise SuiteError(f"{path}: answers[{i}]: `text:` must be the answer")
        band = item.get("band", DEFAULT_BANDS[kind])
        if not (isinstance(band, (list, tuple)) and len(band) == 2 and 0 <= band[0] <= band[1] <= 10):
            raise SuiteError(f"{path}: answers[{i}]: band must be [low, high] within 0-10")
        out.append(AnswerCase(str(check), kind, text, (int(band[0]), int(band[1])), str(item.get("lang", "en"))))
    return out


def load_intents(path: str | Path, module: Module) -> list[IntentCase]:
    from tutor.teach.understanding import INTENTS

    module_id, items = _load(path, "intents")
    _same_module(path, module_id, module)
    out = []
    for i, item in enumerate(items):
        text, intent, check = item.get("text"), item.get("intent"), item.get("check")
        if not isinstance(text, str):
            raise SuiteError(f"{path}: intents[{i}]: `text:` must be the message")
        if intent not in (*INTENTS, "distress"):
            raise SuiteError(f"{path}: intents[{i}]: intent must be one of {', '.join(INTENTS)}, distress")
        if check is not None and module.find_check(str(check)) is None:
            raise SuiteError(f"{path}: intents[{i}]: unknown check {check!r} in module {module.id!r}")
        out.append(IntentCase(text, intent, None if check is None else str(check), str(item.get("lang", "en"))))
    return out


def _same_module(path: str | Path, module_id: str, module: Module) -> None:
    if module_id != module.id:
        raise SuiteError(f"{path}: the suite is for module {module_id!r}, not {module.id!r}")


# --- retrieval ----------------------------------------------------------------------------


@dataclass
class Tally:
    n: int = 0
    top1: int = 0
    top3: int = 0
    strict_top1: int = 0
    strict_top3: int = 0
    refusals: int = 0  # questions the module does not answer (off topic, medical)
    refused: int = 0  # ... of which the tutor refused rightly
    wrongly_refused: int = 0  # on-topic questions read as off topic or medical

    def rates(self) -> dict[str, float]:
        n = self.n or 1
        return {"n": self.n, "top1": self.top1 / n, "top3": self.top3 / n,
                "strict_top1": self.strict_top1 / n, "strict_top3": self.strict_top3 / n,
                "refusals": self.refusals, "refused": self.refused / (self.refusals or 1),
                "wrongly_refused": self.wrongly_refused / n}


@dataclass
class RetrievalReport:
    groups: dict[str, Tally]  # "all", each language, "held_out"
    misses: list[dict[str, Any]]  # questions whose expected topic is not the top passage's
    passages: int
    build_ms: float
    query_ms_p50: float
    query_ms_max: float

    @property
    def ok(self) -> bool:
        total = self.groups["all"].rates()
        return (total["top1"] >= GOALS["top1"] and total["top3"] >= GOALS["top3"]
                and (not self.groups["all"].refusals or total["refused"] >= GOALS["refused"]))


def count(rows: Iterable[tuple[dict[str, list[int]], str]], right: bool) -> None:
    """One case counted in each (table, key) of `rows`: table[key] is [right, n]."""
    for table, key in rows:
        row = table.setdefault(key, [0, 0])
        row[0] += right
        row[1] += 1


def _as_labelled(intent: str) -> str:
    """The sets name no "social": a greeting, thanks or goodbye alone is small talk, which
    they label off_topic (the tutor replies in kind, teaches and judges nothing); nor
    "stuck": "I don't know" to a check is not answering it, as a skip is not."""
    return {"social": "off_topic", "stuck": "skip"}.get(intent, intent)


def evaluate_retrieval(module: Module, questions: list[Question], k: int = 3) -> RetrievalReport:
    """Each question read as the tutor reads it (tutor.teach.understanding): what it is
    doing, then the passages found by words and meaning. A question the module answers is
    a hit when its topic's passage comes first (top-1) or among the first `k`, and is not
    refused; a question it does not answer must be refused (off topic, or the medical
    referral)."""
    from tutor.teach.understanding import understand
    from tutor.understand import embedder

    builds = []
    for _ in range(3):  # the median of a few fresh builds (machines are shared and noisy)
        start = time.perf_counter()
        index = Index.from_module(module)
        builds.append((time.perf_counter() - start) * 1000)
    vectors = embedder().embed([q.text for q in questions])  # as the app reads a message
    groups: dict[str, Tally] = {"all": Tally()}
    misses: list[dict[str, Any]] = []
    timings = []
    for q, vector in zip(questions, vectors):
        start = time.perf_counter()
        read = understand(module, q.text, vector, None, k)
        timings.append((time.perf_counter() - start) * 1000)
        intent = _as_labelled(read.intent)
        refused = intent in ("off_topic", "medical")
        topics = [] if refused else [p.topic_id for p in read.found.passages]
        for name in ("all", q.lang, *(["held_out"] if q.held_out else [])):
            tally = groups.setdefault(name, Tally())
            if q.topic in REFUSALS:
                tally.refusals += 1
                tally.refused += intent == ("off_topic" if q.topic == "none" else "medical")
                continue
            accepted = {q.topic, *q.also}
            tally.n += 1
            tally.top1 += bool(topics) and topics[0] in accepted
            tally.top3 += bool(accepted & set(topics))
            tally.strict_top1 += bool(topics) and topics[0] == q.topic
            tally.strict_top3 += q.topic in topics
            tally.wrongly_refused += refused
        if q.topic in REFUSALS:
            if intent != ("off_topic" if q.topic == "none" else "medical"):
                misses.append({"question": q.text, "lang": q.lang, "expected": q.topic, "got": topics,
                               "intent": intent, "top3": False})
        elif not (topics and topics[0] in {q.topic, *q.also}):
            misses.append({"question": q.text, "lang": q.lang, "expected": q.topic, "got": topics,
                           "intent": intent, "top3": bool({q.topic, *q.also} & set(topics))})
    return RetrievalReport(groups, misses, len(index.passages), statistics.median(builds),
                           statistics.median(timings) if timings else 0.0, max(timings, default=0.0))


# --- intents ------------------------------------------------------------------------------


@dataclass
class IntentReport:
    n: int = 0
    right: int = 0
    by_intent: dict[str, list[int]] = field(default_factory=dict)  # expected -> [right, n]
    by_lang: dict[str, list[int]] = field(default_factory=dict)
    answers_missed: int = 0  # answers to the open check not judged
    judged_non_answers: int = 0  # other messages judged as answers (the worst confusion)
    misses: list[dict[str, Any]] = field(default_factory=list)

    @property
    def accuracy(self) -> float:
        return self.right / self.n if self.n else 0.0


def evaluate_intents(module: Module, cases: list[IntentCase], screen: Any = None) -> IntentReport:
    """Each message read with its check open (or none). `distress` is right when the safety
    screen (`screen(text)` -> truthy when flagged) catches it: it runs before anything else."""
    from tutor.teach.understanding import check_text, understand
    from tutor.understand import embedder

    report = IntentReport()
    vectors = embedder().embed([c.text for c in cases])  # as the app reads a message
    for case, vector in zip(cases, vectors):
        found = module.find_check(case.check) if case.check else None
        check_vector = embedder().embed([check_text(found[1])])[0] if found else None
        if screen is not None and screen(case.text):
            got = "distress"
        else:
            got = _as_labelled(understand(module, case.text, vector, check_vector,
                                          check_topic=found[0].id if found else None).intent)
        ok = got == case.intent
        report.n += 1
        report.right += ok
        count(((report.by_intent, case.intent), (report.by_lang, case.lang)), ok)
        report.answers_missed += case.intent == "answer" and got != "answer"
        report.judged_non_answers += case.intent != "answer" and got == "answer"
        if not ok:
            report.misses.append({"text": case.text, "lang": case.lang, "check": case.check,
                                  "expected": case.intent, "got": got})
    return report


# --- judging ------------------------------------------------------------------------------


@dataclass
class JudgeReport:
    n: int = 0
    within: int = 0
    by_kind: dict[str, list[int]] = field(default_factory=dict)  # kind -> [within, n]
    misses: list[dict[str, Any]] = field(default_factory=list)
    examples_mastered: int = 0
    examples: int = 0
    ms_per_answer: float = 0.0
    by_lang: dict[str, list[int]] = field(default_factory=dict)  # lang -> [within, n]
    good: int = 0
    good_mastered: int = 0
    wrongly_mastered: list[dict[str, Any]] = field(default_factory=list)  # wrong, swapped, gaming at mastery

    @property
    def agreement(self) -> float:
        return self.within / self.n if self.n else 0.0

    @property
    def good_mastered_rate(self) -> float:
        return self.good_mastered / self.good if self.good else 1.0

    @property
    def ok(self) -> bool:
        return (self.agreement >= GOALS["judge"] and self.examples_mastered == self.examples
                and not self.wrongly_mastered and self.good_mastered_rate >= GOALS["good_mastered"])


def evaluate_judge(module: Module, answers: list[AnswerCase]) -> JudgeReport:
    """The built-in judge against the suite's bands, and every check's own example answer
    (each must reach its mastery threshold, or the rubric is unfair to good answers)."""
    report = JudgeReport()
    start = time.perf_counter()
    for case in answers:
        found = module.find_check(case.check)
        assert found is not None  # load_answers checked it
        topic, check = found
        result = judge_builtin(check, case.text, material=topic_material(module, topic.id))
        inside = case.band[0] <= result.score <= case.band[1]
        report.n += 1
        report.within += inside
        count(((report.by_kind, case.kind), (report.by_lang, case.lang)), inside)
        mastered = result.score >= check.threshold
        if case.kind == "good":
            report.good += 1
            report.good_mastered += mastered
        elif case.kind in NEVER_MASTERED and mastered:
            report.wrongly_mastered.append({"check": case.check, "kind": case.kind, "score": result.score,
                                            "answer": case.text})
        if not inside:
            report.misses.append({"check": case.check, "kind": case.kind, "band": list(case.band),
                                  "score": result.score, "answer": case.text, "feedback": result.feedback})
    report.ms_per_answer = (time.perf_counter() - start) * 1000 / max(1, len(answers))
    for topic in module.topics:
        for check in topic.checks:
            report.examples += 1
            result = judge_builtin(check, check.example_answer)
            if result.score >= check.threshold:
                report.examples_mastered += 1
            else:
                report.misses.append({"check": check.id, "kind": "example_answer", "band": [check.threshold, 10],
                                      "score": result.score, "answer": check.example_answer,
                                      "feedback": result.feedback})
    return report
