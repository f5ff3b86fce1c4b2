"""The corpus: raw replies as models really write them, and what the learner must get."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.contract.checks import invented_strings
from tutor.contract import parse

CORPUS = Path(__file__).parent / "corpus" / "replies.yaml"
ENTRIES = yaml.safe_load(CORPUS.read_text(encoding="utf-8"))
KNOWN_KEYS = {"id", "raw", "finish_reason", "outcome", "flags", "absent_flags", "first_text", "texts_contain",
              "blocks", "forms", "fields", "media", "suggestions", "response_type", "errors_contain"}


def test_corpus_is_big_and_well_formed():
    ids = [entry["id"] for entry in ENTRIES]
    assert len(ids) >= 70
    assert len(set(ids)) == len(ids), "corpus ids must be unique"
    for entry in ENTRIES:
        assert set(entry) <= KNOWN_KEYS, entry["id"]
        assert isinstance(entry["raw"], str) and entry["outcome"] in ("valid", "repaired", "invalid")
    outcomes = {entry["outcome"] for entry in ENTRIES}
    assert outcomes == {"valid", "repaired", "invalid"}


@pytest.mark.parametrize("entry", ENTRIES, ids=[entry["id"] for entry in ENTRIES])
def test_corpus_reply(entry):
    parsed = parse(entry["raw"], finish_reason=entry.get("finish_reason"))
    assert parsed.outcome == entry["outcome"], (parsed.flags, parsed.errors)
    assert parsed.raw == entry["raw"]
    assert set(entry.get("flags", [])) <= set(parsed.flags), parsed.flags
    assert not set(entry.get("absent_flags", [])) & set(parsed.flags), parsed.flags
    if parsed.outcome == "invalid":
        assert parsed.response is None
        assert "invalid_json" in parsed.flags
        assert parsed.errors, "an invalid reply says why, for re-asking the model"
    else:
        assert "invalid_json" not in parsed.flags
        assert invented_strings(parsed) == []
    if parsed.outcome == "valid":
        assert set(parsed.flags) <= {"truncated"}
    if "errors_contain" in entry:
        assert any(entry["errors_contain"] in error for error in parsed.errors), parsed.errors
    if parsed.response is None:
        return
    content, meta = parsed.response.content, parsed.response.meta
    if "first_text" in entry:
        assert content.text_blocks[0].content == entry["first_text"]
    if "texts_contain" in entry:
        assert any(entry["texts_contain"] in block.content for block in content.text_blocks)
    if "blocks" in entry:
        assert len(content.text_blocks) == entry["blocks"]
    if "forms" in entry:
        assert len(content.forms or []) == entry["forms"]
    if "fields" in entry:
        assert len(content.forms[0].fields) == entry["fields"]
    if "media" in entry:
        assert len(content.media or []) == entry["media"]
    if "suggestions" in entry:
        assert len(content.next_step.suggestions) == entry["suggestions"]
    if "response_type" in entry:
        assert meta.response_type == entry["response_type"]
