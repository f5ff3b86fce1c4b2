"""The ladder's rules, one at a time: which candidate wins, what the guards refuse."""

from __future__ import annotations

import json

import pytest

from tutor.contract import TutorResponse, parse
from tutor.contract.extract import clean, scan_values
from tutor.contract.honesty import dishonest_strings
from tutor.contract.repair import escape_inner_quotes, lex_flags

REPLY = {"content": {"text_blocks": [{"type": "paragraph", "content": "Slow breathing helps."}]},
         "meta": {"response_type": "educational", "emotion": "supportive"}}
RAW = json.dumps(REPLY)


def test_valid_reply_takes_the_fast_path_unchanged():
    parsed = parse(RAW)
    assert parsed.outcome == "valid" and parsed.flags == [] and parsed.errors == []
    assert parsed.response == TutorResponse.model_validate_json(RAW)
    assert parsed.to_json_dict() == {"outcome": "valid", "flags": [], "response": REPLY, "errors": []}


def test_finish_reason_length_flags_truncation_even_when_complete():
    assert parse(RAW, finish_reason="length").flags == ["truncated"]
    assert parse(RAW, finish_reason="stop").flags == []


def test_an_example_followed_by_the_real_reply_yields_the_real_one():
    example = {"content": {"text_blocks": [{"type": "paragraph", "content": "..."}]},
               "meta": {"response_type": "educational"}}
    raw = f"For example: {json.dumps(example)}\nMy reply: {RAW}"
    parsed = parse(raw)
    assert parsed.response.to_json_dict() == REPLY
    # ... and the other way round: the substantive reply wins, wherever it stands.
    parsed = parse(f"{RAW}\nTemplate: {json.dumps(example)}")
    assert parsed.response.to_json_dict() == REPLY


def test_a_fence_inside_a_json_string_does_not_cut_the_reply():
    reply = {"content": {"text_blocks": [{"type": "paragraph", "content": "Run:\n```\nbreathe()\n```\nok"}]},
             "meta": {"response_type": "educational"}}
    parsed = parse("```json\n" + json.dumps(reply, indent=2) + "\n```")
    assert parsed.outcome == "repaired" and parsed.flags == ["fence"]
    assert parsed.response.to_json_dict() == reply


def test_closing_think_tag_only_drops_the_reasoning_before_it():
    cleaned = clean("reasoning about {braces} here</think>\n" + RAW)
    assert cleaned.text == RAW and cleaned.flags == ["think_block"]


def test_a_whole_inner_array_does_not_beat_repairing_the_broken_reply_around_it():
    # meta comes first and is broken; text_blocks after it is a perfect array on its own.
    raw = ('{"meta": {"response_type": "summary",, "emotion": "celebratory"}, '
           '"content": {"text_blocks": [{"type": "success", "content": "Halfway there!"}]}}')
    parsed = parse(raw)
    assert parsed.outcome == "repaired"
    assert "bare_blocks" not in parsed.flags
    assert parsed.response.meta.response_type == "summary"
    assert parsed.response.meta.emotion == "celebratory"


def test_unescaped_quotes_keep_the_whole_sentence():
    raw = ('{"content": {"text_blocks": [{"type": "paragraph", "content": "He said "no, never" and left."}]}, '
           '"meta": {"response_type": "conversational"}}')
    parsed = parse(raw)
    assert parsed.response.content.text_blocks[0].content == 'He said "no, never" and left.'
    assert "unescaped_quote" in parsed.flags and "truncated" not in parsed.flags


def test_escape_inner_quotes_leaves_valid_json_alone():
    assert escape_inner_quotes(RAW) == RAW
    text = '{"a": ["x", "y"], "b": {"c": "say "hi" now"}, "d": true}'
    assert json.loads(escape_inner_quotes(text))["b"]["c"] == 'say "hi" now'


def test_lex_names_repairs_and_sees_truncation():
    lexed = lex_flags('{"a": [1, 2,], // note\n "b": True, c: \'x\'')
    assert {"trailing_comma", "comment", "python_literal", "unquoted_key", "single_quotes",
            "truncated"} <= set(lexed.flags)
    assert lex_flags('{"a": "b"}').flags == []
    assert lex_flags('{"a": "cut off').truncated


def test_backslashes_that_cannot_be_escapes_are_kept_literally():
    lexed = lex_flags(r'{"a": "\alpha + \beta = \frac{1}{2}", "b": "line\nNext"}')
    decoded = json.loads(lexed.text)
    assert decoded == {"a": r"\alpha + \beta = \frac{1}{2}", "b": "line\nNext"}
    assert lexed.flags == ["invalid_escape"]


def test_scan_finds_every_top_level_value_with_a_real_decoder():
    text = 'a {b} {"x": "}{"} [1, 2] {"y": 1'
    scan = scan_values(text)
    assert [f.value for f in scan.values] == [{"x": "}{"}, [1, 2]]
    assert scan.failures and not scan.exhausted


def test_scan_is_bounded_on_pathological_input():
    # Every '{' opens a structure that fails only at the very end: unbounded, this is
    # quadratic. The budget stops the scan instead.
    text = '{"a": ' * 3000 + '"x"'
    scan = scan_values(text, budget_factor=4)
    assert scan.exhausted
    assert parse(text).outcome == "invalid"


@pytest.mark.parametrize("raw", ["[" * 100_000, "{\"a\":" * 50_000, '"' + "\\" * 10_001 + '"'])
def test_deep_or_degenerate_input_is_invalid_not_a_crash(raw):
    assert parse(raw).outcome == "invalid"


def test_honesty_guard_reports_invented_strings():
    raw = '{"content": {"text_blocks": [{"type": "paragraph", "content": "Real\\ntext  here"}]}}'
    ok = {"content": {"text_blocks": [{"type": "paragraph", "content": "Real text here"}]}}
    invented = {"content": {"text_blocks": [{"type": "paragraph", "content": "Real text there"}]}}
    assert dishonest_strings(ok, raw) == []
    assert dishonest_strings(invented, raw) == ["content.text_blocks.0.content"]
    made_up_id = {"content": {"forms": [{"id": "quick_check"}]}}
    assert dishonest_strings(made_up_id, raw) == ["content.forms.0.id"]
    assert dishonest_strings(made_up_id, raw, {("content", "forms", 0, "id")}) == []


def test_honesty_guard_rejects_what_json_repair_makes_up():
    # json-repair decodes this surrogate pair after a form feed into a literal "\f" and two
    # unpaired halves: text the reply never contained. The guard refuses that candidate
    # and the ladder falls back to the intact block inside the broken reply.
    raw = '{"content": {"text_blocks": [{"type": "paragraph", "content": "one\\f\\ud83d\\ude00 two"},]}}'
    parsed = parse(raw)
    assert parsed.outcome == "repaired"
    assert parsed.response.content.text_blocks[0].content == "one\f\U0001f600 two"
    assert "fragment" in parsed.flags


def test_smart_quotes_in_content_are_kept_as_written():
    raw = '{"content": {"text_blocks": [{"type": "quote", "content": "“Breathe,” she said — ‘slowly’."},]}}'
    parsed = parse(raw)
    assert parsed.response.content.text_blocks[0].content == "“Breathe,” she said — ‘slowly’."


def test_prose_is_never_turned_into_an_empty_reply():
    for raw in ("Hello!", "I can't do that.", "42", "null", "true", '""', "{}", "[]", "```json\n```"):
        parsed = parse(raw)
        assert parsed.outcome == "invalid" and parsed.response is None, raw


def test_broken_form_is_dropped_and_the_rest_kept():
    reply = json.loads(RAW)
    reply["content"]["forms"] = [
        {"id": "good", "fields": [{"id": "feel", "type": "text", "label": "How do you feel?"}]},
        {"id": "bad", "fields": [{"id": "pick", "type": "checkbox", "label": "Pick"}]},
    ]
    reply["content"]["media"] = [{"type": "image", "src": "javascript:alert(1)"}]
    parsed = parse(json.dumps(reply))
    assert parsed.outcome == "repaired"
    assert {"dropped_field", "dropped_form", "unsafe_media"} <= set(parsed.flags)
    assert [form.id for form in parsed.response.content.forms] == ["good"]
    assert parsed.response.content.media == []
    assert parsed.response.content.text_blocks[0].content == "Slow breathing helps."
    assert any("pick" in error for error in parsed.errors)
