"""Seed 002 is the product's contract: its examples must parse as valid, and the JSON
Schema generated from our models must refuse what the seed's own schema refuses."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
from jsonschema import Draft7Validator, Draft202012Validator

from tutor.contract import TutorResponse, parse

FIXTURES = Path(__file__).parent / "fixtures"
SEED_MD = FIXTURES / "seed_002_response_schema.md"  # verbatim copy of seeds/002
SEED_SCHEMA = json.loads((FIXTURES / "seed_response_schema.json").read_text(encoding="utf-8"))


def seed_examples() -> dict[str, str]:
    """The ```json blocks under '## Example Responses', keyed by their ### title."""
    text = SEED_MD.read_text(encoding="utf-8")
    section = text.split("## Example Responses", 1)[1].split("\n## ", 1)[0]
    found = re.findall(r"### (.+?)\n+```json\n(.*?)\n```", section, flags=re.S)
    return {title.strip(): body for title, body in found}


EXAMPLES = seed_examples()
OURS = Draft202012Validator(TutorResponse.model_json_schema())
SEEDS = Draft7Validator(SEED_SCHEMA)


def test_the_seed_has_four_examples():
    assert sorted(EXAMPLES) == sorted(
        ["Educational Content with Optional Form", "Conversational Response (No Form)",
         "Milestone Celebration", "Assessment Form"]
    )


@pytest.mark.parametrize("title", sorted(EXAMPLES))
def test_seed_example_parses_as_valid_and_round_trips(title):
    raw = EXAMPLES[title]
    parsed = parse(raw)
    assert parsed.outcome == "valid", parsed.errors
    assert parsed.flags == [] and parsed.errors == []
    assert parsed.response.to_json_dict() == json.loads(raw)


@pytest.mark.parametrize("title", sorted(EXAMPLES))
def test_generated_schema_accepts_seed_example(title):
    OURS.validate(json.loads(EXAMPLES[title]))


def test_seed_null_milestone_is_accepted_by_us_though_the_seed_schema_refuses_it():
    # The seed's first example sends "milestone": null; we follow the examples.
    doc = json.loads(EXAMPLES["Educational Content with Optional Form"])
    assert doc["meta"]["progress"]["milestone"] is None
    assert not SEEDS.is_valid(doc)
    assert OURS.is_valid(doc)


def _base() -> dict:
    return json.loads(EXAMPLES["Assessment Form"])


def _mutated(path: list, value=None, *, delete: bool = False) -> dict:
    doc = copy.deepcopy(_base())
    node = doc
    for key in path[:-1]:
        node = node[key]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return doc


BAD_DOCUMENTS = {
    "missing content": _mutated(["content"], delete=True),
    "missing meta": _mutated(["meta"], delete=True),
    "missing text_blocks": _mutated(["content", "text_blocks"], delete=True),
    "text_blocks not a list": _mutated(["content", "text_blocks"], "Hello"),
    "bad block type": _mutated(["content", "text_blocks", 0, "type"], "banner"),
    "block without content": _mutated(["content", "text_blocks", 1, "content"], delete=True),
    "heading level 7": _mutated(["content", "text_blocks", 0, "level"], 7),
    "heading level 0": _mutated(["content", "text_blocks", 0, "level"], 0),
    "bad field id pattern": _mutated(["content", "forms", 0, "fields", 0, "id"], "Physical Symptoms"),
    "field id starting with a digit": _mutated(["content", "forms", 0, "fields", 0, "id"], "1st"),
    "bad field type": _mutated(["content", "forms", 0, "fields", 0, "type"], "slider"),
    "field without label": _mutated(["content", "forms", 0, "fields", 0, "label"], delete=True),
    "form without id": _mutated(["content", "forms", 0, "id"], delete=True),
    "form without fields": _mutated(["content", "forms", 0, "fields"], delete=True),
    "option without value": _mutated(["content", "forms", 0, "fields", 0, "options", 0, "value"], delete=True),
    "bad milestone": _mutated(["meta", "progress", "milestone"], "60%"),
    "milestone without percent": _mutated(["meta", "progress", "milestone"], "50"),
    "percentage 101": _mutated(["meta", "progress", "percentage"], 101),
    "percentage negative": _mutated(["meta", "progress", "percentage"], -1),
    "percentage as string": _mutated(["meta", "progress", "percentage"], "45%"),
    "bad emotion": _mutated(["meta", "emotion"], "ecstatic"),
    "bad response_type": _mutated(["meta", "response_type"], "lecture"),
    "missing response_type": _mutated(["meta", "response_type"], delete=True),
    "bad media type": _mutated(["content", "media"], [{"type": "gif", "src": "https://example.org/a.gif"}]),
    "media without src": _mutated(["content", "media"], [{"type": "image", "alt": "x"}]),
    "suggestions not strings": _mutated(["content", "next_step", "suggestions"], [1, 2]),
    "remaining_topics not an integer": _mutated(["meta", "progress", "remaining_topics"], 2.5),
}


@pytest.mark.parametrize("name", sorted(BAD_DOCUMENTS))
def test_generated_schema_rejects_what_the_seed_schema_rejects(name):
    doc = BAD_DOCUMENTS[name]
    assert not SEEDS.is_valid(doc), "the bad document must be bad by the seed's own schema"
    assert not OURS.is_valid(doc)


@pytest.mark.parametrize("name", sorted(BAD_DOCUMENTS))
def test_models_reject_what_the_seed_schema_rejects(name):
    raw = json.dumps(BAD_DOCUMENTS[name])
    assert parse(raw).outcome != "valid"
