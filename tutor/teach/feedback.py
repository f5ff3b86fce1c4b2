"""What the learner sees of a check, built by the server (never left to a model): the check
question as a small form, and the judge's score and feedback as a kind callout.

A check form's id is ``check-<check id>`` (a hyphen: never a module form's snake_case id)
with one textarea, ``answer``. Submitting it answers the check; so does free text sent right
after it (tutor.teach.intent).
"""

from __future__ import annotations

from tutor.contract import Form, FormField, TextBlock
from tutor.material import Check

__all__ = [
    "ANSWER_FIELD",
    "CHECK_FORM_PREFIX",
    "check_form",
    "check_id_of",
    "failed_block",
    "feedback_block",
]

CHECK_FORM_PREFIX = "check-"
ANSWER_FIELD = "answer"

FAILED_TEXT = ("Thank you for your answer. I couldn't score it just now, so it is saved for a person "
               "to look at; nothing is lost. You can try again or carry on.")


def check_form(check: Check, topic_title: str, *, again: bool = False) -> Form:
    return Form(
        id=CHECK_FORM_PREFIX + check.id,
        title="Try again" if again else "Check your understanding",
        description=f"About {topic_title}. Answer in your own words; a sentence or two is plenty. "
                    "You can also type your answer in the message box, or skip this.",
        fields=[FormField(id=ANSWER_FIELD, type="textarea", label=check.question, required=True,
                          placeholder="Your answer, in your own words")],
        submit_label="Check my answer",
        optional=True,
    )


def check_id_of(form_id: str | None) -> str | None:
    """The check a form asks, or None for any other form."""
    if form_id and form_id.startswith(CHECK_FORM_PREFIX):
        return form_id[len(CHECK_FORM_PREFIX):] or None
    return None


def feedback_block(topic_title: str, score: int, threshold: int, feedback: str) -> TextBlock:
    """The score and the judge's feedback: a success callout once mastered, otherwise a tip
    that says how far there is to go and that another try is welcome."""
    if score >= threshold:
        lead = f"**You scored {score}/10 on *{topic_title}*: mastered.**"
        return TextBlock(type="success", content=f"{lead} {feedback.strip()}")
    lead = f"**You scored {score}/10 on *{topic_title}*** ({threshold} or more masters it)."
    tail = "" if "another go" in feedback else " Have another go whenever you like."
    return TextBlock(type="tip", content=f"{lead} {feedback.strip()}{tail}")


def failed_block() -> TextBlock:
    return TextBlock(type="info", content=FAILED_TEXT)
