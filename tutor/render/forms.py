"""Checking a learner's form answers against the form that was offered, and which forms of
a tutor message are still open. One place for it.

The browser checks too (required, min/max, options), but only this check counts: a
tampered submission (unknown field, value outside the options) is refused here.
"""

from __future__ import annotations

import json
import math
from typing import Any

from tutor.contract import Form, FormField, TutorResponse
from tutor.i18n import Phrase, translator

MAX_ANSWER_CHARS = 2000


class FormInputError(ValueError):
    """An answer that cannot be accepted; `field_id` says where (None: the whole form).
    `message` is a tutor.i18n.Phrase: English, renderable in the learner's language."""

    def __init__(self, message: str, field_id: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field_id = field_id


def validate_answers(form: Form, values: dict[str, Any]) -> dict[str, Any]:
    """Return clean answers (str, list[str] or float per field, unanswered fields left out)."""
    if not isinstance(values, dict):
        raise FormInputError(Phrase("Form answers must be an object of field ids to values."))
    fields = {f.id: f for f in form.fields}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise FormInputError(Phrase("This form has no field named {field!r}.", field=unknown[0]), unknown[0])
    clean: dict[str, Any] = {}
    for field in form.fields:
        value = _clean_value(field, values.get(field.id))
        if value is None:
            if field.is_required:
                raise FormInputError(Phrase("“{label}” is required.", label=field.label), field.id)
            continue
        clean[field.id] = value
    if not clean:
        raise FormInputError(Phrase("Answer at least one question, or just type your reply instead."))
    return clean


def _clean_value(field: FormField, value: Any) -> Any:
    if value is None or value == "" or value == []:
        return None
    if field.type in ("radio", "select"):
        if not isinstance(value, str):
            raise FormInputError(Phrase("Choose only one answer for “{label}”.", label=field.label), field.id)
        _check_option(field, value)
        return value
    if field.type == "checkbox":
        choices = [value] if isinstance(value, str) else value
        if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
            raise FormInputError(Phrase("“{label}” takes a list of choices.", label=field.label), field.id)
        for choice in choices:
            _check_option(field, choice)
        ordered = [o.value for o in field.options or [] if o.value in set(choices)]
        return ordered or None
    if field.type == "number":
        return _clean_number(field, value)
    if not isinstance(value, str):
        raise FormInputError(Phrase("“{label}” takes text.", label=field.label), field.id)
    text = value.strip()
    if len(text) > MAX_ANSWER_CHARS:
        raise FormInputError(
            Phrase("“{label}” is too long ({length} characters; at most {limit}).", label=field.label,
                   length=len(text), limit=MAX_ANSWER_CHARS),
            field.id,
        )
    if field.type == "text" and "\n" in text:
        text = " ".join(text.split())
    return text or None


def _check_option(field: FormField, value: str) -> None:
    allowed = {o.value for o in field.options or []}
    if value not in allowed:
        raise FormInputError(Phrase("{value!r} is not one of the choices for “{label}”.", value=value, label=field.label), field.id)


def _clean_number(field: FormField, value: Any) -> float | int:
    if isinstance(value, bool):
        raise FormInputError(Phrase("“{label}” takes a number.", label=field.label), field.id)
    try:
        number = float(value.strip()) if isinstance(value, str) else float(value)
    except (TypeError, ValueError):
        raise FormInputError(Phrase("“{label}” takes a number.", label=field.label), field.id) from None
    if not math.isfinite(number):
        raise FormInputError(Phrase("“{label}” takes a number.", label=field.label), field.id)
    if field.min is not None and number < field.min:
        raise FormInputError(Phrase("“{label}” must be at least {limit}.", label=field.label, limit=_fmt(field.min)), field.id)
    if field.max is not None and number > field.max:
        raise FormInputError(Phrase("“{label}” must be at most {limit}.", label=field.label, limit=_fmt(field.max)), field.id)
    return int(number) if number.is_integer() else number


def summarize_answers(form: Form, answers: dict[str, Any], language: str | None = None) -> str:
    """A readable account of the answers, by label, as the learner's turn text (its first
    line in the module's `language`)."""
    t = translator(language)
    lines = [t("My answers to “{title}”:", title=form.title or form.id)]
    lines += [f"- {line}" for line in answer_lines(form, answers)]
    return "\n".join(lines)


def answer_lines(form: Form, answers: dict[str, Any]) -> list[str]:
    """One 'Label: answer' line per answered field, in the form's order."""
    lines = []
    for field in form.fields:
        if field.id in answers:
            label = field.label.strip().rstrip(":")
            # "How was it? Calm" reads better than "How was it?: Calm".
            sep = " " if label.endswith(("?", "!", ".")) else ": "
            lines.append(f"{label}{sep}{display_value(field, answers[field.id])}")
    return lines


def display_value(field: FormField, value: Any) -> str:
    labels = {o.value: o.label for o in field.options or []}
    if isinstance(value, list):
        return ", ".join(labels.get(v, v) for v in value)
    if isinstance(value, float | int):
        return _fmt(value)
    return labels.get(value, value)


def _fmt(number: float) -> str:
    return str(int(number)) if float(number).is_integer() else str(number)


def open_form(last_tutor: Any, form_id: str) -> Form | None:
    """The form, if the tutor's latest message (a stored Message) offered it and it is
    still open."""
    if last_tutor is None or not last_tutor.parsed:
        return None
    if last_tutor.form_states.get(form_id, {}).get("status") != "open":
        return None
    response = TutorResponse.model_validate(last_tutor.parsed)
    return next((f for f in response.content.forms or [] if f.id == form_id), None)


def close_forms(last_tutor: Any, *, submitted: str | None, answers: Any) -> None:
    """A learner turn closes the latest message's open forms: the one answered is
    submitted, the others skipped (typing instead of filling a form is always allowed)."""
    states = last_tutor.form_states
    for form_id, state in states.items():
        if state.get("status") != "open":
            continue
        states[form_id] = {"status": "submitted", "answers": answers} if form_id == submitted else {"status": "skipped"}
    last_tutor.form_states_json = json.dumps(states, ensure_ascii=False)
