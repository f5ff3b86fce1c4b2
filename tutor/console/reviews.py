"""The review list: what an operator should look at, most urgent first.

1. Learner messages the safety screen flagged (`RiskEvent`), each with its evidence read
   back from the stored message at the recorded offsets and checked against the recorded
   SHA-256 (a mismatch says the message changed since).
2. Tutor turns that need a look without a risk: failed closed (flag `needs_review`, seed
   003), cut at the token limit (`truncated`), stopped by the learner (`stopped`), or whose
   judge failed (`judge_failed`).

Unreviewed before reviewed, safety flags before turns, newest first. A risk flag's review
mark is kept on its `RiskEvent`; a turn's in `TurnReview`. With `details` each item also
carries the tutor's raw reply (capped) and every model attempt from the audit table.

Operators see learners' words here; learners never see any of it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import or_
from sqlmodel import col, select

from tutor.llm.redact import scrub, scrub_data
from tutor.risk.screen import span_hash
from tutor.storage.store import (
    Account,
    AuditEvent,
    Conversation,
    Learner,
    Message,
    RiskEvent,
    Store,
    TurnReview,
    iso_utc,
    utcnow,
)

__all__ = ["REVIEW_FLAGS", "RAW_CAP", "Attempt", "ReviewItem", "attempt_of", "mark_reviewed", "mark_turn_reviewed",
           "review_list", "learner_label"]

# A tutor turn carrying one of these goes to the review list.
REVIEW_FLAGS = ("needs_review", "truncated", "stopped", "judge_failed", "judge_score_recomputed")
# Characters of a raw reply shown; the rest is counted, not shown. A page of 20 items stays
# well under the event socket's 1 MB message limit.
RAW_CAP = 8_000
MAX_ATTEMPTS = 20  # audit rows shown per item

Pricer = Callable[[int, int], "float | None"]


@dataclass(frozen=True)
class Attempt:
    """One model call of a turn, as the audit table keeps it."""

    attempt: int
    kind: str  # first | retry | reask | risk_screen | judge ...
    provider: str
    model: str
    strategy: str
    outcome: str
    error_class: str
    latency_ms: float
    tokens_in: int
    tokens_out: int
    cost: float | None = None
    error: str = ""  # short, scrubbed
    hint: str = ""  # what an operator should do, scrubbed

    def to_json_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class ReviewItem:
    kind: str  # risk | turn
    id: int  # RiskEvent id (risk) or the tutor Message id (turn)
    created_at: str
    module_id: str
    conversation_id: int
    learner_key: str
    label: str  # risk label, or the turn's flags joined
    confidence: float | None = None
    source: str | None = None  # the layer that raised a risk: offline (phrases) | semantic | model
    severity: str = ""  # a risk's: imminent | serious
    evidence: list[dict[str, Any]] = field(default_factory=list)  # field, start, end, snippet, verified
    reviewed_at: str | None = None
    reviewed_by: str | None = None
    note: str | None = None
    username: str = ""  # the learner's account, if they have one
    flags: list[str] = field(default_factory=list)
    reply_id: int | None = None  # the tutor message (a turn's own id; what a flagged learner was shown)
    raw: str = ""  # with details: the tutor's raw reply, capped at RAW_CAP
    raw_omitted: int = 0  # characters of the raw reply left out
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def learner(self) -> str:
        return learner_label(self.learner_key, self.username)

    def to_json_dict(self) -> dict[str, Any]:
        data = dict(self.__dict__)
        data["attempts"] = [a.to_json_dict() for a in self.attempts]
        return data


def learner_label(key: str, username: str | None) -> str:
    """The username when the learner has an account, else the key shortened."""
    if username:
        return username
    return key if len(key) <= 10 else key[:8] + "…"


def review_list(
    store: Store, *, include_reviewed: bool = False, limit: int = 100, offset: int = 0,
    details: bool = False, pricer: Pricer | None = None,
) -> list[ReviewItem]:
    """One page of the list. `details`: raw replies and audit attempts too; `pricer(tokens_in,
    tokens_out)` prices an attempt (None: no price configured)."""
    limit, offset = max(1, limit), max(0, offset)
    wanted = offset + limit
    with store.session(read_only=True) as s:
        risks = (
            select(RiskEvent, Message, Conversation, Learner, Account.username)
            .join(Message, col(Message.id) == RiskEvent.message_id)
            .join(Conversation, col(Conversation.id) == RiskEvent.conversation_id)
            .join(Learner, col(Learner.id) == Conversation.learner_id)
            .outerjoin(Account, col(Account.learner_id) == Learner.id)
        )
        if not include_reviewed:
            risks = risks.where(col(RiskEvent.reviewed_at).is_(None))
        risks = risks.order_by(col(RiskEvent.reviewed_at).is_not(None), col(RiskEvent.severity) != "imminent",
                               col(RiskEvent.created_at).desc(), col(RiskEvent.id).desc()).limit(wanted)
        items = [_risk_item(*row) for row in s.exec(risks)]
        turns = (
            select(Message, Conversation, Learner, Account.username, TurnReview)
            .join(Conversation, col(Conversation.id) == Message.conversation_id)
            .join(Learner, col(Learner.id) == Conversation.learner_id)
            .outerjoin(Account, col(Account.learner_id) == Learner.id)
            .outerjoin(TurnReview, col(TurnReview.message_id) == Message.id)
            .where(Message.role == "tutor",
                   or_(*(col(Message.flags_json).contains(f'"{flag}"', autoescape=True) for flag in REVIEW_FLAGS)),
                   # a safety turn is reviewed through its risk flag
                   ~col(Message.flags_json).contains('"risk:', autoescape=True),
                   ~col(Message.flags_json).contains('"screen_failed"', autoescape=True))
        )
        if not include_reviewed:
            turns = turns.where(col(TurnReview.id).is_(None))
        turns = turns.order_by(col(TurnReview.id).is_not(None), col(Message.created_at).desc(),
                               col(Message.id).desc()).limit(wanted)
        items += [_turn_item(*row) for row in s.exec(turns)]
        # Unreviewed first, imminent risks first among them; stable: newest first kept.
        items.sort(key=lambda i: (i.reviewed_at is not None, i.kind != "risk", i.severity != "imminent"))
        page = items[offset:offset + limit]
        if details and page:
            page = _with_details(s, page, pricer)
        return page


def mark_reviewed(store: Store, risk_id: int, *, by: str, note: str | None = None) -> bool:
    """Mark a flagged message reviewed; False when there is no such flag."""
    with store.session() as s:
        risk = s.get(RiskEvent, risk_id)
        if risk is None:
            return False
        risk.reviewed_at, risk.reviewed_by, risk.review_note = utcnow(), by, note or None
        s.add(risk)
        s.commit()
        return True


def mark_turn_reviewed(store: Store, message_id: int, *, by: str, note: str | None = None) -> bool:
    """Mark a tutor turn reviewed (again: the newest mark wins); False when there is no such
    tutor message."""
    with store.session() as s:
        message = s.get(Message, message_id)
        if message is None or message.role != "tutor":
            return False
        mark = s.exec(select(TurnReview).where(TurnReview.message_id == message_id)).first()
        mark = mark or TurnReview(message_id=message_id, reviewed_by=by)
        mark.reviewed_at, mark.reviewed_by, mark.note = utcnow(), by, note or None
        s.add(mark)
        s.commit()
        return True


def _risk_item(risk: RiskEvent, message: Message, conv: Conversation, learner: Learner,
               username: str | None) -> ReviewItem:
    return ReviewItem(
        kind="risk", id=risk.id or 0, created_at=iso_utc(risk.created_at), module_id=risk.module_id,
        conversation_id=risk.conversation_id, learner_key=learner.key, label=risk.label,
        confidence=risk.confidence, source=risk.source, severity=risk.severity or "",
        evidence=[_read_back(message, e) for e in risk.evidence],
        reviewed_at=iso_utc(risk.reviewed_at) if risk.reviewed_at else None,
        reviewed_by=risk.reviewed_by, note=risk.review_note, username=username or "",
        reply_id=risk.reply_id,
    )


def _turn_item(message: Message, conv: Conversation, learner: Learner, username: str | None,
               mark: TurnReview | None) -> ReviewItem:
    flags = [f for f in message.flags if f != "needs_review"]
    return ReviewItem(
        kind="turn", id=message.id or 0, created_at=iso_utc(message.created_at), module_id=conv.module_id,
        conversation_id=conv.id or 0, learner_key=learner.key, label=", ".join(flags) or "needs_review",
        reviewed_at=iso_utc(mark.reviewed_at) if mark else None, reviewed_by=mark.reviewed_by if mark else None,
        note=mark.note if mark else None, username=username or "", flags=message.flags, reply_id=message.id,
    )


def _with_details(s: Any, page: list[ReviewItem], pricer: Pricer | None) -> list[ReviewItem]:
    reply_ids = [i.reply_id for i in page if i.reply_id]
    raws = dict(s.exec(select(Message.id, Message.raw).where(col(Message.id).in_(reply_ids))).all()) \
        if reply_ids else {}
    audits: dict[int, list[Attempt]] = {}
    if reply_ids:
        rows = s.exec(select(AuditEvent).where(col(AuditEvent.message_id).in_(reply_ids))
                      .order_by(col(AuditEvent.id))).all()
        for row in rows:
            audits.setdefault(row.message_id or 0, []).append(attempt_of(row, pricer))
    out = []
    for item in page:
        raw = raws.get(item.reply_id or -1) or ""
        out.append(replace(item, raw=raw[:RAW_CAP], raw_omitted=max(0, len(raw) - RAW_CAP),
                           attempts=audits.get(item.reply_id or -1, [])[:MAX_ATTEMPTS]))
    return out


def attempt_of(row: AuditEvent, pricer: Pricer | None = None) -> Attempt:
    """An audit row for an operator's eyes: its error and hint scrubbed again (a key set
    since the row was written is hidden too)."""
    try:
        detail = json.loads(row.detail_json or "{}")
    except ValueError:
        detail = {}
    detail = scrub_data(detail) if isinstance(detail, dict) else {}
    return Attempt(
        attempt=row.attempt, kind=str(detail.get("kind") or ""), provider=row.provider, model=scrub(row.model),
        strategy=row.strategy, outcome=row.outcome, error_class=row.error_class or "",
        latency_ms=round(row.latency_ms or 0.0, 1), tokens_in=row.tokens_in or 0, tokens_out=row.tokens_out or 0,
        cost=pricer(row.tokens_in or 0, row.tokens_out or 0) if pricer else None,
        error=str(detail.get("error") or "")[:500], hint=str(detail.get("hint") or "")[:1000],
    )


def _read_back(message: Message, evidence: dict[str, Any]) -> dict[str, Any]:
    field_id = evidence.get("field")
    text = message.text if field_id is None else str((message.answers or {}).get(field_id, ""))
    start, end = int(evidence.get("start", 0)), int(evidence.get("end", 0))
    snippet = text[start:end] if 0 <= start <= end <= len(text) else ""
    verified = bool(snippet) and span_hash(snippet) == evidence.get("sha256")
    return {"field": field_id, "start": start, "end": end, "snippet": snippet, "verified": verified}
