"""The review list: what an operator should look at, most urgent first.

1. Learner messages the safety screen flagged (`RiskEvent`), unreviewed first, newest first;
   each with its evidence read back from the stored message at the recorded offsets and
   checked against the recorded SHA-256 (a mismatch says the message changed since).
2. Tutor turns that failed closed (flag `needs_review`, seed 003) without a risk.

Operators see learners' words here; learners never see any of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlmodel import col, select

from tutor.risk.screen import span_hash
from tutor.store import Conversation, Learner, Message, RiskEvent, Store, iso_utc, utcnow

__all__ = ["ReviewItem", "mark_reviewed", "review_list"]


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
    source: str | None = None
    evidence: list[dict[str, Any]] = field(default_factory=list)  # field, start, end, snippet, verified
    reviewed_at: str | None = None
    reviewed_by: str | None = None
    note: str | None = None

    def to_json_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def review_list(store: Store, *, include_reviewed: bool = False, limit: int = 100) -> list[ReviewItem]:
    with store.session() as s:
        query = (
            select(RiskEvent, Message, Conversation, Learner)
            .join(Message, col(Message.id) == RiskEvent.message_id)
            .join(Conversation, col(Conversation.id) == RiskEvent.conversation_id)
            .join(Learner, col(Learner.id) == Conversation.learner_id)
        )
        if not include_reviewed:
            query = query.where(col(RiskEvent.reviewed_at).is_(None))
        query = query.order_by(col(RiskEvent.reviewed_at).is_not(None), col(RiskEvent.created_at).desc(),
                               col(RiskEvent.id).desc()).limit(limit)
        items = [_risk_item(risk, message, conv, learner) for risk, message, conv, learner in s.exec(query)]
        room = limit - len(items)
        if room > 0:
            turns = s.exec(
                select(Message, Conversation, Learner)
                .join(Conversation, col(Conversation.id) == Message.conversation_id)
                .join(Learner, col(Learner.id) == Conversation.learner_id)
                .where(Message.role == "tutor", col(Message.flags_json).contains('"needs_review"'))
                .order_by(col(Message.created_at).desc(), col(Message.id).desc())
                .limit(room)
            )
            items += [_turn_item(message, conv, learner) for message, conv, learner in turns
                      if not any(f.startswith("risk:") or f == "screen_failed" for f in message.flags)]
        return items


def mark_reviewed(store: Store, risk_id: int, *, by: str, note: str | None = None) -> bool:
    """Mark a flagged message reviewed; False when there is no such flag."""
    with store.session() as s:
        risk = s.get(RiskEvent, risk_id)
        if risk is None:
            return False
        risk.reviewed_at, risk.reviewed_by, risk.review_note = utcnow(), by, note
        s.add(risk)
        s.commit()
        return True


def _risk_item(risk: RiskEvent, message: Message, conv: Conversation, learner: Learner) -> ReviewItem:
    return ReviewItem(
        kind="risk", id=risk.id or 0, created_at=iso_utc(risk.created_at), module_id=risk.module_id,
        conversation_id=risk.conversation_id, learner_key=learner.key, label=risk.label,
        confidence=risk.confidence, source=risk.source,
        evidence=[_read_back(message, e) for e in risk.evidence],
        reviewed_at=iso_utc(risk.reviewed_at) if risk.reviewed_at else None,
        reviewed_by=risk.reviewed_by, note=risk.review_note,
    )


def _turn_item(message: Message, conv: Conversation, learner: Learner) -> ReviewItem:
    flags = [f for f in message.flags if f != "needs_review"]
    return ReviewItem(
        kind="turn", id=message.id or 0, created_at=iso_utc(message.created_at), module_id=conv.module_id,
        conversation_id=conv.id or 0, learner_key=learner.key, label=", ".join(flags) or "needs_review",
    )


def _read_back(message: Message, evidence: dict[str, Any]) -> dict[str, Any]:
    field_id = evidence.get("field")
    text = message.text if field_id is None else str((message.answers or {}).get(field_id, ""))
    start, end = int(evidence.get("start", 0)), int(evidence.get("end", 0))
    snippet = text[start:end] if 0 <= start <= end <= len(text) else ""
    verified = bool(snippet) and span_hash(snippet) == evidence.get("sha256")
    return {"field": field_id, "start": start, "end": end, "snippet": snippet, "verified": verified}
