"""The operator console's reads that are not about modules: how the model backend has
been doing (calls by outcome and error, latency, the latest errors with what to do about
them), and finding a learner by key or username. Plain data for the page and the CLI.

Everything shown passes through `tutor.llm.redact.scrub` again, whatever was stored.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlmodel import col, select

from tutor.llm.redact import scrub
from tutor.storage.store import (
    Account,
    AuditEvent,
    Conversation,
    Learner,
    Store,
    iso_utc,
    utcnow,
)

__all__ = ["CallCount", "HealthWindow", "Health", "LearnerRef", "RecentError", "ScreenHealth", "backend_health",
           "find_learner", "percentile"]

RECENT_ERRORS = 10
# Latency percentiles are taken over at most this many of the newest calls of a window.
LATENCY_SAMPLE = 20_000


@dataclass(frozen=True)
class CallCount:
    outcome: str
    error_class: str  # "" for calls without an error
    count: int


@dataclass(frozen=True)
class HealthWindow:
    label: str  # "last hour" | "last day"
    calls: int
    counts: list[CallCount] = field(default_factory=list)  # most frequent first
    latency_p50_ms: float | None = None
    latency_p95_ms: float | None = None
    # Turns the built-in tutor wrote (the embedded default, or standing in for a failed
    # model turn): counted here, never as model calls or in the models' latency.
    builtin_turns: int = 0
    fallback_turns: int = 0  # of those, the module's lesson standing in for a failed model turn


@dataclass(frozen=True)
class RecentError:
    created_at: str
    provider: str
    model: str
    kind: str
    outcome: str
    error_class: str
    http_status: int | None
    error: str
    hint: str  # what an operator should do: the configuration hint, when the error had one


@dataclass(frozen=True)
class ScreenHealth:
    """The model safety screen, one model, last day: messages screened, and those whose
    screen gave no usable answer (each such turn went to the review list)."""

    provider: str
    model: str
    screens: int
    failed: int

    @property
    def failure_rate(self) -> float:
        return self.failed / self.screens if self.screens else 0.0


@dataclass(frozen=True)
class Health:
    windows: list[HealthWindow]
    recent_errors: list[RecentError]
    screens: list[ScreenHealth] = field(default_factory=list)


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0-100) by linear interpolation between closest ranks."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return round(ordered[low] + (ordered[high] - ordered[low]) * (pos - low), 1)


def _is_builtin(provider: str, outcome: str) -> bool:
    """A turn the built-in tutor wrote: its own provider, or its lesson standing in for a
    failed model turn (outcome "fallback")."""
    return provider == "builtin" or outcome == "fallback"


def backend_health(store: Store, *, now: datetime | None = None) -> Health:
    now = now or utcnow()
    windows = []
    with store.session(read_only=True) as s:
        for label, span in (("last hour", timedelta(hours=1)), ("last day", timedelta(days=1))):
            since = now - span
            rows = s.exec(
                select(AuditEvent.provider, AuditEvent.outcome, AuditEvent.error_class, AuditEvent.latency_ms)
                .where(col(AuditEvent.created_at) >= since)
                .order_by(col(AuditEvent.id).desc()).limit(LATENCY_SAMPLE)
            ).all()
            builtin = [row for row in rows if _is_builtin(row[0], row[1])]
            calls = [(outcome, error, lat) for provider, outcome, error, lat in rows
                     if not _is_builtin(provider, outcome)]
            counts = Counter((outcome, scrub(error or "")) for outcome, error, _ in calls)
            latencies = [float(lat) for outcome, _, lat in calls if lat is not None and outcome != "skipped"]
            windows.append(HealthWindow(
                label=label, calls=len(calls),
                counts=[CallCount(o, e, n) for (o, e), n in counts.most_common()],
                latency_p50_ms=percentile(latencies, 50), latency_p95_ms=percentile(latencies, 95),
                builtin_turns=len(builtin), fallback_turns=sum(1 for row in builtin if row[1] == "fallback"),
            ))
        errors = s.exec(
            select(AuditEvent).where(col(AuditEvent.error_class).is_not(None))
            .order_by(col(AuditEvent.id).desc()).limit(RECENT_ERRORS)
        ).all()
        screened = s.exec(
            select(AuditEvent.id, AuditEvent.message_id, AuditEvent.provider, AuditEvent.model, AuditEvent.outcome)
            .where(col(AuditEvent.created_at) >= now - timedelta(days=1),
                   col(AuditEvent.detail_json).contains('"risk_screen"', autoescape=True))
            .order_by(col(AuditEvent.id).desc()).limit(LATENCY_SAMPLE)
        ).all()
    return Health(windows=windows, recent_errors=[_recent(row) for row in errors], screens=_screens(screened))


def _screens(rows: list[Any]) -> list[ScreenHealth]:
    """Per model: one screen per message (its tries together), failed when no try was valid."""
    tries: dict[tuple[str, str, int], list[str]] = {}
    for row_id, message_id, provider, model, outcome in rows:
        tries.setdefault((provider, scrub(model), message_id or -row_id), []).append(outcome)
    per_model: dict[tuple[str, str], list[int]] = {}
    for (provider, model, _), outcomes in tries.items():
        counts = per_model.setdefault((provider, model), [0, 0])
        counts[0] += 1
        counts[1] += all(outcome != "valid" for outcome in outcomes)
    return sorted((ScreenHealth(p, m, n, failed) for (p, m), (n, failed) in per_model.items()),
                  key=lambda h: (-h.failure_rate, h.model))


def _recent(row: AuditEvent) -> RecentError:
    try:
        detail: dict[str, Any] = json.loads(row.detail_json or "{}")
    except ValueError:
        detail = {}
    if not isinstance(detail, dict):
        detail = {}
    status = detail.get("http_status")
    return RecentError(
        created_at=iso_utc(row.created_at), provider=row.provider, model=scrub(row.model),
        kind=str(detail.get("kind") or ""), outcome=row.outcome, error_class=scrub(row.error_class or ""),
        http_status=status if isinstance(status, int) else None,
        error=scrub(str(detail.get("error") or ""))[:500], hint=scrub(str(detail.get("hint") or ""))[:1000],
    )


@dataclass(frozen=True)
class LearnerRef:
    id: int
    key: str
    username: str  # "" without an account
    conversations: int


def find_learner(store: Store, key_or_username: str) -> LearnerRef | None:
    """A learner by account username (case-insensitive) or by learner key."""
    wanted = key_or_username.strip()
    if not wanted:
        return None
    with store.session(read_only=True) as s:
        row = s.exec(
            select(Learner, Account.username).join(Account, col(Account.learner_id) == Learner.id)
            .where(Account.username == wanted.lower())
        ).first()
        if row is None:
            row = s.exec(
                select(Learner, Account.username).outerjoin(Account, col(Account.learner_id) == Learner.id)
                .where(Learner.key == wanted)
            ).first()
        if row is None:
            return None
        learner, username = row
        count = len(s.exec(select(Conversation.id).where(Conversation.learner_id == learner.id)).all())
        return LearnerRef(learner.id or 0, learner.key, username or "", count)
