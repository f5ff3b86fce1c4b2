"""What the tutor says itself when a model cannot be heard: calm apologies, the words for
a stopped reply, a reply that took too long and a spent budget, and how a refusal is
recognised."""

from __future__ import annotations

import re

from tutor.contract import TutorResponse
from tutor.i18n import N_, translator

__all__ = ["APOLOGY_TEXT", "BUDGET_TEXT", "DEADLINE_TEXT", "NEXT_PROMPT", "STOPPED_TEXT", "apology_response",
           "localize_own_words", "looks_like_refusal"]

# Catalogue msgids, written in English where they are made; `localize_own_words` puts a
# reply made of them into the module's language at the engine.
APOLOGY_TEXT = N_(
    "Sorry, I couldn't put together a proper reply just now. Your message is saved: you can "
    "send it again, say it another way, or carry on with the lesson."
)
DEADLINE_TEXT = N_(
    "Sorry, that was taking too long, so I stopped. Your message is saved: you can send it "
    "again, say it another way, or carry on with the lesson."
)
STOPPED_TEXT = N_("You stopped this reply before the tutor wrote anything. Ask again, or carry on.")
BUDGET_TEXT = N_(
    "This conversation has reached its length limit, so I can't continue it here. Your "
    "progress is saved: please start a new conversation to carry on."
)
NEXT_PROMPT = N_("What would you like to do next?")
ENGINE_ERROR_TEXT = N_(
    "Sorry — something went wrong on my side while preparing that answer. Your message is "
    "saved; you can send it again or carry on."
)
_OWN_WORDS = frozenset({APOLOGY_TEXT, DEADLINE_TEXT, STOPPED_TEXT, BUDGET_TEXT, NEXT_PROMPT, ENGINE_ERROR_TEXT})

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
    next_step: dict = {"prompt": NEXT_PROMPT, "can_skip": True}
    if suggestion:
        next_step["suggestions"] = [suggestion]
    return TutorResponse.model_validate(
        {
            "content": {"text_blocks": [{"type": "paragraph", "content": text}], "next_step": next_step},
            "meta": {"response_type": "error", "emotion": "supportive"},
        }
    )


def localize_own_words(response: TutorResponse | None, language: str | None) -> TutorResponse | None:
    """The tutor's own apology words (exactly those, never a model's) in `language`."""
    if response is None:
        return None
    t = translator(language)
    if t.language == "en":
        return response
    for block in response.content.text_blocks:
        if block.content in _OWN_WORDS:
            block.content = t(block.content)
    step = response.content.next_step
    if step is not None and step.prompt in _OWN_WORDS:
        step.prompt = t(step.prompt)
    return response
