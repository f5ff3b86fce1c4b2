"""What the learner sees of a check, built by the server (never left to a model): the check
question as a small form, and the judge's score and feedback as a kind callout.

A check form's id is ``check-<check id>`` (a hyphen: never a module form's snake_case id)
with one textarea, ``answer``. Submitting it answers the check; so does free text sent right
after it (tutor.teach.intent).
"""

from __future__ import annotations

from tutor.content.material import Check
from tutor.contract import Form, FormField, TextBlock
from tutor.contract.models import CHECK_FORM_PREFIX
from tutor.i18n import N_, translator

__all__ = [
    "ANSWER_FIELD",
    "CHECK_FORM_PREFIX",
    "check_form",
    "check_id_of",
    "failed_block",
    "feedback_block",
]

ANSWER_FIELD = "answer"

FAILED_TEXT = N_("Thank you for your answer. I couldn't score it just now, so it is saved for a person "
                 "to look at; nothing is lost. You can try again or carry on.")
ANOTHER_GO = N_("Have another go whenever you like.")


def check_form(check: Check, topic_title: str, *, again: bool = False, language: str | None = None) -> Form:
    """The check's question as a form, in the module's `language`; `again`: the learner has
    answered it before (the title says "Try again"). The description is the one place the
    check says how to answer; the chip "Skip this check" is its one way past."""
    t = translator(language)
    return Form(
        id=CHECK_FORM_PREFIX + check.id,
        title=t("Try again") if again else t("Check your understanding"),
        description=t("About {topic}. A sentence or two in your own words is plenty, here or in the message box.",
                      topic=topic_title),
        fields=[FormField(id=ANSWER_FIELD, type="textarea", label=check.question, required=True,
                          placeholder=t("Your answer, in your own words"))],
        submit_label=t("Check my answer"),
        optional=True,
    )


def check_id_of(form_id: str | None) -> str | None:
    """The check a form asks, or None for any other form."""
    if form_id and form_id.startswith(CHECK_FORM_PREFIX):
        return form_id[len(CHECK_FORM_PREFIX):] or None
    return None


def feedback_block(topic_title: str, score: int, threshold: int, feedback: str,
                   language: str | None = None) -> TextBlock:
    """The score and the judge's feedback: a success callout once mastered, otherwise a tip
    that says how far there is to go and that another try is welcome."""
    t = translator(language)
    if score >= threshold:
        lead = t("**You scored {score}/10 on *{topic}*: mastered.**", score=score, topic=topic_title)
        return TextBlock(type="success", content=f"{lead} {feedback.strip()}")
    lead = t("**You scored {score}/10 on *{topic}*** ({threshold} or more masters it).", score=score,
             topic=topic_title, threshold=threshold)
    again = t(ANOTHER_GO)
    tail = "" if "another go" in feedback or again in feedback else f" {again}"
    return TextBlock(type="tip", content=f"{lead} {feedback.strip()}{tail}")


def failed_block(language: str | None = None) -> TextBlock:
    return TextBlock(type="info", content=translator(language)(FAILED_TEXT))
