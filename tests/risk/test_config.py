"""The safety file as an author writes it: checked with file:line messages, loaded from the
modules directory, and extended by a module's override."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tutor.risk import (SafetyConfigError, SafetyOverride, check_safety_text, default_safety_path, load_safety,
                        merged, override_findings, screen)
from tutor.risk.config import REPO_ROOT

from .conftest import DEFAULT_FILE

MINIMAL = """\
languages: [en]
labels:
  self_harm:
    title: Suicide or self-harm
    signals:
      en:
        phrases: [kill* myself]
    reply: [{type: paragraph, content: Please call your local emergency number.}]
check_in: [{type: paragraph, content: "How are you feeling?"}]
"""


def test_the_shipped_default_passes_the_check_and_has_the_canonical_labels():
    config, problems = check_safety_text(DEFAULT_FILE.read_text(encoding="utf-8"), "default.yaml")
    assert problems == []
    assert {"self_harm", "harm_to_others", "abuse", "medical_emergency"} <= set(config.labels)
    assert config.languages == ["en", "vi"]


def test_a_minimal_file_is_enough():
    config, problems = check_safety_text(MINIMAL, "mini.yaml")
    assert problems == [] and config is not None
    assert [f.label for f in screen("i could kill myself", config)] == ["self_harm"]


def test_malformed_files_report_file_and_line():
    text = """\
languages: [en]
vocabulary:
  en:
    groups: {person: [him, her]}
labels:
  self_harm:
    title: Suicide or self-harm
    signals:
      en:
        phrases:
          - kill* myself
          - (end my life
          - hurt {people}
        patterns: ['(unclosed']
      fr:
        phrases: [me tuer]
    reply:
      en: [{type: paragraph, content: Call your local emergency number.}]
    colour: red
  Bad-Label:
    title: x
    signals: {en: {phrases: [x y]}}
    reply: [{type: paragraph, content: x}]
check_in: {de: [{type: paragraph, content: Hallo}]}
"""
    config, problems = check_safety_text(text, "bad.yaml")
    assert config is None
    joined = "\n".join(problems)
    assert "bad.yaml:12: " in joined and "'(' without a matching ')'" in joined
    assert "bad.yaml:13: " in joined or "unknown word group" not in joined
    assert "bad.yaml:14: " in joined and "invalid regular expression" in joined
    assert "bad.yaml:19: unknown key 'colour'" in joined
    assert "bad.yaml:20: " in joined and "'Bad-Label' is not a snake_case id" in joined
    assert all(p.startswith("bad.yaml:") for p in problems)


def test_rules_pydantic_cannot_see_are_reported_on_their_lines():
    text = """\
languages: [en]
vocabulary: {en: {groups: {person: [him]}}}
labels:
  self_harm:
    title: Suicide or self-harm
    signals:
      en:
        phrases: [kill* myself, 'hurt {people}']
    reply: [{type: paragraph, content: Please call your local emergency number.}]
    supersedes: [nothing]
check_in: {vi: [{type: paragraph, content: "Bạn thấy thế nào?"}]}
"""
    config, problems = check_safety_text(text, "rules.yaml")
    assert config is None
    assert any(p.startswith("rules.yaml:8: ") and "unknown word group {people}" in p for p in problems), problems
    assert any(p.startswith("rules.yaml:10: ") and "supersedes 'nothing'" in p for p in problems), problems
    assert any(p.startswith("rules.yaml:11: ") and "language 'vi' is not in languages" in p for p in problems)
    assert any(p.startswith("rules.yaml:11: ") and "no reply in 'en'" in p for p in problems)


def test_invalid_yaml_and_duplicate_keys():
    _, problems = check_safety_text("languages: [en\nlabels: {}\n", "broken.yaml")
    assert problems and problems[0].startswith("broken.yaml:") and "invalid YAML" in problems[0]
    _, problems = check_safety_text(MINIMAL + "languages: [en]\n", "dup.yaml")
    assert "dup.yaml:10: duplicate key 'languages' (YAML keeps only the last one)" in problems
    _, problems = check_safety_text("- a list\n", "list.yaml")
    assert problems == ["list.yaml:1: a safety file is a mapping with languages, labels and check_in"]


def test_load_safety_reads_the_modules_directory_and_falls_back_to_the_repository(tmp_path, monkeypatch):
    monkeypatch.setenv("TUTOR_MODULES_DIR", str(tmp_path))
    assert default_safety_path() == REPO_ROOT / "modules" / "safety" / "default.yaml"  # none there yet
    (tmp_path / "safety").mkdir()
    (tmp_path / "safety" / "default.yaml").write_text(MINIMAL, encoding="utf-8")
    assert default_safety_path() == tmp_path / "safety" / "default.yaml"
    config = load_safety()
    assert list(config.labels) == ["self_harm"]
    assert load_safety() is config  # cached until the file changes


def test_load_safety_refuses_a_broken_file_with_its_lines(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text(MINIMAL.replace("phrases: [kill* myself]", "phrases: [(kill myself]"), encoding="utf-8")
    with pytest.raises(SafetyConfigError) as info:
        load_safety(path)
    assert f"{path}:7: " in str(info.value)
    with pytest.raises(SafetyConfigError):
        load_safety(tmp_path / "missing.yaml")


# --- module overrides ---------------------------------------------------------------------


def override(data: dict) -> SafetyOverride:
    return SafetyOverride.model_validate(data)


def test_a_module_adds_phrases_to_a_label_and_keeps_the_defaults(config):
    text = "I want to vanish without a trace"
    assert screen(text, config) == []
    mine = merged(config, override({"labels": {"self_harm": {"signals": {"en": {
        "indirect": ["want to vanish without a trace"]}}}}}))
    assert [f.label for f in screen(text, mine)] == ["self_harm"]
    assert [f.label for f in screen("I want to kill myself", mine)] == ["self_harm"]
    assert screen(text, config) == []  # the base is untouched


def test_a_module_silences_a_false_positive_with_an_idiom_not_by_removing_a_label(config):
    text = "In this course, we cut ourselves off and I cut myself free from worry"
    assert [f.label for f in screen("I cut myself free from worry", config)] == ["self_harm"]
    mine = merged(config, override({"labels": {"self_harm": {"signals": {"en": {"idioms": ["cut myself free"]}}}}}))
    assert screen(text, mine) == []
    assert set(mine.labels) == set(config.labels)


def test_replies_are_replaced_per_language_or_all_at_once(config):
    block = {"type": "paragraph", "content": "Module reply"}
    per_language = merged(config, override({"labels": {"abuse": {"reply": {"en": [block]}}}}))
    assert per_language.reply_for("abuse", "en")[0].content == "Module reply"
    assert per_language.reply_for("abuse", "vi") == config.reply_for("abuse", "vi")
    everywhere = merged(config, override({"labels": {"abuse": {"reply": [block]}}, "check_in": [block]}))
    assert everywhere.reply_for("abuse", "vi")[0].content == "Module reply"
    assert everywhere.check_in_for("vi")[0].content == "Module reply"


def test_a_module_adds_a_new_label_and_a_language(config):
    block = {"type": "paragraph", "content": "x"}
    mine = merged(config, override({
        "languages": ["fr"],
        "labels": {"exam_crisis": {"title": "Exam crisis", "signals": {"fr": {"phrases": ["je vais tout rater"]}},
                                   "reply": {"fr": [block], "en": [block]}}},
        "check_in": {"fr": [block]},
    }))
    assert mine.languages == ["en", "vi", "fr"]
    assert [f.label for f in screen("Je vais TOUT rater demain", mine)] == ["exam_crisis"]
    assert screen("Je vais TOUT rater demain", mine)[0].language == "fr"


def test_override_problems_name_the_path_inside_the_override(config):
    incomplete = override({"labels": {"exam_crisis": {"title": "Exam crisis"}}})
    assert override_findings(config, incomplete) == [(("labels", "exam_crisis"),
                                                      "new label 'exam_crisis' needs reply, signals")]
    with pytest.raises(SafetyConfigError, match="needs reply, signals"):
        merged(config, incomplete)
    bad_group = override({"labels": {"self_harm": {"signals": {"en": {"phrases": ["x", "hurt {nobody_here}"]}}}}})
    findings = override_findings(config, bad_group)
    assert findings and findings[0][0] == ("labels", "self_harm", "signals", "en", "phrases", 1)
    with pytest.raises(ValidationError):
        SafetyOverride.model_validate({"labels": {"self_harm": {"remove": True}}})  # no such key
    assert merged(config, None) is config and override_findings(config, None) == []
