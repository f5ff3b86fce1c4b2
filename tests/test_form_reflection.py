"""An author's reflect lines under a module form: checked when the module loads (a line
naming no field of the form, or a `when` that cannot be read, is a file:line problem), and
filled only from what the learner answered."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tutor.content.module_format import ModuleForm
from tutor.render.reflection import QUOTED_CHARS, reflected

FIELDS = [{"id": "hours", "type": "number", "label": "Hours", "required": False, "min": 0, "max": 14},
          {"id": "goal", "type": "number", "label": "Goal", "required": False},
          {"id": "note", "type": "textarea", "label": "Note", "required": False},
          {"id": "mood", "type": "select", "label": "Mood", "required": False,
           "options": [{"value": "low", "label": "Low"}, {"value": "ok", "label": "Okay"}]}]


def form(*reflect):
    return ModuleForm.model_validate({"id": "sleep", "fields": FIELDS, "reflect": list(reflect)})


def said(f, answers):
    return reflected(f, f.reflect_lines, answers)


def test_each_line_is_said_only_when_its_fields_were_answered_and_its_condition_holds():
    f = form("Mood: {mood}.", {"text": "Short by {hours}.", "when": "hours < goal"},
             {"text": "Right on.", "when": "hours >= 7 and hours <= 9"})
    assert said(f, {"mood": "ok", "hours": 6, "goal": 8}) == ["Mood: Okay.", "Short by 6."]
    assert said(f, {"hours": 8}) == ["Right on."]  # no goal: the comparison with it is not said
    assert said(f, {"hours": 10, "goal": 8}) == []
    assert said(f, {}) == []


def test_a_learners_words_are_quoted_as_text_and_shortened():
    f = form("You wrote “{note}”.")
    [line] = said(f, {"note": "<img src=x onerror=alert(1)> **bold** `code` [link](http://x.test)"})
    assert r"\<img src=x onerror=alert(1)\>" in line and r"\*\*bold\*\*" in line and r"\[link\]" in line
    [long] = said(f, {"note": "word " * 200})
    assert long.endswith("…”.") and len(long) < QUOTED_CHARS + 20


@pytest.mark.parametrize("line, problem", [
    ("Hi {nobody}.", "'sleep'"),
    ({"text": "Hi.", "when": "hours < "}, "must compare"),
    ({"text": "Hi.", "when": "note < 3"}, "not a number field"),
    ({"text": "Hi.", "when": "hours < 3 or hours > 9"}, "must compare"),
    ("Unclosed {hours.", "unmatched brace"),
])
def test_a_line_the_form_cannot_fill_is_refused_when_the_module_loads(line, problem):
    with pytest.raises(ValidationError, match="reflect|when") as raised:
        form(line)
    assert problem in str(raised.value)
