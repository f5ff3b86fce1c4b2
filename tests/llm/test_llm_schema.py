"""The strict schema sent for json_schema mode, and the tool schema sent to Anthropic."""

from __future__ import annotations

import json

import jsonschema
from hypothesis import given
from hypothesis import strategies as st

from tutor.contract import TutorResponse
from tutor.llm.schema import inline_refs, is_nullable, strict_schema, tool_schema


def walk(node):
    if isinstance(node, dict):
        yield node
        for key, value in node.items():
            if key == "properties":
                for sub in value.values():
                    yield from walk(sub)
            else:
                yield from walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from walk(item)


def test_strict_schema_follows_strict_mode_rules():
    schema = strict_schema()
    text = json.dumps(schema)
    assert "$ref" not in text and "$defs" not in text
    objects = [n for n in walk(schema) if "properties" in n]
    assert len(objects) >= 8
    for node in objects:
        assert node["additionalProperties"] is False
        assert set(node["required"]) == set(node["properties"])
    forbidden = {"default", "pattern", "minimum", "maximum", "minLength", "title"}
    assert not any(forbidden & set(n) for n in walk(schema))
    jsonschema.Draft202012Validator.check_schema(schema)


def test_optional_fields_became_nullable_and_required_ones_did_not():
    props = strict_schema()["properties"]
    content = props["content"]["properties"]
    assert is_nullable(content["forms"]) and is_nullable(content["next_step"])
    assert not is_nullable(content["text_blocks"])
    meta = props["meta"]["properties"]
    assert not is_nullable(meta["response_type"]) and is_nullable(meta["emotion"])


def test_strict_schema_is_a_fresh_copy():
    strict_schema()["properties"].clear()
    assert "content" in strict_schema()["properties"]


def test_tool_schema_keeps_optional_fields_optional():
    schema = tool_schema()
    assert schema["required"] == ["content", "meta"]
    assert schema["properties"]["content"]["required"] == ["text_blocks"]
    assert "$ref" not in json.dumps(schema) and '"default"' not in json.dumps(schema)


def test_inline_refs_merges_sibling_keywords():
    schema = {"$defs": {"A": {"type": "string"}}, "properties": {"x": {"$ref": "#/$defs/A", "description": "d"}}}
    assert inline_refs(schema) == {"properties": {"x": {"type": "string", "description": "d"}}}


STRICT = jsonschema.Draft202012Validator(strict_schema())
TOOL = jsonschema.Draft202012Validator(tool_schema())
words = st.text(alphabet="abcdefgh ", min_size=1, max_size=30)
blocks = st.lists(st.fixed_dictionaries({"type": st.sampled_from(["paragraph", "tip", "info"]),
                                         "content": words, "level": st.none()}), min_size=1, max_size=3)


@given(blocks, st.none() | st.lists(words, max_size=3), st.sampled_from(["educational", "summary"]))
def test_what_strict_mode_allows_is_a_valid_reply(text_blocks, suggestions, response_type):
    reply = {
        "content": {"text_blocks": text_blocks, "forms": None, "media": None,
                    "next_step": {"prompt": None, "suggestions": suggestions, "can_skip": None}},
        "meta": {"response_type": response_type, "progress": None, "module_state": None, "emotion": None},
    }
    STRICT.validate(reply)
    TOOL.validate(reply)
    TutorResponse.model_validate(reply)
