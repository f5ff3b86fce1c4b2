"""The schemas sent to providers: strict (OpenAI's json_schema mode), bounded (servers that
build a decoding grammar from it, such as llama.cpp), and the tool schema sent to Anthropic."""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

import tutor.llm.schema as schema_mod
from tutor.contract import TutorResponse
from tutor.llm.schema import (
    GRAMMAR_REPETITION_LIMIT,
    TIERS,
    apply_bounds,
    bounded_schema,
    bounds_for,
    inline_refs,
    is_nullable,
    response_schema,
    strict_schema,
    tier_table,
    tool_schema,
    worst_case_size,
    worst_case_tokens,
)


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
        "content": {"text_blocks": text_blocks, "forms": None, "media": None, "citations": None,
                    "next_step": {"prompt": None, "suggestions": suggestions, "can_skip": None}},
        "meta": {"response_type": response_type, "progress": None, "module_state": None, "emotion": None},
    }
    STRICT.validate(reply)
    TOOL.validate(reply)
    TutorResponse.model_validate(reply)


# --- bounded schemas: what servers that build a decoding grammar get -------------------

SEED_MD = Path(__file__).parents[1] / "contract" / "fixtures" / "seed_002_response_schema.md"
LIMITS = [400, 512, 600, 800, 1024, 1500, 2048, 3000, 4096, 8192, 16384]


def seed_examples() -> dict[str, dict]:
    section = SEED_MD.read_text(encoding="utf-8").split("## Example Responses", 1)[1].split("\n## ", 1)[0]
    found = re.findall(r"### (.+?)\n+```json\n(.*?)\n```", section, flags=re.S)
    return {title.strip(): json.loads(body) for title, body in found}


SEEDS = seed_examples()


def as_strict_server_writes_it(doc, node):
    """`doc` with every property the schema lists present (absent ones as null), the way a
    server enforcing a strict schema writes a reply."""
    if isinstance(doc, dict):
        shape = next(n for n in [node, *node.get("anyOf", ())] if "properties" in n)
        props = shape["properties"].items()
        return {k: as_strict_server_writes_it(doc[k], sub) if k in doc else None for k, sub in props}
    if isinstance(doc, list):
        shape = next(n for n in [node, *node.get("anyOf", ())] if "items" in n)
        return [as_strict_server_writes_it(item, shape["items"]) for item in doc]
    return doc


def largest_document(node):
    """The document worst_case_size measures: every array full, every string at maxLength."""
    if "anyOf" in node:
        return largest_document(max(node["anyOf"], key=lambda alt: worst_case_size(alt).tokens))
    if "enum" in node:
        return max(node["enum"], key=lambda v: len(json.dumps(v, ensure_ascii=False)))
    kind = node["type"]
    if isinstance(kind, list):
        return largest_document(max(({**node, "type": k} for k in kind), key=lambda n: worst_case_size(n).tokens))
    if kind == "object":
        return {name: largest_document(sub) for name, sub in node["properties"].items()}
    if kind == "array":
        return [largest_document(node["items"]) for _ in range(node["maxItems"])]
    if kind == "string":
        return "x" * node["maxLength"]
    if kind == "integer":
        return max(node["minimum"], node["maximum"], key=lambda v: len(str(v)))
    return {"boolean": False, "null": None}[kind]


def leaves(doc):
    if isinstance(doc, dict):
        for value in doc.values():
            yield from leaves(value)
    elif isinstance(doc, list):
        for value in doc:
            yield from leaves(value)
    else:
        yield doc


@pytest.mark.parametrize("max_tokens", LIMITS)
def test_bounded_schema_is_valid_json_schema_in_strict_form(max_tokens):
    schema = bounded_schema(max_tokens)
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft7Validator.check_schema(schema)
    assert "$ref" not in json.dumps(schema)
    for node in walk(schema):
        if "properties" in node:
            assert node["additionalProperties"] is False and set(node["required"]) == set(node["properties"])


@pytest.mark.parametrize("max_tokens", LIMITS)
def test_every_array_and_free_string_is_bounded_within_llama_cpp_limits(max_tokens):
    schema = bounded_schema(max_tokens)
    arrays = strings = 0
    for node in walk(schema):
        kinds = node.get("type") if isinstance(node.get("type"), list) else [node.get("type")]
        if "array" in kinds:
            arrays += 1
            assert 0 <= node["maxItems"] <= GRAMMAR_REPETITION_LIMIT
        if "string" in kinds and "enum" not in node:
            strings += 1
            assert 0 < node["maxLength"] <= GRAMMAR_REPETITION_LIMIT
        assert "number" not in kinds, "a free number is 52 characters in llama.cpp's grammar"
        if "integer" in kinds:
            assert "minimum" in node and "maximum" in node
    assert arrays == 9 and strings >= 23


@pytest.mark.parametrize("max_tokens", LIMITS)
def test_worst_case_fits_the_token_limit(max_tokens):
    assert worst_case_tokens(bounded_schema(max_tokens)) <= max_tokens


@given(st.integers(min_value=worst_case_tokens(apply_bounds(TIERS[0])), max_value=40_000))
def test_worst_case_fits_any_limit_above_the_smallest_tier(max_tokens):
    assert worst_case_tokens(bounded_schema(max_tokens)) <= max_tokens


def test_below_the_smallest_tier_the_schema_is_as_small_as_it_gets():
    tiny = bounds_for(16)
    assert (tiny.name, tiny.blocks, tiny.block, tiny.forms) == ("text", 2, schema_mod.BLOCK_CHARS_MIN, 0)
    assert bounded_schema(16) == bounded_schema(100)
    assert worst_case_tokens(bounded_schema(16)) == 350  # as the module docstring says


@pytest.mark.parametrize("max_tokens", LIMITS)
def test_worst_case_estimate_is_the_largest_document_measured(max_tokens):
    schema = bounded_schema(max_tokens)
    doc = largest_document(schema)
    jsonschema.Draft202012Validator(schema).validate(doc)
    size = worst_case_size(schema)
    values = list(leaves(doc))
    assert size.chars == len(json.dumps(doc, ensure_ascii=False))
    assert size.text == sum(len(v) for v in values if isinstance(v, str) and set(v) == {"x"})
    assert size.digits == sum(len(str(v)) for v in values if isinstance(v, int) and not isinstance(v, bool))
    assert worst_case_tokens(schema) == math.ceil(size.text / 3 + size.structure / 2.5 + size.digits)


@pytest.mark.parametrize(
    ("max_tokens", "tier", "blocks", "block_chars", "forms"),
    # The examples the module docstring gives.
    [(400, "text", 2, 116, 0), (600, "short", 3, 154, 0), (1024, "form", 3, 176, 1),
     (2048, "medium", 4, 248, 1), (4096, "seed", 5, 637, 1), (8192, "large", 6, 418, 2)],
)
def test_small_limits_get_a_few_short_blocks_and_no_forms(max_tokens, tier, blocks, block_chars, forms):
    bounds = bounds_for(max_tokens)
    assert (bounds.name, bounds.blocks, bounds.block, bounds.forms) == (tier, blocks, block_chars, forms)
    items = bounded_schema(max_tokens)["properties"]["content"]["properties"]["text_blocks"]
    assert (items["minItems"], items["maxItems"], items["items"]["properties"]["content"]["maxLength"]) == (
        1, blocks, block_chars)


def test_the_docstring_table_is_computed():
    assert all(row in schema_mod.__doc__ for row in tier_table())
    sizes = [worst_case_tokens(apply_bounds(tier)) for tier in TIERS]
    assert sizes == sorted(sizes)


@pytest.mark.parametrize("title", sorted(SEEDS))
def test_seed_examples_fit_the_bounds_a_4096_token_limit_gets(title):
    schema = bounded_schema(4096)
    jsonschema.Draft202012Validator(schema).validate(as_strict_server_writes_it(SEEDS[title], schema))


def test_at_the_default_limit_the_seed_examples_fit_but_the_three_question_form():
    schema = bounded_schema(2048)
    check = jsonschema.Draft202012Validator(schema)
    fits = {title for title, doc in SEEDS.items() if check.is_valid(as_strict_server_writes_it(doc, schema))}
    assert fits == set(SEEDS) - {"Assessment Form"}


def _a_reply(schema):
    return as_strict_server_writes_it(SEEDS["Educational Content with Optional Form"], schema)


@pytest.mark.parametrize(
    "spoil",
    [
        lambda d, b: d["content"]["text_blocks"].extend(copy.deepcopy(d["content"]["text_blocks"]) * b.blocks),
        lambda d, b: d["content"]["text_blocks"].clear(),
        lambda d, b: d["content"]["text_blocks"][0].update(content="a" * (b.block + 1)),
        lambda d, b: d["content"]["next_step"]["suggestions"].append("x" * (b.suggestion + 1)),
        lambda d, b: d["content"]["next_step"]["suggestions"].extend(["more?"] * b.suggestions),
        lambda d, b: d["content"]["forms"][0]["fields"][0]["options"].extend(
            [{"value": "v", "label": "l"}] * b.options),
        lambda d, b: d["content"]["forms"][0].update(id="f" * (b.id + 1)),
        lambda d, b: d["content"]["forms"].extend(copy.deepcopy(d["content"]["forms"]) * b.forms),
        lambda d, b: d["meta"]["progress"]["covered_topics"].extend(["topic"] * b.topics),
        lambda d, b: d["meta"]["progress"].update(percentage=20.5),
    ],
    ids=["too_many_blocks", "no_blocks", "long_block", "long_suggestion", "too_many_suggestions",
         "too_many_options", "long_id", "too_many_forms", "too_many_topics", "fractional_percentage"],
)
def test_the_bounded_schema_refuses_what_exceeds_its_bounds(spoil):
    schema = bounded_schema(2048)
    check = jsonschema.Draft202012Validator(schema)
    doc = _a_reply(schema)
    assert check.is_valid(doc)
    spoil(doc, bounds_for(2048))
    assert not check.is_valid(doc)


def test_our_own_validation_knows_no_such_bounds():
    text = json.dumps(TutorResponse.model_json_schema())
    assert "maxLength" not in text and "maxItems" not in text
    long = {"content": {"text_blocks": [{"type": "paragraph", "content": "word " * 2000}] * 40},
            "meta": {"response_type": "educational", "progress": {"percentage": 20.5}}}
    TutorResponse.model_validate(long)


def test_response_schema_keeps_openai_on_the_strict_schema():
    assert response_schema(2048, strict_openai=True) == strict_schema()
    assert response_schema(2048, strict_openai=False) == bounded_schema(2048)
    assert "maxLength" not in json.dumps(response_schema(600, strict_openai=True))


def test_bounded_schema_is_a_fresh_copy():
    bounded_schema(600)["properties"].clear()
    assert "content" in bounded_schema(600)["properties"]


def test_a_new_unbounded_field_cannot_reach_a_grammar():
    class Extra(BaseModel):
        nickname: str
        scores: list[int]

    with pytest.raises(ValueError, match="nickname"):
        apply_bounds(TIERS[0], Extra)
