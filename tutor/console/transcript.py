"""A review item's conversation, read-only: the messages around the flagged learner message
(or the tutor turn under review), each as the learner wrote it or saw it, so an operator
judges a flag in its context rather than from a snippet.

The learner's words are shown in full (they are capped at sending); a tutor turn as the
text blocks, quotes, forms and quick replies the page showed, or its raw text when it could
not be read. Operators see this; learners never see any of it. Everything from the model
is plain text here: the page does not render it as markdown or HTML.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from sqlmodel import col, select

from tutor.llm.redact import scrub
from tutor.render.plain import content_lines
from tutor.storage.store import Message, RiskEvent, Store, iso_utc

__all__ = ["BEFORE", "AFTER", "TEXT_CAP", "TranscriptLine", "review_transcript"]

BEFORE = 8  # messages shown before the one under review
AFTER = 4  # and after it
TEXT_CAP = 6_000  # characters of one tutor turn shown (a learner's message is capped at sending)


@dataclass(frozen=True)
class TranscriptLine:
    seq: int
    role: str  # learner | tutor
    created_at: str  # ISO 8601, UTC
    text: str
    focus: bool  # the message the review item is about
    flags: tuple[str, ...] = ()  # a tutor turn's flags (safety, fallback, stopped …)


def review_transcript(store: Store, kind: str, item_id: int, *, before: int = BEFORE,
                      after: int = AFTER) -> list[TranscriptLine] | None:
    """The conversation around a review item (`kind` risk: a `RiskEvent` id; turn: a tutor
    message id), oldest first; None when there is no such item."""
    with store.session(read_only=True) as s:
        if kind == "risk":
            risk = s.get(RiskEvent, item_id)
            centre = s.get(Message, risk.message_id) if risk is not None else None
        elif kind == "turn":
            centre = s.get(Message, item_id)
            centre = centre if centre is not None and centre.role == "tutor" else None
        else:
            centre = None
        if centre is None:
            return None
        rows = s.exec(
            select(Message).where(Message.conversation_id == centre.conversation_id,
                                  col(Message.seq) >= centre.seq - max(0, before),
                                  col(Message.seq) <= centre.seq + max(0, after))
            .order_by(col(Message.seq))
        ).all()
        return [_line(m, focus=m.id == centre.id) for m in rows]


def _line(message: Message, *, focus: bool) -> TranscriptLine:
    if message.role == "learner":
        text = _learner_text(message)
    else:
        text = _tutor_text(message)
    return TranscriptLine(
        seq=message.seq, role=message.role, created_at=iso_utc(message.created_at),
        text=unicodedata.normalize("NFC", text), focus=focus,
        flags=tuple(message.flags) if message.role == "tutor" else (),
    )


def _learner_text(message: Message) -> str:
    try:
        answers = message.answers
    except ValueError:
        answers = None
    if not message.form_id or not isinstance(answers, dict):
        return message.text
    lines = [f"(form {message.form_id})"]
    for field_id, value in answers.items():
        shown = ", ".join(str(v) for v in value) if isinstance(value, list) else str(value)
        lines.append(f"{field_id}: {shown}")
    return "\n".join(lines)


def _tutor_text(message: Message) -> str:
    try:
        parsed = message.parsed
    except ValueError:
        parsed = None
    content = parsed.get("content") if isinstance(parsed, dict) else None
    if not isinstance(content, dict):
        raw = message.raw or ""
        return scrub(_cap("(not readable as a lesson; the raw reply)\n" + raw if raw else "(no reply)"))
    text = "\n".join(content_lines(content)).strip()
    return scrub(_cap(text or "(an empty reply)"))


def _cap(text: str) -> str:
    if len(text) <= TEXT_CAP:
        return text
    return text[:TEXT_CAP] + f"\n… {len(text) - TEXT_CAP:,} more characters not shown"
