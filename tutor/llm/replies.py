"""What the tutor says itself when a model cannot be heard: calm apologies, the words for
a stopped reply, a reply that took too long and a spent budget, and how a refusal is
recognised."""

from __future__ import annotations

import re

from tutor.contract import TutorResponse

__all__ = ["APOLOGY_TEXT", "BUDGET_TEXT", "DEADLINE_TEXT", "STOPPED_TEXT", "apology_response",
           "looks_like_refusal"]

APOLOGY_TEXT = (
    "Sorry, I couldn't put together a proper reply just now. Your message is saved: you can "
    "send it again, say it another way, or carry on with the lesson."
)
DEADLINE_TEXT = (
    "Sorry, that was taking too long, so I stopped. Your message is saved: you can send it "
    "again, say it another way, or carry on with the lesson."
)
STOPPED_TEXT = "You stopped this reply before the tutor wrote anything. Ask again, or carry on."
BUDGET_TEXT = (
    "This conversation has reached its length limit, so I can't continue it here. Your "
    "progress is saved: please start a new conversation to carry on."
)

# Refusal prose opens with an apology or a "can't"; judged only on replies that failed to parse.
_REFUSAL = re.compile(
    r"^\W*(?:(?:i'm|i am) sorry|sorry|i apologi[sz]e|unfortunately)?[,.!]?\s*(?:but\s+)?"
    r"(?:i\s*(?:can't|cannot|can not|won't|will not|'m\s+(?:not able|unable)|am\s+(?:not able|unable))"
    r"|as an ai)\b",
    re.IGNORECASE,
)


def looks_like_refusal(text: str) -> bool:
    return bool(_REFUSAL.match(text.strip()[:200].replace("\u2019", "'")))


def apology_response(text: str = APOLOGY_TEXT, suggestion: str | None = None) -> TutorResponse:
    next_step: dict = {"prompt": "What would you like to do next?", "can_skip": True}
    if suggestion:
        next_step["suggestions"] = [suggestion]
    return TutorResponse.model_validate(
        {
            "content": {"text_blocks": [{"type": "paragraph", "content": text}], "next_step": next_step},
            "meta": {"response_type": "error", "emotion": "supportive"},
        }
    )
