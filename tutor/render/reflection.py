"""The built-in tutor's reflection of a form's answers: the author's lines, filled with what
the learner wrote and chose, so a thought record comes back as "you believed it 80 out of
100, now 40" instead of a bare thank-you. One place for the rule, used by the module check
(tutor.content.module_format) and by the built-in tutor (tutor.llm.builtin_answers).

An author writes, under a module form:

    reflect:
      - "You looked at the thought “{anxious_thought}”."
      - text: "Your belief in it went from {belief_before} to {belief_after}."
        when: belief_after < belief_before

A line is said only when every field it names was answered and its `when` holds; `when`
compares a number field with another number field or a number (<, <=, >, >=, ==, !=),
and several comparisons join with `and`.
Choices read as their labels; what the learner typed is quoted as plain text (markdown
characters escaped, long answers shortened), never as markup.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Iterable, Mapping
from typing import Any

from tutor.contract import Form
from tutor.render.forms import display_value

__all__ = ["QUOTED_CHARS", "condition_problem", "placeholders", "reflected", "template_problems"]

QUOTED_CHARS = 240  # the longest piece of a learner's answer quoted back
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_CONDITION = re.compile(r"^\s*([a-z][a-z0-9_]*)\s*(<=|>=|==|!=|<|>)\s*([a-z][a-z0-9_]*|-?\d+(?:\.\d+)?)\s*$")
_AND = re.compile(r"\s+and\s+")
_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
        "!=": operator.ne}
# What makes markup inside a line (answers are quoted on one line: no block markers).
_MARKDOWN = re.compile(r"([\\`*_\[\]<>~&])")


def placeholders(text: str) -> list[str]:
    return _PLACEHOLDER.findall(text)


def template_problems(text: str, form: Form) -> list[str]:
    """What is wrong with a reflection line's `{field}` names for this form."""
    ids = {f.id for f in form.fields}
    problems = [f"reflect line names {{{name}}}, which is not a field of form {form.id!r}"
                for name in placeholders(text) if name not in ids]
    if text.count("{") != text.count("}"):
        problems.append(f"reflect line {text!r} has an unmatched brace")
    return problems


def condition_problem(when: str, form: Form) -> str | None:
    """Why a `when` cannot be read for this form, or None."""
    numbers = {f.id for f in form.fields if f.type == "number"}
    for part in _AND.split(when):
        found = _CONDITION.match(part)
        if found is None:
            return (f"`when: {when}` must compare a number field with another or with a number, "
                    "e.g. `belief_after < belief_before` (join several with `and`)")
        for side in (found.group(1), found.group(3)):
            if not _is_number(side) and side not in numbers:
                return f"`when: {when}` names {side!r}, which is not a number field of form {form.id!r}"
    return None


def reflected(form: Form, lines: Iterable[tuple[str, str | None]], answers: Mapping[str, Any]) -> list[str]:
    """The author's lines (text, when) that this submission fills, filled in."""
    fields = {f.id: f for f in form.fields}
    out = []
    for text, when in lines:
        names = placeholders(text)
        if any(name not in answers or name not in fields for name in names):
            continue
        if when and not _holds(when, answers):
            continue
        values = {name: _quoted(fields[name], answers[name]) for name in names}
        out.append(_PLACEHOLDER.sub(lambda m: values[m.group(1)], text))
    return out


def _holds(when: str, answers: Mapping[str, Any]) -> bool:
    for part in _AND.split(when):
        found = _CONDITION.match(part)
        if found is None:
            return False
        left, op, right = found.groups()
        values = [_number(side, answers) for side in (left, right)]
        if values[0] is None or values[1] is None or not _OPS[op](values[0], values[1]):
            return False
    return True


def _number(side: str, answers: Mapping[str, Any]) -> float | None:
    if _is_number(side):
        return float(side)
    value = answers.get(side)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _is_number(side: str) -> bool:
    return bool(re.fullmatch(r"-?\d+(?:\.\d+)?", side))


def _quoted(field: Any, value: Any) -> str:
    shown = display_value(field, value)
    if field.type in ("text", "textarea"):
        shown = " ".join(shown.split())
        if len(shown) > QUOTED_CHARS:
            shown = shown[:QUOTED_CHARS].rsplit(" ", 1)[0] + "…"
    return _MARKDOWN.sub(r"\\\1", shown)
