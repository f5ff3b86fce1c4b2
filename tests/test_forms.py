"""Form answers are checked on the server against the form that was offered."""

from __future__ import annotations

import pytest

from tutor.contract import Form
from tutor.render.forms import FormInputError, summarize_answers, validate_answers

FORM = Form.model_validate(
    {
        "id": "check_in",
        "title": "Check-in",
        "fields": [
            {"id": "level", "type": "radio", "label": "Level", "required": True,
             "options": [{"value": "low", "label": "Low"}, {"value": "high", "label": "High"}]},
            {"id": "signs", "type": "checkbox", "label": "Signs",
             "options": [{"value": "heart", "label": "Racing heart"}, {"value": "sweat", "label": "Sweating"}]},
            {"id": "when", "type": "select", "label": "When",
             "options": [{"value": "am", "label": "Mornings"}]},
            {"id": "rating", "type": "number", "label": "Rating", "min": 0, "max": 10},
            {"id": "note", "type": "text", "label": "Note"},
            {"id": "story", "type": "textarea", "label": "Story"},
        ],
    }
)


def test_clean_answers_keep_only_what_was_answered():
    clean = validate_answers(
        FORM, {"level": "high", "signs": ["sweat", "heart"], "rating": "7", "note": " hi ", "story": ""}
    )
    assert clean == {"level": "high", "signs": ["heart", "sweat"], "rating": 7, "note": "hi"}


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"level": "extreme"}, "level"),  # outside the options
        ({"level": "low", "signs": ["heart", "hacked"]}, "signs"),
        ({"level": "low", "when": "pm"}, "when"),
        ({"level": "low", "rating": 11}, "rating"),
        ({"level": "low", "rating": -1}, "rating"),
        ({"level": "low", "rating": "seven"}, "rating"),
        ({"level": "low", "rating": "nan"}, "rating"),
        ({"level": "low", "rating": True}, "rating"),
        ({"level": "low", "extra": "x"}, "extra"),  # unknown field
        ({"signs": ["heart"]}, "level"),  # required missing
        ({"level": "low", "note": "x" * 2001}, "note"),
        ({"level": ["low", "high"]}, "level"),
    ],
)
def test_tampered_or_invalid_answers_are_refused_naming_the_field(values, field):
    with pytest.raises(FormInputError) as err:
        validate_answers(FORM, values)
    assert err.value.field_id == field
    assert err.value.message


def test_empty_submission_is_refused():
    optional = Form.model_validate({"id": "f", "fields": [{"id": "a", "type": "text", "label": "A"}]})
    with pytest.raises(FormInputError):
        validate_answers(optional, {"a": "  "})


def test_summary_reads_like_the_learner_wrote_it():
    text = summarize_answers(FORM, {"level": "high", "signs": ["heart", "sweat"], "rating": 7})
    assert text.splitlines() == [
        "My answers to “Check-in”:",
        "- Level: High",
        "- Signs: Racing heart, Sweating",
        "- Rating: 7",
    ]
