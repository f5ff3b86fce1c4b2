"""Previews of a reply still being written (tutor.contract.partial)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tutor.contract import parse
from tutor.contract.partial import _Spine, preview

CORPUS = yaml.safe_load((Path(__file__).parent / "corpus" / "replies.yaml").read_text(encoding="utf-8"))
# A reply that writes "content" twice is shown whole once parsed; its preview may change
# its mind midway (the stored reply replaces the preview in any case).
VALID = [c for c in CORPUS if c["outcome"] == "valid" and c["id"] != "valid_duplicate_keys_last_wins"]


def _final(raw: str):
    parsed = parse(raw)
    assert parsed.outcome == "valid"
    return parsed.response


@pytest.mark.parametrize("case", VALID, ids=[c["id"] for c in VALID])
def test_every_prefix_of_a_valid_reply_previews_only_what_the_reply_holds(case):
    raw = case["raw"]
    final = _final(raw)
    finals = [b.content for b in final.content.text_blocks]
    suggestions = (final.content.next_step.suggestions or []) if final.content.next_step else []
    grown: list[str] = []
    memo: dict = {}  # kept across the reads, as the live feed keeps it: the same previews
    for cut in range(1, len(raw) + 1):
        p = preview(raw[:cut])
        assert preview(raw[:cut], memo) == p
        for i, block in enumerate(p.blocks):
            assert i < len(finals)
            # growing text is always the start of the final text; complete text is all of it
            assert finals[i].startswith(block.content)
            if block.complete:
                assert block.content == finals[i]
            if i < len(p.blocks) - 1:
                assert block.complete  # only the last block can still be growing
        for form in p.forms:
            assert form in (final.content.forms or [])
        assert set(p.suggestions) <= set(suggestions)
        # blocks never disappear or shrink as the text grows
        texts = [b.content for b in p.blocks]
        assert len(texts) >= len(grown) and all(t.startswith(g) for t, g in zip(texts, grown))
        grown = texts
    assert [b.content for b in preview(raw).blocks] == finals


def test_a_block_appears_as_soon_as_its_text_starts_and_its_type_is_known():
    assert preview('{"content": {"text_blocks": [{"type": "para').blocks == ()
    p = preview('{"content": {"text_blocks": [{"type": "paragraph", "content": "Anxiety is')
    assert [(b.type, b.content, b.complete) for b in p.blocks] == [("paragraph", "Anxiety is", False)]


def test_forms_media_and_suggestions_appear_only_once_complete_and_valid():
    form = {"id": "check", "fields": [{"id": "level", "type": "radio", "label": "Which level?",
                                       "options": [{"value": "body", "label": "Body"}]}]}
    head = '{"content": {"text_blocks": [{"type": "paragraph", "content": "Try this."}], "forms": ['
    whole = head + json.dumps(form) + '], "next_step": {"suggestions": ["Yes", "No"]}}, "meta": {"response_type": "assessment"}}'
    half_form = head + json.dumps(form)[:-3]
    assert preview(half_form).forms == ()
    assert len(preview(head + json.dumps(form) + "]").forms) == 1
    # a choice field without options is not a valid form: never previewed
    bad = dict(form, fields=[{"id": "level", "type": "radio", "label": "Which?"}])
    assert preview(head + json.dumps(bad) + "]").forms == ()
    cut_in_suggestion = whole[: whole.index('"No"') + 2]
    assert preview(cut_in_suggestion).suggestions == ("Yes",)
    assert preview(whole).suggestions == ("Yes", "No")
    unsafe = '{"content": {"text_blocks": [], "media": [{"type": "image", "src": "javascript:alert(1)"}, '
    assert preview(unsafe).media == ()


@pytest.mark.parametrize("raw", [
    "", "Sure! Here is", "<think>let me see {\"content\"", "```json\n", "{", "[1, 2", "null",
    '{"content": "Anxiety is the body', '{"content": {"text_blocks": [{"type": "paragraph", "content": 5}]}}',
    '{"content": {"text_blocks": [{"type": "script", "content": "x"}]}}',
])
def test_odd_prefixes_preview_nothing_wrong_and_never_raise(raw):
    p = preview(raw)
    assert all(b.type in ("paragraph", "heading", "list", "quote", "info", "warning", "success", "tip") for b in p.blocks)
    assert all(isinstance(b.content, str) for b in p.blocks)


def test_prose_and_fences_before_the_object_are_skipped():
    p = preview('Here you go:\n```json\n{"content": {"text_blocks": [{"type": "tip", "content": "Breathe out slowly')
    assert [(b.type, b.content) for b in p.blocks] == [("tip", "Breathe out slowly")]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_any_cut_of_any_valid_reply_never_raises_and_never_invents_text(data):
    case = data.draw(st.sampled_from(VALID))
    raw = case["raw"]
    cut = data.draw(st.integers(0, len(raw)))
    noise = data.draw(st.sampled_from(["", "\\", "\\u00", '"', "}", "]", "\ud800", "tr", "1e"]))
    p = preview(raw[:cut] + noise)
    finals = [b.content for b in _final(raw).content.text_blocks]
    for i, block in enumerate(p.blocks[:-1]):
        assert block.content == finals[i]


# The spine's bracket depth and open string, as first written: one regex token at a time.
_REFERENCE_TOKENS = re.compile(r'(?P<s>"(?:[^"\\]|\\.)*")|(?P<u>"(?:[^"\\]|\\.)*\\?\Z)|[{}\[\]]')


def _reference_depth(text: str) -> tuple[int, bool]:
    depth, in_string = 0, False
    for match in _REFERENCE_TOKENS.finditer(text):
        if match.group("u") is not None:
            in_string = True
        elif match.group("s") is None:
            depth += 1 if match.group() in "{[" else -1
    return depth, in_string


def _depth(text: str) -> tuple[int, bool]:
    """What _Spine makes of `text`: reached through the open ids of a deep enough document."""
    nested: dict = {}
    node = nested
    for _ in range(64):
        node["k"] = {}
        node = node["k"]
    spine = _Spine(nested, text)
    return len(spine.open_ids), spine.tail_open


# Strings holding what could fool a bracket count: quotes, escaped quotes, backslashes
# before quotes, brackets, and an escape cut in half at the end.
_TRICKY = st.lists(st.sampled_from(['"', '\\"', "\\\\", "\\", "{", "}", "[", "]", "a", " ", ":", ",", "é", "\\u00"]),
                   max_size=40).map("".join)


@settings(max_examples=300, deadline=None)
@given(_TRICKY)
def test_the_spine_counts_brackets_outside_strings_as_the_token_scan_did(inner):
    # The tricky text itself, and every cut of a reply whose strings hold it.
    raw = json.dumps({"content": {"text_blocks": [{"type": "paragraph", "content": inner}]}, "x": [inner, {}]})
    for text in [inner, *(raw[:i] for i in range(len(raw) + 1))]:
        depth, in_string = _reference_depth(text)
        assert _depth(text) == (max(0, min(depth, 65)), in_string), text
