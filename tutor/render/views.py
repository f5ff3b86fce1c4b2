"""Plain data the engine hands to its callers (the web state, the CLI, evals)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tutor.storage.store import Message, iso_utc


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
    """The learner's progress in a module (tutor.progress): topics seen (`covered`) and
    mastered, the percentage toward completion, milestones."""

    percentage: float
    covered: list[str]  # topics seen, in the order seen
    total: int
    milestone: str | None  # reached on this turn, if any
    milestones: list[str]  # every milestone reached so far
    module_state: dict[str, Any]
    mastered: list[str] = field(default_factory=list)  # topics mastered (every check judged at threshold)
    checked: int = 0  # topics that have checks (what "mastered" counts out of)
    done: int | None = None  # topics done (mastered, or seen for one without checks); None: as seen

    @property
    def remaining(self) -> int:
        return self.total - (len(self.covered) if self.done is None else self.done)

    @property
    def complete(self) -> bool:
        return self.total > 0 and self.remaining == 0

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "percentage": self.percentage,
            "covered": list(self.covered),
            "mastered": list(self.mastered),
            "checked": self.checked,
            "remaining": self.remaining,
            "total": self.total,
            "complete": self.complete,
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
    # A check the learner answered in the message box: (its form id, the judged score), so
    # the page shows the form it was asked in as answered, not skipped.
    answered: tuple[str, int | None] | None = None
    # The safety screen's flags on the learner's message: label, confidence, source and
    # evidence as offsets + SHA-256 into the learner's text (or a form field's answer).
    risks: list[dict[str, Any]] = field(default_factory=list)
