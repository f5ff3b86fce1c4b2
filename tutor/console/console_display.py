"""What the operator console shows, as plain data: the console's reads (tutor.console.reviews,
tutor.console.console, tutor.console.console_modules) turned into strings and flat rows a page can render
without formatting logic of its own. One call loads a whole view (`load_console`), so the
page makes one trip to the database threads per refresh.

The console is in English; its counts go through the catalogue's plural forms
(`Translator.plural`: "1 learner", "2 learners"). Times come in UTC, labelled so
("2026-11-25 14:03 UTC"), with their ISO 8601 form beside them: the page shows each in the
viewer's own zone (components/operator.py), the UTC time on hover, and the CLI prints UTC."""

from __future__ import annotations

import dataclasses
import unicodedata
from collections.abc import Callable

from tutor.console.console import HealthWindow, backend_health
from tutor.console.console_modules import module_stats
from tutor.console.reviews import Attempt, ReviewItem, review_list
from tutor.console.transcript import TranscriptLine
from tutor.content.modules import Library
from tutor.i18n import Translator, translator
from tutor.storage.store import Store

__all__ = ["REVIEW_PAGE", "ConsoleData", "console_time", "load_console"]

REVIEW_PAGE = 20  # review items per page


@dataclasses.dataclass
class EvidenceRow:
    where: str
    snippet: str
    check: str  # "" when the hash matches, else why it does not


@dataclasses.dataclass
class AttemptRow:
    attempt: str
    kind: str
    provider: str
    model: str
    strategy: str
    outcome: str
    error_class: str
    latency: str
    tokens_in: str
    tokens_out: str
    cost: str
    error: str
    hint: str


@dataclasses.dataclass
class ReviewRow:
    key: str  # "risk-12" | "turn-40": what "Mark reviewed" names
    kind: str
    kind_label: str
    created_at: str  # console_time: UTC, labelled
    created_iso: str  # the same moment, ISO 8601 (the page shows it in the viewer's zone)
    module_id: str
    module_title: str  # the module's title; its id when the library no longer has it
    learner: str
    label: str
    detail: str  # confidence and source of a safety flag
    reviewed: bool
    reviewed_line: str
    evidence: list[EvidenceRow] = dataclasses.field(default_factory=list)
    raw: str = ""
    raw_more: str = ""
    attempts: list[AttemptRow] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class TranscriptRow:
    key: str  # "m-<seq>"
    who: str  # "Learner" | "Tutor"
    when: str  # console_time
    when_iso: str
    text: str
    focus: bool  # the message the review item is about
    flags: str  # a tutor turn's flags, joined; ""


@dataclasses.dataclass
class CountRow:
    outcome: str
    error_class: str
    count: str


@dataclasses.dataclass
class WindowRow:
    label: str
    calls: str  # "1 call", "12 calls"
    p50: str
    p95: str
    counts: list[CountRow] = dataclasses.field(default_factory=list)
    builtin: str = ""  # "Built-in tutor: 3 turns, not model calls …"; "" when it wrote none


@dataclasses.dataclass
class ErrorRow:
    created_at: str
    created_iso: str
    provider: str
    model: str
    kind: str
    error_class: str
    status: str
    error: str
    hint: str


@dataclasses.dataclass
class TopicRow:
    title: str
    seen: str
    mastered: str
    stopped_here: str


@dataclasses.dataclass
class OptionRow:
    label: str
    count: str


@dataclasses.dataclass
class FieldRow:
    key: str
    title: str
    answers: str  # "1 answer", "3 answers"
    options: list[OptionRow] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class CheckRow:
    check_id: str
    topic: str
    judged: str
    failed: str
    mean: str
    median: str


@dataclasses.dataclass
class ModuleView:
    module_id: str = ""
    title: str = ""
    learners: str = "0 learners"
    stopped: str = ""  # the stopped learners, as a sentence in the catalogue's plural forms
    topics: list[TopicRow] = dataclasses.field(default_factory=list)
    fields: list[FieldRow] = dataclasses.field(default_factory=list)
    checks: list[CheckRow] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class ScreenRow:
    model: str
    screens: str
    failed: str
    rate: str


@dataclasses.dataclass
class ConsoleData:
    reviews: list[ReviewRow]
    has_more: bool
    windows: list[WindowRow]
    errors: list[ErrorRow]
    module: ModuleView
    screens: list[ScreenRow] = dataclasses.field(default_factory=list)


def _builtin_line(window: HealthWindow, t: Translator) -> str:
    if not window.builtin_turns:
        return ""
    line = "Built-in tutor: " + t.plural("{n:,} turn", "{n:,} turns", window.builtin_turns) + \
        " (not model calls, not in the latency)"
    if window.fallback_turns:
        line += "; " + t.plural("{n:,} stood in for a failed model turn", "{n:,} stood in for failed model turns",
                                window.fallback_turns)
    return line + "."


def load_console(
    store: Store, library: Library, *, include_reviewed: bool, page: int, module_id: str,
    pricer: Callable[[int, int], float | None] | None = None, t: Translator | None = None,
) -> ConsoleData:
    """Everything one refresh of the console shows: a page of the review list (and whether
    there is a next), backend health, and one module's numbers."""
    t = t or translator(None)
    titles = {m.id: m.title for m in library.modules.values()}
    items = review_list(store, include_reviewed=include_reviewed, limit=REVIEW_PAGE + 1,
                        offset=max(0, page) * REVIEW_PAGE, details=True, pricer=pricer)
    health = backend_health(store)
    module = library.modules.get(module_id)
    return ConsoleData(
        reviews=[review_row(i, titles, t) for i in items[:REVIEW_PAGE]],
        has_more=len(items) > REVIEW_PAGE,
        windows=[WindowRow(w.label, t.plural("{n:,} call", "{n:,} calls", w.calls), _ms(w.latency_p50_ms), _ms(w.latency_p95_ms),
                           [CountRow(c.outcome, c.error_class or "—", f"{c.count:,}") for c in w.counts],
                           _builtin_line(w, t))
                 for w in health.windows],
        errors=[ErrorRow(console_time(e.created_at), e.created_at, e.provider, e.model, e.kind, e.error_class,
                         str(e.http_status) if e.http_status else "", e.error, e.hint)
                for e in health.recent_errors],
        module=module_view(store, library, module_id, t) if module is not None else ModuleView(),
        screens=[ScreenRow(f"{h.provider} · {h.model}", f"{h.screens:,}", f"{h.failed:,}", f"{h.failure_rate:.0%}")
                 for h in health.screens],
    )


SEVERITY_WORDS = {"imminent": "IMMINENT", "serious": "serious"}
LAYER_WORDS = {"offline": "phrase layer", "semantic": "semantic layer", "offline+semantic": "phrase and semantic layers",
               "model": "model screen"}


def console_time(iso: str | None) -> str:
    """A stored time (ISO 8601 in UTC, tutor.storage.store.iso_utc) as the console shows it:
    "2026-11-25 14:03 UTC". Anything else is shown as it is."""
    text = iso or ""
    if len(text) == 20 and text[10] == "T" and text.endswith("Z"):
        return f"{text[:10]} {text[11:16]} UTC"
    return text


def review_row(item: ReviewItem, titles: dict[str, str] | None = None, t: Translator | None = None) -> ReviewRow:
    t = t or translator(None)
    reviewed = item.reviewed_at is not None
    line = ""
    if reviewed:
        line = f"Reviewed by {item.reviewed_by or 'someone'} at {console_time(item.reviewed_at)}" + \
            (f" — {item.note}" if item.note else "")
    detail = ""
    if item.kind == "risk":
        detail = ", ".join(part for part in (
            SEVERITY_WORDS.get(item.severity, ""), LAYER_WORDS.get(item.source or "", item.source or "screen"),
            f"confidence {item.confidence or 0:.2f}") if part)
    return ReviewRow(
        key=f"{item.kind}-{item.id}", kind=item.kind,
        kind_label="Safety flag" if item.kind == "risk" else "Tutor turn",
        created_at=console_time(item.created_at), created_iso=item.created_at, module_id=item.module_id,
        module_title=(titles or {}).get(item.module_id, item.module_id), learner=item.learner, label=item.label,
        detail=detail, reviewed=reviewed, reviewed_line=line,
        evidence=[EvidenceRow(
            where=f"{'field ' + str(e['field']) if e.get('field') else 'message'} [{e['start']}:{e['end']}]",
            snippet=e["snippet"], check="" if e["verified"] else "hash mismatch: the message changed since")
            for e in item.evidence],
        # Composed (NFC): a model may write Vietnamese as letters plus combining marks, which a
        # monospace font draws detached from their letters; the text is the same.
        raw=unicodedata.normalize("NFC", item.raw),
        raw_more=t.plural("… {n:,} more character not shown", "… {n:,} more characters not shown",
                          item.raw_omitted) if item.raw_omitted else "",
        attempts=[attempt_row(a) for a in item.attempts],
    )


def transcript_rows(lines: list[TranscriptLine]) -> list[TranscriptRow]:
    return [TranscriptRow(f"m-{line.seq}", "Learner" if line.role == "learner" else "Tutor",
                          console_time(line.created_at), line.created_at, line.text, line.focus,
                          ", ".join(line.flags))
            for line in lines]


def attempt_row(a: Attempt) -> AttemptRow:
    return AttemptRow(
        attempt=str(a.attempt), kind=a.kind, provider=a.provider, model=a.model, strategy=a.strategy,
        outcome=a.outcome, error_class=a.error_class or "—", latency=_ms(a.latency_ms),
        tokens_in=f"{a.tokens_in:,}", tokens_out=f"{a.tokens_out:,}",
        cost="—" if a.cost is None else f"{a.cost:.6f}", error=a.error, hint=a.hint,
    )


def module_view(store: Store, library: Library, module_id: str, t: Translator | None = None) -> ModuleView:
    t = t or translator(None)
    module = library.get(module_id)
    stats = module_stats(store, module)
    titles = {t.id: t.title for t in module.topics}
    return ModuleView(
        module_id=stats.module_id, title=stats.title,
        learners=t.plural("{n:,} learner", "{n:,} learners", stats.learners),
        stopped=t.plural("{n:,} stopped (no message for a day, module not complete), {before:,} of them before any topic",
                         "{n:,} stopped (no message for a day, module not complete), {before:,} of them before any topic",
                         stats.stopped, before=stats.stopped_before_any),
        topics=[TopicRow(t.title, f"{t.seen:,}", f"{t.mastered:,}" if t.has_checks else "no checks",
                         f"{t.stopped_here:,}") for t in stats.topics],
        fields=[FieldRow(
            key=f"{f.form_id}-{f.field_id}", title=f"{f.form_id} · {f.label}",
            answers=t.plural("{n:,} answer", "{n:,} answers", f.answers),
            options=[OptionRow(o.label, f"{o.count:,}") for o in f.options]
            + ([OptionRow("(other answers)", f"{f.other:,}")] if f.other else []))
            for f in stats.fields],
        checks=[CheckRow(c.check_id, titles.get(c.topic_id, c.topic_id), f"{c.judged:,}", f"{c.failed:,}",
                         "—" if c.mean is None else f"{c.mean:g}", "—" if c.median is None else f"{c.median:g}")
                for c in stats.checks],
    )


def _ms(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value / 1000:.2f} s" if value >= 1000 else f"{value:.0f} ms"
