"""Plain data the engine hands to its callers (the web state, the CLI, evals)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tutor.store import Message, iso_utc


@dataclass(frozen=True)
class MessageView:
    id: int
    seq: int
    role: str  # learner | tutor
    text: str = ""  # learner text or form summary
    form_id: str | None = None
    answers: dict[str, Any] | None = None
    response: dict[str, Any] | None = None  # tutor reply as shown (server meta applied)
    raw: str | None = None
    outcome: str | None = None
    flags: list[str] = field(default_factory=list)
    form_states: dict[str, dict[str, Any]] = field(default_factory=dict)
    reply_to_seq: int | None = None  # tutor: the learner message this answers
    created_at: str = ""

    @classmethod
    def from_row(cls, row: Message) -> MessageView:
        assert row.id is not None
        return cls(
            id=row.id,
            seq=row.seq,
            role=row.role,
            text=row.text,
            form_id=row.form_id,
            answers=row.answers,
            response=row.parsed,
            raw=row.raw,
            outcome=row.outcome,
            flags=row.flags,
            form_states=row.form_states,
            reply_to_seq=row.reply_to_seq,
            created_at=iso_utc(row.created_at),
        )


@dataclass(frozen=True)
class ProgressView:
    percentage: float
    covered: list[str]
    total: int
    milestone: str | None  # reached on this turn, if any
    milestones: list[str]  # every milestone reached so far
    module_state: dict[str, Any]

    @property
    def remaining(self) -> int:
        return self.total - len(self.covered)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "percentage": self.percentage,
            "covered": list(self.covered),
            "remaining": self.remaining,
            "total": self.total,
            "milestone": self.milestone,
            "milestones": list(self.milestones),
            "module_state": dict(self.module_state),
        }


@dataclass(frozen=True)
class ConversationView:
    id: int
    module_id: str
    learner_key: str
    messages: list[MessageView]
    progress: ProgressView
    # The tutor still owes a reply: the opening turn, or a learner message not yet answered
    # (say, a restart cut the turn short).
    awaiting_reply: bool = False


@dataclass(frozen=True)
class ConversationSummary:
    id: int
    module_id: str
    status: str
    turns: int
    updated_at: str


@dataclass(frozen=True)
class TurnResult:
    learner: MessageView | None  # None for the opening turn
    reply: MessageView
    progress: ProgressView
    attempts: list[Any] = field(default_factory=list)  # AttemptRecord per model call
    operator_message: str | None = None
    # The safety screen's flags on the learner's message: label, confidence, source and
    # evidence as offsets + SHA-256 into the learner's text (or a form field's answer).
    risks: list[dict[str, Any]] = field(default_factory=list)
