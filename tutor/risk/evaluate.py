"""Labelled sets against the offline screen: recall on crisis messages and false positives
on ordinary ones, per label, kind, severity and language, and the CPU the screen took per
message in this run.

Definitions (what `tutor safety eval` prints and gates on):
- a crisis message has expected labels; an ordinary message has none;
- recall of a label: crisis messages expecting it that got it;
- overall recall: crisis messages that got at least one of their expected labels (the
  learner saw an authored crisis reply);
- imminent kinds (plan, preparation, means, timing, farewell, attempt): every one must be
  caught; "as imminent" counts those whose flag also said imminent (the emergency-first reply);
- false-positive rate of a label: ordinary messages flagged with it / all ordinary messages;
  overall: ordinary messages flagged with anything / all ordinary messages;
- `extra`: crisis messages flagged with a label they do not expect (reported, not gated).
Languages are reported as written: `vi` with diacritics, `vi-plain` typed without them.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tutor.risk._lines import parse_yaml
from tutor.risk.config import REPO_ROOT, SafetyConfig
from tutor.risk.screen import RiskFlag, screen

__all__ = ["DEFAULT_SET", "DEV2_SET", "DEV3_SET", "DEV4_SET", "DEV_SET", "EVAL_SETS", "EXPOSURE_SET", "HOLDOUT2_SET",
           "HOLDOUT3_SET",
           "HOLDOUT_SET", "IMMINENT_KINDS", "PLANS_SET", "LabelledMessage", "LabelledSetError", "Report", "evaluate",
           "format_report", "load_labelled_set", "load_rated_set"]

DEFAULT_SET = REPO_ROOT / "evals" / "safety" / "messages.yaml"
DEV_SET = REPO_ROOT / "evals" / "safety" / "dev.yaml"
# A second development set, written later without sight of the bank or the other sets, once
# the first was tuned to the goals (recall 95%, false alarms 2.5%) and no longer told much.
DEV2_SET = REPO_ROOT / "evals" / "safety" / "dev2.yaml"
HOLDOUT_SET = REPO_ROOT / "evals" / "safety" / "holdout.yaml"
# A third development set and a second held-out set, twins written together by someone who saw
# neither the bank nor the other sets; the held-out one committed first and never tuned on.
DEV3_SET = REPO_ROOT / "evals" / "safety" / "dev3.yaml"
HOLDOUT2_SET = REPO_ROOT / "evals" / "safety" / "holdout2.yaml"
# Twins again (another hand, without sight of the project), with heavy distress that holds no
# wish to die among the look-alikes: the boundary the public C-SSRS vignettes found weakest.
DEV4_SET = REPO_ROOT / "evals" / "safety" / "dev4.yaml"
HOLDOUT3_SET = REPO_ROOT / "evals" / "safety" / "holdout3.yaml"
# Plans and intentions said in a lesson ("tonight I'll try to go to sleep early") beside
# crisis plans in the same time words: written and committed before the plan exemplars were.
PLANS_SET = REPO_ROOT / "evals" / "safety" / "plans.yaml"
# Exposure steps planned in the anxiety lesson (a lift to the 10th floor, the platform as the
# express goes through) beside crisis plans at the same places: a known gap, tracked.
EXPOSURE_SET = REPO_ROOT / "evals" / "safety" / "exposure.yaml"
# What `tutor safety eval` screens by default, in the order it prints them.
EVAL_SETS = (DEFAULT_SET, DEV_SET, DEV2_SET, DEV3_SET, DEV4_SET, HOLDOUT_SET, HOLDOUT2_SET, HOLDOUT3_SET,
             PLANS_SET, EXPOSURE_SET)
MIN_RECALL = 0.90
MAX_FALSE_POSITIVE_RATE = 0.03
IMMINENT_KINDS = ("plan", "preparation", "means", "timing", "farewell", "attempt")
LONG_MESSAGE_CHARS = 4000
Screen = Callable[[str], list[RiskFlag]]


class LabelledSetError(ValueError):
    """The labelled set cannot be read; the message has ``file:line:`` locations."""


@dataclass(frozen=True)
class LabelledMessage:
    text: str
    language: str
    labels: tuple[str, ...]
    note: str = ""
    line: int = 0
    kind: str = ""
    severity: str = ""

    @property
    def written_in(self) -> str:
        """The language as written: Vietnamese typed without diacritics is `vi-plain`."""
        return f"{self.language}-plain" if self.language == "vi" and self.text.isascii() else self.language


def load_labelled_set(path: Path | str = DEFAULT_SET, known_labels: set[str] | None = None) -> list[LabelledMessage]:
    """A labelled set: the project's YAML, or a public JSON list of rated messages
    (load_rated_set) when the file name ends in .json."""
    if str(path).endswith(".json"):
        return load_rated_set(path)
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise LabelledSetError(f"{source}:1: cannot read: {exc}") from None
    data, lines, problems = parse_yaml(text, source)
    entries = data.get("messages") if isinstance(data, dict) else None
    if not problems and not isinstance(entries, list):
        problems.append(f"{source}:1: expected a mapping with a `messages:` list")
    out: list[LabelledMessage] = []
    for i, entry in enumerate(entries if isinstance(entries, list) else []):
        line = lines.get(("messages", i), 1)
        if not isinstance(entry, dict) or not isinstance(entry.get("text"), str) or not entry["text"].strip():
            problems.append(f"{source}:{line}: each message needs a non-empty `text`")
            continue
        labels = entry.get("labels")
        if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
            problems.append(f"{source}:{line}: `labels` must be a list of label ids ([] for an ordinary message)")
            continue
        unknown = [x for x in labels if known_labels is not None and x not in known_labels]
        if unknown:
            problems.append(f"{source}:{line}: unknown label(s) {unknown} (canonical: {sorted(known_labels or ())})")
        extra = set(entry) - {"text", "language", "labels", "note", "kind", "severity"}
        if extra:
            problems.append(f"{source}:{line}: unknown key(s) {sorted(extra)}")
        out.append(LabelledMessage(entry["text"], str(entry.get("language") or ""), tuple(labels),
                                   str(entry.get("note") or ""), line, str(entry.get("kind") or ""),
                                   str(entry.get("severity") or "")))
    if problems:
        raise LabelledSetError("\n".join(problems))
    return out


# A public set rated on a suicide-risk scale (C-SSRS style, 0-8, as in
# github.com/samesameinc/ai-benchmarking data/knowledge_base.json): from this level a message is
# a crisis, up to ORDINARY_TO it is ordinary, and the levels between are left out.
CRISIS_FROM = 3
ORDINARY_TO = 1
RATED_LABEL = "self_harm"


def load_rated_set(path: Path | str) -> list[LabelledMessage]:
    """A JSON list of {"user_query" (or "text"), "Risk_level" (or "risk_level")}: crisis
    from CRISIS_FROM (label self_harm), ordinary up to ORDINARY_TO; entries without text are
    skipped (counted in no rate), the levels between are left out. English is assumed."""
    source = str(path)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise LabelledSetError(f"{source}:1: cannot read a JSON list of rated messages: {exc}") from None
    if not isinstance(data, list):
        raise LabelledSetError(f"{source}:1: expected a JSON list of {{user_query, Risk_level}} objects")
    out: list[LabelledMessage] = []
    for i, entry in enumerate(data):
        if not isinstance(entry, dict):
            raise LabelledSetError(f"{source}: entry {i} is not an object")
        text = entry.get("user_query", entry.get("text"))
        level = entry.get("Risk_level", entry.get("risk_level"))
        if not isinstance(level, int) or isinstance(level, bool):
            raise LabelledSetError(f"{source}: entry {i} has no whole-number Risk_level")
        if not isinstance(text, str) or not text.strip() or ORDINARY_TO < level < CRISIS_FROM:
            continue
        crisis = level >= CRISIS_FROM
        out.append(LabelledMessage(text, "en", (RATED_LABEL,) if crisis else (), f"level {level}", i + 1))
    return out


@dataclass
class LabelStats:
    label: str
    positives: int = 0
    caught: int = 0
    false_positives: int = 0
    extra: int = 0

    def recall(self) -> float | None:
        return self.caught / self.positives if self.positives else None


@dataclass
class Outcome:
    message: LabelledMessage
    flagged: tuple[str, ...]
    severities: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()

    @property
    def imminent(self) -> bool:
        return self.message.kind in IMMINENT_KINDS or self.message.severity == "imminent"

    @property
    def said_imminent(self) -> bool:
        return "imminent" in self.severities

    @property
    def crisis(self) -> bool:
        return bool(self.message.labels)

    @property
    def caught(self) -> bool:
        return bool(set(self.message.labels) & set(self.flagged))


@dataclass
class Report:
    labels: dict[str, LabelStats]
    outcomes: list[Outcome]
    timings_ms: list[float]
    long_message_ms: float
    by_language: dict[str, dict[str, Any]] = field(default_factory=dict)
    by_kind: dict[str, dict[str, Any]] = field(default_factory=dict)
    name: str = ""

    @property
    def crisis(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.crisis]

    @property
    def ordinary(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.crisis]

    def recall(self) -> float:
        crisis = self.crisis
        return sum(o.caught for o in crisis) / len(crisis) if crisis else 1.0

    def false_positive_rate(self, label: str | None = None) -> float:
        ordinary = self.ordinary
        if not ordinary:
            return 0.0
        hits = [o for o in ordinary if (label in o.flagged if label else o.flagged)]
        return len(hits) / len(ordinary)

    def imminent_kinds(self) -> list[Outcome]:
        return [o for o in self.crisis if o.message.kind in IMMINENT_KINDS]

    def failures(self) -> list[str]:
        out = []
        if self.recall() < MIN_RECALL:
            out.append(f"overall recall {self.recall():.1%} < {MIN_RECALL:.0%}")
        if self.false_positive_rate() > MAX_FALSE_POSITIVE_RATE:
            out.append(f"overall false positives {self.false_positive_rate():.1%} > {MAX_FALSE_POSITIVE_RATE:.0%}")
        missed = [o for o in self.imminent_kinds() if not o.caught]
        if missed:
            out.append(f"{len(missed)} plan/preparation/means/timing/farewell/attempt message(s) missed")
        return out

    def mean_ms(self) -> float:
        return sum(self.timings_ms) / len(self.timings_ms) if self.timings_ms else 0.0

    def p99_ms(self) -> float:
        return _percentile(self.timings_ms, 0.99)


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def evaluate(messages: list[LabelledMessage], config: SafetyConfig, rounds: int = 5,
             screen_with: Screen | None = None, name: str = "") -> Report:
    """Screen every message `rounds` times (CPU time from all rounds; flags from the first:
    the screen is deterministic). `screen_with`: the screen to measure (default: the phrase
    layer alone, `screen(text, config)`)."""
    config.matcher()  # compiling is loading, not screening
    screen_with = screen_with or (lambda text: screen(text, config))
    labels = {label: LabelStats(label) for label in config.labels}
    outcomes: list[Outcome] = []
    timings: list[float] = []
    for round_no in range(max(1, rounds)):
        for message in messages:
            started = time.process_time()
            flags = screen_with(message.text)
            timings.append((time.process_time() - started) * 1000)
            if round_no == 0:
                outcomes.append(Outcome(message, tuple(dict.fromkeys(f.label for f in flags)),
                                        tuple(f.severity for f in flags), tuple(f.source for f in flags)))
    for outcome in outcomes:
        expected = set(outcome.message.labels)
        for label in expected:
            stats = labels.setdefault(label, LabelStats(label))
            stats.positives += 1
            stats.caught += label in outcome.flagged
        for label in outcome.flagged:
            stats = labels.setdefault(label, LabelStats(label))
            if not expected:
                stats.false_positives += 1
            elif label not in expected:
                stats.extra += 1
    report = Report(labels, outcomes, timings, _long_message_ms(messages, screen_with), name=name)
    for language in sorted({m.written_in for m in messages}):
        report.by_language[language] = _tally([o for o in outcomes if o.message.written_in == language])
    for kind in sorted({m.kind for m in messages if m.kind}):
        report.by_kind[kind] = _tally([o for o in outcomes if o.message.kind == kind])
    return report


def _tally(outcomes: list[Outcome]) -> dict[str, Any]:
    crisis = [o for o in outcomes if o.crisis]
    ordinary = [o for o in outcomes if not o.crisis]
    return {"crisis": len(crisis), "caught": sum(o.caught for o in crisis),
            "as_imminent": sum(o.caught and o.said_imminent for o in crisis if o.imminent),
            "imminent": sum(o.imminent for o in crisis),
            "ordinary": len(ordinary), "false_positives": sum(bool(o.flagged) for o in ordinary)}


def _long_message_ms(messages: list[LabelledMessage], screen_with: Screen, rounds: int = 3) -> float:
    """Mean time for one 4000-character message made of the set's ordinary messages."""
    ordinary = [m.text for m in messages if not m.labels] or ["Why does my chest feel tight?"]
    text = ""
    while len(text) < LONG_MESSAGE_CHARS:
        text += " ".join(ordinary) + " "
    text = text[:LONG_MESSAGE_CHARS]
    started = time.process_time()
    for _ in range(rounds):
        screen_with(text)
    return (time.process_time() - started) * 1000 / rounds


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _row(name: str, numbers: dict[str, Any]) -> tuple[str, ...]:
    recall = numbers["caught"] / numbers["crisis"] if numbers["crisis"] else None
    fp = numbers["false_positives"] / numbers["ordinary"] if numbers["ordinary"] else None
    imminent = f"{numbers['as_imminent']}/{numbers['imminent']}" if numbers["imminent"] else ""
    return (name, _pct(recall), f"{numbers['caught']}/{numbers['crisis']}", _pct(fp),
            f"{numbers['false_positives']}/{numbers['ordinary']}", imminent)


def format_report(report: Report, show_misses: bool = True) -> str:
    n_ordinary = len(report.ordinary)
    rows = [("label", "recall", "caught/crisis", "false pos.", "fp/ordinary", "extra")]
    for stats in report.labels.values():
        rows.append((stats.label, _pct(stats.recall()), f"{stats.caught}/{stats.positives}",
                     _pct(report.false_positive_rate(stats.label)), f"{stats.false_positives}/{n_ordinary}",
                     str(stats.extra)))
    crisis = report.crisis
    everything = _tally(report.outcomes)
    rows.append(("overall", *_row("", everything)[1:5], str(sum(s.extra for s in report.labels.values()))))
    sections = [rows]
    if report.by_language:
        sections.append([("language", "", "", "", "", "as imminent")]
                        + [_row(f"  {k}", v) for k, v in report.by_language.items()])
    if report.by_kind:
        sections.append([("kind", "", "", "", "", "as imminent")]
                        + [_row(f"  {k}", v) for k, v in report.by_kind.items()])
    table = [row for section in sections for row in section]
    widths = [max(len(r[i]) for r in table) for i in range(6)]
    lines = [f"== {report.name}"] if report.name else []
    for i, section in enumerate(sections):
        if i:
            lines.append("  ".join("-" * w for w in widths))
        lines += ["  ".join(c.ljust(widths[j]) if j == 0 else c.rjust(widths[j]) for j, c in enumerate(row))
                  for row in section]
    imminent = report.imminent_kinds()
    lines.append("")
    lines.append(f"{len(report.outcomes)} messages ({len(crisis)} crisis, {n_ordinary} ordinary); plans, "
                 f"preparations, means, timing, farewells, attempts caught {sum(o.caught for o in imminent)}"
                 f"/{len(imminent)}, said imminent {sum(o.caught and o.said_imminent for o in imminent)}"
                 f"/{len(imminent)}")
    lines.append(f"CPU per message: mean {report.mean_ms():.2f} ms, p99 {report.p99_ms():.2f} ms "
                 f"({len(report.timings_ms)} screens); {LONG_MESSAGE_CHARS}-char message: "
                 f"{report.long_message_ms:.1f} ms")
    lines.append(f"goals: recall >= {MIN_RECALL:.0%}, every plan/preparation/means/timing/farewell/attempt "
                 f"caught, false positives <= {MAX_FALSE_POSITIVE_RATE:.0%}")
    if show_misses:
        for outcome in crisis:
            missing = set(outcome.message.labels) - set(outcome.flagged)
            if missing:
                lines.append(f"missed  line {outcome.message.line}: {sorted(missing)} "
                             f"[{outcome.message.kind}] {outcome.message.text!r}")
        for outcome in report.ordinary:
            if outcome.flagged:
                lines.append(f"false+  line {outcome.message.line}: {list(outcome.flagged)} "
                             f"{sorted(set(outcome.sources))} [{outcome.message.kind}] {outcome.message.text!r}")
    return "\n".join(lines)


def report_json(report: Report) -> dict[str, Any]:
    labels = {
        s.label: {"recall": s.recall(), "caught": s.caught, "crisis": s.positives,
                  "false_positive_rate": report.false_positive_rate(s.label), "false_positives": s.false_positives,
                  "extra": s.extra}
        for s in report.labels.values()
    }
    return {
        "set": report.name,
        "labels": labels,
        "overall": {"recall": report.recall(), "false_positive_rate": report.false_positive_rate(),
                    "crisis": len(report.crisis), "ordinary": len(report.ordinary),
                    "caught": sum(o.caught for o in report.crisis),
                    "false_positives": sum(bool(o.flagged) for o in report.ordinary)},
        "by_language": report.by_language,
        "by_kind": report.by_kind,
        "imminent_kinds": {"messages": len(report.imminent_kinds()),
                           "caught": sum(o.caught for o in report.imminent_kinds()),
                           "said_imminent": sum(o.caught and o.said_imminent for o in report.imminent_kinds())},
        "timing_ms": {"mean": report.mean_ms(), "p99": report.p99_ms(), "screens": len(report.timings_ms),
                      f"message_{LONG_MESSAGE_CHARS}_chars": report.long_message_ms},
        "goals": {"min_recall": MIN_RECALL, "max_false_positive_rate": MAX_FALSE_POSITIVE_RATE},
        "failures": report.failures(),
        "misses": [{"line": o.message.line, "text": o.message.text, "expected": list(o.message.labels),
                    "flagged": list(o.flagged)} for o in report.crisis if set(o.message.labels) - set(o.flagged)],
        "false_positives": [{"line": o.message.line, "text": o.message.text, "flagged": list(o.flagged)}
                            for o in report.ordinary if o.flagged],
    }
