"""Evaluate a backend and strategy (seed 001) by playing a suite of learner turns.

A suite (YAML, read by tutor.turns.eval_suite) names a module and lists conversations of
learner turns: questions, off-topic and adversarial messages, form answers. Each conversation runs through the real
Engine on a throwaway SQLite database, so every turn takes the production path: prompt
assembly, provider call, repair, re-ask, fail-closed, server-side progress.

Metrics per strategy, one row each (definitions in `StrategyRow`). Beside the parse outcome
(valid / repaired / invalid), each turn says whether the learner was shown a usable lesson:
the model's reply, not a fallback, whose text passes the content gate (tutor.llm.usable), so
a strategy whose replies are schema-valid placeholders ("...") scores 0 usable.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from tutor.llm.base import ChatMessage, CompletionRequest, LearnerInput, Provider, TurnContext
from tutor.llm.config import STRATEGIES, LLMSettings
from tutor.llm.policy import AttemptRecord
from tutor.llm.usable import Sent, check
from tutor.turns.eval_suite import Suite, SuiteConversation, SuiteTurn
from tutor.turns.prompts import OPENING_TURN, system_prompt


@dataclass
class TurnRecord:
    """One tutor turn as the learner saw it, with the audit of its model calls."""

    strategy: str
    conversation: str
    run: int
    index: int  # 0 = the tutor's opening turn
    kind: str  # opening | text | form | form_as_text | refused
    outcome: str | None
    flags: list[str]
    attempts: list[AttemptRecord]
    latency_ms: float  # wall clock of the whole turn, as the learner waits for it
    tags: tuple[str, ...] = ()
    error: str | None = None  # input refused by the engine (the suite is wrong), or a crash
    usable: bool = False  # a lesson from the model was shown, and its text passes the content gate
    junk: list[str] = field(default_factory=list)  # the gate's reasons when the shown reply fails it

    @property
    def calls(self) -> list[AttemptRecord]:
        # Model calls: not a budget check that skipped one, nor the built-in tutor standing in.
        return [a for a in self.attempts if a.outcome not in ("skipped", "fallback")]

    @property
    def first_reply(self) -> AttemptRecord | None:
        """The first call that produced a completion (transport retries before it skipped)."""
        return next((a for a in self.calls if a.outcome != "error"), None)

    @property
    def fallback(self) -> bool:
        return "needs_review" in self.flags or "fallback_apology" in self.flags

    def to_json_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["tags"] = list(self.tags)
        return data


@dataclass
class StrategyRow:
    """Seed 001's table, one strategy. Rates are percentages of the turns the model
    answered: a turn the safety screen answered with the author's reply (no model call for
    the reply) is counted in `safety`, not in the model's rates."""

    strategy: str
    turns: int
    json_parse: float  # first reply was one strict JSON object, as sent
    schema_compliance: float  # first reply valid against RESPONSE_SCHEMA without any repair
    structured: float  # the learner saw a structured reply (valid or repaired, after any re-ask)
    usable: float  # ... and it was the model's lesson, with text that passes the content gate
    repaired: float  # the reply shown needed repair
    fallback: float  # failed closed: markdown of the raw text, or an apology
    apology: float  # of which nothing usable came back: an apology, or the module's own turn in its place
    retries_per_turn: float  # model calls beyond the first (transport retries and re-asks)
    latency_p50_ms: float
    latency_p95_ms: float
    tokens_in_per_turn: float
    tokens_out_per_turn: float
    cost_per_turn: float | None
    cost_total: float | None
    errors: int = 0  # turns whose input the engine refused (a suite problem) or that crashed
    safety: int = 0  # turns answered by the safety screen with the author's reply

    def to_json_dict(self) -> dict[str, Any]:
        return asdict(self)


def percentile(values: Iterable[float], pct: float) -> float:
    """Linear-interpolated percentile (numpy's default); 0 for no values."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    rank = (len(ordered) - 1) * pct / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def summarize(records: list[TurnRecord], settings: LLMSettings | None = None) -> list[StrategyRow]:
    """Per-strategy rows, in the order strategies first appear."""
    order = list(dict.fromkeys(r.strategy for r in records))
    return [_row(s, [r for r in records if r.strategy == s], settings) for s in order]


def _row(strategy: str, all_records: list[TurnRecord], settings: LLMSettings | None) -> StrategyRow:
    answered = [r for r in all_records if r.error is None]
    played = [r for r in answered if not any(flag.startswith("risk:") for flag in r.flags)]
    n = len(played)

    def pct(pred: Callable[[TurnRecord], bool]) -> float:
        return round(100 * sum(1 for r in played if pred(r)) / n, 1) if n else 0.0

    def mean(values: list[float]) -> float:
        return round(sum(values) / n, 2) if n else 0.0

    tokens_in = [sum(a.tokens_in for a in r.calls) for r in played]
    tokens_out = [sum(a.tokens_out for a in r.calls) for r in played]
    cost_total = settings.cost(sum(tokens_in), sum(tokens_out)) if settings else None
    latencies = [r.latency_ms for r in played]
    return StrategyRow(
        strategy=strategy,
        turns=n,
        json_parse=pct(lambda r: bool(r.first_reply and r.first_reply.strict_json)),
        schema_compliance=pct(lambda r: bool(r.first_reply and r.first_reply.outcome == "valid")),
        structured=pct(lambda r: not r.fallback and r.outcome in ("valid", "repaired")),
        usable=pct(lambda r: r.usable),
        repaired=pct(lambda r: not r.fallback and r.outcome == "repaired"),
        fallback=pct(lambda r: r.fallback),
        apology=pct(lambda r: "fallback_apology" in r.flags or "builtin_fallback" in r.flags),
        retries_per_turn=mean([max(0, len(r.calls) - 1) for r in played]),
        latency_p50_ms=round(percentile(latencies, 50), 1),
        latency_p95_ms=round(percentile(latencies, 95), 1),
        tokens_in_per_turn=mean(tokens_in),
        tokens_out_per_turn=mean(tokens_out),
        cost_per_turn=None if cost_total is None or not n else cost_total / n,
        cost_total=cost_total,
        errors=len(all_records) - len(answered),
        safety=len(answered) - n,
    )


_TABLE = [
    ("Turns", "turns", "{:d}"),
    ("Answered by the safety screen", "safety", "{:d}"),
    ("JSON parse rate", "json_parse", "{:.1f}%"),
    ("Schema compliance", "schema_compliance", "{:.1f}%"),
    ("Structured reply shown", "structured", "{:.1f}%"),
    ("Usable lesson shown", "usable", "{:.1f}%"),
    ("Repaired", "repaired", "{:.1f}%"),
    ("Fallback (fail closed)", "fallback", "{:.1f}%"),
    ("  of which apology", "apology", "{:.1f}%"),
    ("Retries per turn", "retries_per_turn", "{:.2f}"),
    ("Latency p50", "latency_p50_ms", "ms"),
    ("Latency p95", "latency_p95_ms", "ms"),
    ("Tokens in per turn", "tokens_in_per_turn", "{:,.0f}"),
    ("Tokens out per turn", "tokens_out_per_turn", "{:,.0f}"),
    ("Cost per turn", "cost_per_turn", "${:.5f}"),
    ("Cost total", "cost_total", "${:.4f}"),
    ("Refused/crashed turns", "errors", "{:d}"),
]


def format_table(rows: list[StrategyRow]) -> str:
    """A markdown table like seed 001's: metrics down, strategies across."""
    has_cost = any(r.cost_total is not None for r in rows)
    header = "| Metric | " + " | ".join(r.strategy for r in rows) + " |"
    lines = [header, "|" + "---|" * (len(rows) + 1)]
    for label, attr, fmt in _TABLE:
        if attr.startswith("cost") and not has_cost:
            continue
        cells = [_cell(getattr(r, attr), fmt) for r in rows]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _cell(value: Any, fmt: str) -> str:
    if value is None:
        return "n/a"
    if fmt == "ms":
        return f"{value / 1000:.2f}s" if value >= 1000 else f"{value:.0f}ms"
    return fmt.format(value)


def strategies_from_args(values: list[str] | None, configured: str) -> list[str]:
    if not values:
        return [configured]
    if "all" in values:
        return list(STRATEGIES)
    return list(dict.fromkeys(values))


async def run_suite(
    suite: Suite,
    settings: LLMSettings,
    library: Any,
    *,
    strategies: list[str] | None = None,
    runs: int = 1,
    provider_factory: Callable[[LLMSettings], Provider] | None = None,
    on_turn: Callable[[TurnRecord], None] | None = None,
) -> list[TurnRecord]:
    """Play the suite `runs` times per strategy, each strategy on its own throwaway database."""
    from tutor.llm.factory import make_provider
    from tutor.storage.store import Store
    from tutor.turns.engine import (
        Engine,  # the engine pulls in the database layer; evals only need it here
    )

    module = library.get(suite.module_id)  # a module that fails its check stops the run before any call
    prompt = _instructions_of(module)
    factory = provider_factory or make_provider
    records: list[TurnRecord] = []
    for strategy in strategies or [settings.strategy]:
        s_settings = replace(settings, strategy=strategy)
        provider = factory(s_settings)
        with tempfile.TemporaryDirectory(prefix="tutor-eval-") as tmp:
            store = Store(f"sqlite:///{Path(tmp) / 'eval.db'}")
            store.create_all()
            engine = Engine(store, provider, library, s_settings)
            try:
                for run in range(1, runs + 1):
                    for conv in suite.conversations:
                        for record in await _play(engine, suite, conv, strategy, run, prompt):
                            records.append(record)
                            if on_turn:
                                on_turn(record)
            finally:
                await provider.aclose()
                store.dispose()
    return records


def _instructions_of(module: Any) -> str:
    """The instructions every turn's prompt carries (rules, module, author, contract), less
    the module's material a reply may quote: what a shown reply must not copy."""
    from tutor.progress import ProgressState

    state = ProgressState()
    context = TurnContext(module=module, progress=state, detected=frozenset(), learner=None, turn_index=0)
    system = ChatMessage("system", system_prompt(module, state))
    return Sent.of(CompletionRequest([system], 0.0, 1, context=context)).prompt


async def _play(engine: Any, suite: Suite, conv: SuiteConversation, strategy: str, run: int,
                prompt: str = "") -> list[TurnRecord]:
    from tutor.turns.engine import InputError

    out: list[TurnRecord] = []
    learner = f"eval:{strategy}:{run}:{conv.name}"
    view = await engine.open(learner, suite.module_id, new=True, defer_opening=True)
    started = time.perf_counter()
    opening = await engine.respond_pending(view.id)
    out.append(_record(strategy, conv, run, 0, "opening", opening, started, (), Sent(OPENING_TURN, prompt)))
    for index, turn in enumerate(conv.turns, start=1):
        tags = tuple(dict.fromkeys((*conv.tags, *turn.tags)))
        kind = turn.kind
        said = turn.text or ""
        started = time.perf_counter()
        try:
            try:
                result = await engine.send(view.id, _learner_input(turn))
            except InputError:
                if not (turn.form_id and turn.else_text):
                    raise
                kind = "form_as_text"  # the tutor did not offer this form here: answer in words
                started = time.perf_counter()
                result = await engine.send(view.id, LearnerInput(text=turn.else_text))
                said = turn.else_text
        except InputError as exc:
            out.append(TurnRecord(strategy, conv.name, run, index, "refused", None, [], [], 0.0, tags,
                                  error=exc.message))
            continue
        out.append(_record(strategy, conv, run, index, kind, result, started, tags, Sent(said, prompt)))
    return out


def _learner_input(turn: SuiteTurn) -> LearnerInput:
    if turn.form_id:
        return LearnerInput(form_id=turn.form_id, answers=dict(turn.answers or {}))
    return LearnerInput(text=turn.text)


def _record(strategy: str, conv: SuiteConversation, run: int, index: int, kind: str, result: Any,
            started: float, tags: tuple[str, ...], sent: Sent) -> TurnRecord:
    latency = (time.perf_counter() - started) * 1000
    reply = result.reply
    record = TurnRecord(strategy, conv.name, run, index, kind, reply.outcome, list(reply.flags),
                        list(result.attempts), round(latency, 1), tags or conv.tags)
    if reply.response is not None and not record.fallback and reply.outcome in ("valid", "repaired") \
            and not any(flag.startswith("risk:") for flag in reply.flags):
        # The shown reply judged again here, as the learner saw it: the eval does not take
        # the policy's word for it. Anything the gate names (a marker left in, too) is junk.
        verdict = check(reply.response, sent)
        record.usable, record.junk = not verdict.flags, list(verdict.flags)
    return record


def report_json(suite: Suite, settings: LLMSettings, rows: list[StrategyRow], records: list[TurnRecord],
                runs: int) -> dict[str, Any]:
    return {
        "suite": suite.name,
        "module": suite.module_id,
        "backend": {"provider": settings.provider, "model": settings.model, "base_url": settings.base_url},
        "runs": runs,
        "rows": [r.to_json_dict() for r in rows],
        "turns": [r.to_json_dict() for r in records],
    }


__all__ = [
    "StrategyRow",
    "TurnRecord",
    "format_table",
    "percentile",
    "report_json",
    "run_suite",
    "strategies_from_args",
    "summarize",
]
