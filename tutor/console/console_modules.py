"""Per-module numbers for operators, and the progress export.

Seen topics come from the progress record (the server's, tutor.progress); mastery from the
judged answers of the learner's active conversation in the module (tutor.teach.teaching's rule:
every check of a topic at or above its threshold), exactly as the learner's own progress
bar counts them. A learner "stopped" when their last message in the module is older than
a day and the module is not complete; where they stopped is the last topic they had seen.
"""

from __future__ import annotations

import csv
import io
import json
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import func
from sqlmodel import col, select

from tutor import progress as progress_mod
from tutor.content.modules import Library, Module
from tutor.progress import ProgressState
from tutor.storage.store import (
    Account,
    CheckAttempt,
    Conversation,
    Learner,
    Message,
    ProgressRecord,
    Store,
    iso_utc,
    utcnow,
)
from tutor.teach.teaching import mastered_from

__all__ = ["CheckStats", "FieldStats", "ModuleStats", "OptionCount", "TopicStats", "module_stats",
           "progress_csv", "progress_rows", "csv_cell", "STOPPED_AFTER"]

STOPPED_AFTER = timedelta(days=1)
FORM_MESSAGES = 5_000  # newest form answers read per module
TOP_OPTIONS = 10  # answers listed per field; the rest are counted together
CSV_HEADER = ["learner", "username", "module", "topics seen", "topics mastered", "percent", "last activity"]


@dataclass(frozen=True)
class TopicStats:
    topic_id: str
    title: str
    seen: int
    mastered: int
    has_checks: bool
    stopped_here: int  # learners who stopped with this as the last topic they saw


@dataclass(frozen=True)
class OptionCount:
    value: str
    label: str
    count: int


@dataclass(frozen=True)
class FieldStats:
    form_id: str
    field_id: str
    label: str
    answers: int
    options: list[OptionCount] = field(default_factory=list)
    other: int = 0  # answers beyond the TOP_OPTIONS listed


@dataclass(frozen=True)
class CheckStats:
    check_id: str
    topic_id: str
    judged: int
    failed: int  # the judge could not score the answer
    mean: float | None
    median: float | None


@dataclass(frozen=True)
class ModuleStats:
    module_id: str
    title: str
    learners: int
    stopped: int
    stopped_before_any: int  # stopped learners who had seen no topic
    topics: list[TopicStats] = field(default_factory=list)
    fields: list[FieldStats] = field(default_factory=list)
    checks: list[CheckStats] = field(default_factory=list)


def module_stats(store: Store, module: Module, *, now: datetime | None = None) -> ModuleStats:
    now = now or utcnow()
    with store.session(read_only=True) as s:
        states = {lid: _state(cov) for lid, cov in s.exec(
            select(ProgressRecord.learner_id, ProgressRecord.covered_json)
            .where(ProgressRecord.module_id == module.id)).all()}
        last_message = dict(s.exec(
            select(Conversation.learner_id, func.max(Message.created_at))
            .join(Message, col(Message.conversation_id) == Conversation.id)
            .where(Conversation.module_id == module.id).group_by(Conversation.learner_id)).all())
        learners = set(s.exec(select(Conversation.learner_id).where(Conversation.module_id == module.id)
                              .distinct()).all())
        mastered = _mastery(s, module, module.id)
        scores = s.exec(select(CheckAttempt.check_id, CheckAttempt.topic_id, CheckAttempt.score)
                        .where(CheckAttempt.module_id == module.id)).all()
        answers = s.exec(
            select(Message.form_id, Message.answers_json)
            .join(Conversation, col(Conversation.id) == Message.conversation_id)
            .where(Conversation.module_id == module.id, Message.role == "learner",
                   col(Message.form_id).is_not(None))
            .order_by(col(Message.id).desc()).limit(FORM_MESSAGES)).all()

    seen_counts: Counter[str] = Counter()
    mastered_counts: Counter[str] = Counter()
    stopped_at: Counter[str] = Counter()
    stopped = 0
    for learner_id in learners | set(states):
        state = ProgressState(covered=states.get(learner_id, ProgressState()).covered,
                              mastered=mastered.get(learner_id, ()))
        seen = progress_mod.covered_ids(module, state)
        seen_counts.update(seen)
        mastered_counts.update(progress_mod.mastered_ids(module, state))
        last = last_message.get(learner_id)
        if last is not None and _aware(last) < now - STOPPED_AFTER and not progress_mod.is_complete(module, state):
            stopped += 1
            stopped_at[seen[-1] if seen else ""] += 1
    topics = [TopicStats(t.id, t.title, seen_counts[t.id], mastered_counts[t.id], bool(t.checks), stopped_at[t.id])
              for t in module.topics]
    return ModuleStats(
        module_id=module.id, title=module.title, learners=len(learners | set(states)), stopped=stopped,
        stopped_before_any=stopped_at[""], topics=topics, fields=_field_stats(module, answers),
        checks=_check_stats(module, scores),
    )


def _state(covered_json: str | None) -> ProgressState:
    try:
        return ProgressState.from_dict({"covered": json.loads(covered_json or "[]")})
    except ValueError:
        return ProgressState()


def _aware(moment: datetime) -> datetime:
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment


def _mastery(s: Any, module: Module | None, module_id: str | None) -> dict[int, tuple[str, ...]]:
    """Learner id -> topics mastered in their active conversation in the module (the newest
    one, as tutor.teach.mastery.learner_state reads it)."""
    query = (select(Conversation.learner_id, Conversation.id, CheckAttempt.check_id, CheckAttempt.score)
             .join(CheckAttempt, col(CheckAttempt.conversation_id) == Conversation.id)
             .where(Conversation.status == "active", Conversation.module_id == module_id)
             .order_by(col(Conversation.updated_at).desc(), col(CheckAttempt.id)))
    newest: dict[int, int] = {}
    scored: dict[int, list[tuple[str, int | None]]] = defaultdict(list)
    for learner_id, conversation_id, check_id, score in s.exec(query).all():
        if newest.setdefault(learner_id, conversation_id) == conversation_id:
            scored[learner_id].append((check_id, score))
    if module is None:
        return {}
    return {learner_id: mastered_from(module, rows) for learner_id, rows in scored.items()}


def _field_stats(module: Module, answers: Iterable[tuple[str | None, str | None]]) -> list[FieldStats]:
    labels = _module_form_labels(module)
    counts: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    totals: Counter[tuple[str, str]] = Counter()
    for form_id, answers_json in answers:
        try:
            data = json.loads(answers_json or "{}")
        except ValueError:
            continue
        if not isinstance(data, dict):
            continue
        for field_id, value in data.items():
            values = value if isinstance(value, list) else [value]
            values = [str(v).strip()[:80] for v in values if v not in (None, "")]
            if not values:
                continue
            key = (str(form_id), str(field_id))
            totals[key] += 1
            counts[key].update(values)
    out = []
    for (form_id, field_id), counter in sorted(counts.items()):
        field_label, option_labels = labels.get((form_id, field_id), (field_id, {}))
        top = counter.most_common(TOP_OPTIONS)
        out.append(FieldStats(
            form_id=form_id, field_id=field_id, label=field_label, answers=totals[(form_id, field_id)],
            options=[OptionCount(v, option_labels.get(v, v), n) for v, n in top],
            other=sum(counter.values()) - sum(n for _, n in top),
        ))
    return out


def _module_form_labels(module: Module) -> dict[tuple[str, str], tuple[str, dict[str, str]]]:
    labels = {}
    for topic in module.topics:
        if topic.form is None:
            continue
        for f in topic.form.fields:
            options = {str(o.value): str(o.label) for o in (f.options or [])}
            labels[(topic.form.id, f.id)] = (str(getattr(f, "label", None) or f.id), options)
    return labels


def _check_stats(module: Module, rows: Iterable[tuple[str, str, int | None]]) -> list[CheckStats]:
    by_check: dict[tuple[str, str], list[int | None]] = defaultdict(list)
    for check_id, topic_id, score in rows:
        by_check[(check_id, topic_id)].append(score)
    order = {t.id: i for i, t in enumerate(module.topics)}
    out = []
    for (check_id, topic_id), scores in sorted(by_check.items(), key=lambda kv: (order.get(kv[0][1], 1 << 30), kv[0])):
        judged = [s for s in scores if s is not None]
        out.append(CheckStats(
            check_id=check_id, topic_id=topic_id, judged=len(judged), failed=len(scores) - len(judged),
            mean=round(statistics.fmean(judged), 1) if judged else None,
            median=float(statistics.median(judged)) if judged else None,
        ))
    return out


# ----------------------------------------------------------------------------- export


def progress_rows(store: Store, library: Library) -> list[list[str]]:
    """One row per learner and module they have progress in (CSV_HEADER's columns)."""
    with store.session(read_only=True) as s:
        records = s.exec(
            select(ProgressRecord, Learner.key, Account.username)
            .join(Learner, col(Learner.id) == ProgressRecord.learner_id)
            .outerjoin(Account, col(Account.learner_id) == Learner.id)
            .order_by(col(Learner.id), col(ProgressRecord.module_id))).all()
        last = {(lid, mid): moment for lid, mid, moment in s.exec(
            select(Conversation.learner_id, Conversation.module_id, func.max(Message.created_at))
            .join(Message, col(Message.conversation_id) == Conversation.id)
            .group_by(Conversation.learner_id, Conversation.module_id)).all()}
        mastery = {mid: _mastery(s, library.modules.get(mid), mid)
                   for mid in {record.module_id for record, _, _ in records}}
    rows = []
    for record, key, username in records:
        module = library.modules.get(record.module_id)
        state = ProgressState(covered=_state(record.covered_json).covered,
                              mastered=mastery.get(record.module_id, {}).get(record.learner_id, ()))
        moment = last.get((record.learner_id, record.module_id)) or record.updated_at
        if module is None:  # a module no longer served: what the record says
            seen, mastered, percent = str(len(state.covered)), "", ""
        else:
            seen = str(progress_mod.coverage_count(module, state))
            mastered = str(len(progress_mod.mastered_ids(module, state)))
            percent = f"{progress_mod.percentage(module, state):g}"
        rows.append([key, username or "", record.module_id, seen, mastered, percent, iso_utc(moment)])
    return rows


def csv_cell(value: Any) -> str:
    """A cell a spreadsheet will not run as a formula (OWASP's CSV injection advice: a cell
    starting with = + - @, a tab or a carriage return is prefixed with a quote)."""
    text = "" if value is None else str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def progress_csv(store: Store, library: Library) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_HEADER)
    for row in progress_rows(store, library):
        writer.writerow([csv_cell(c) for c in row])
    return out.getvalue()

