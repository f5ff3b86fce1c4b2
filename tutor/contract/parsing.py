"""raw model text -> ParsedReply. This first version is strict parse + validation only."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import ValidationError

from tutor.contract.models import TutorResponse

Outcome = Literal["valid", "repaired", "invalid"]


@dataclass(frozen=True)
class ParsedReply:
    outcome: Outcome
    response: TutorResponse | None
    flags: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    raw: str = ""

    def to_json_dict(self) -> dict:
        return {
            "outcome": self.outcome,
            "flags": list(self.flags),
            "response": self.response.to_json_dict() if self.response else None,
            "errors": list(self.errors),
        }


def parse(raw: str, *, finish_reason: str | None = None) -> ParsedReply:
    try:
        response = TutorResponse.model_validate_json(raw)
    except ValidationError as exc:
        errors = [_format_error(e) for e in exc.errors()]
        return ParsedReply("invalid", None, ["invalid_json"], errors, raw)
    return ParsedReply("valid", response, [], [], raw)


def _format_error(err: dict) -> str:
    loc = ".".join(str(p) for p in err.get("loc", ())) or "(root)"
    return f"{loc}: {err.get('msg', 'invalid')}"
