"""Checks and sources in the module format: loading, and `tutor modules check` rules with
file:line messages."""

from __future__ import annotations

import json

import jsonschema
import yaml

from tests.teach.helpers import GUIDE, MINI, write_mini
from tutor.content.material import parse_source, slugify
from tutor.content.modules import check_file, check_text, load_library, schema_json


def _problems(tmp_path, module: str, guide: str | None = GUIDE) -> list[str]:
    path = write_mini(tmp_path, module, guide)
    return check_file(path, "mini.yaml").problems


def _line(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_a_sound_module_loads_its_sources_once_with_their_sections(tmp_path):
    write_mini(tmp_path)
    library = load_library(tmp_path)
    assert library.problems == {}
    module = library.get("mini")
    guide = module.loaded_sources["guide"]
    assert [s.id for s in guide.sections] == ["intro", "slow_breathing", "grounding"]
    assert guide.section("grounding").title == "Grounding"
    assert guide.section("slow_breathing").text.startswith("Breathing out slowly")
    assert guide.section("slow_breathing").line == 5
    topic, check = module.find_check("breath_check")
    assert topic.id == "breathing" and check.threshold == 7
    assert check.rubric.names == ("long_out_breath", "calming")
    assert module.find_check("nope") is None


def test_the_sample_module_has_checks_on_most_topics_and_sources_behind_them(sample):
    with_checks = [t for t in sample.topics if t.checks]
    assert len(with_checks) >= 0.8 * len(sample.topics)
    assert len(sample.loaded_sources) >= 2
    for source in sample.loaded_sources.values():
        assert 1500 <= len(source.text.split()) <= 3000
        assert len(source.sections) >= 4
    assert all(t.sources for t in sample.topics)


def test_checking_text_without_its_folder_skips_the_files(tmp_path):
    result = check_text(MINI, "mini.yaml")
    assert result.ok and result.module.loaded_sources == {}


def test_missing_and_unreadable_sources_are_module_problems_not_crashes(tmp_path):
    line = _line(MINI, "file: mini/guide.md")
    [problem] = _problems(tmp_path, MINI, guide=None)
    assert problem.startswith(f"mini.yaml:{line}: source file not found: 'mini/guide.md'")
    (tmp_path / "mini" / "guide.md").write_bytes(b"\xff\xfe not utf-8 \xc3")
    [problem] = check_file(tmp_path / "mini.yaml", "mini.yaml").problems
    assert problem.startswith(f"mini.yaml:{line}: cannot read source file 'mini/guide.md'")
    library = load_library(tmp_path)
    assert "mini" not in library.modules and library.problems


def test_source_paths_must_stay_inside_the_modules_folder_and_be_text(tmp_path):
    for bad, why in [("../secret.md", "must be a relative path"), ("/etc/passwd.md", "must be a relative path"),
                     ("mini/guide.pdf", "must be markdown or text")]:
        problems = _problems(tmp_path, MINI.replace("file: mini/guide.md", f"file: {bad}"))
        assert len(problems) == 1 and why in problems[0], problems


def test_unknown_sources_and_sections_are_reported_at_the_reference(tmp_path):
    text = MINI.replace("sources: [guide#slow_breathing]", "sources: [guide#nowhere, manual#intro]")
    line = _line(text, "sources: [guide#nowhere")
    assert _problems(tmp_path, text) == [
        f"mini.yaml:{line}: source 'guide' has no section 'nowhere' (sections: intro, slow_breathing, grounding)",
        f"mini.yaml:{line}: topic 'breathing' points at unknown source 'manual' (sources: guide)",
    ]


def test_check_rules_name_the_value_and_its_line(tmp_path):
    text = MINI.replace("key_points: [calm*]", "weight: 0\n                      key_points: ['…', 'x*']") \
               .replace("                rubric:\n", "                threshold: 11\n                rubric:\n")
    text += """\
          - id: second
            title: Second
            checks:
              - id: breath_check
                question: Again?
                example_answer: Yes.
                rubric: {criteria: []}
"""
    problems = _problems(tmp_path, text)
    expected = [
        (_line(text, "threshold: 11"), "threshold: Input should be less than or equal to 10 (got 11)"),
        (_line(text, "weight: 0"), "weight: Input should be greater than 0 (got 0)"),
        (_line(text, "rubric: {criteria: []}"), "criteria: List should have at least 1 item"),
    ]
    for line, message in expected:
        assert any(p.startswith(f"mini.yaml:{line}: ") and message in p for p in problems), (message, problems)
    # pydantic refuses the file first; the semantic rules run on a file that validates
    text = MINI.replace("key_points: [calm*]", "key_points: ['…', 'x*']") + """\
          - id: second
            title: Second
            checks:
              - id: breath_check
                question: Again?
                example_answer: Again.
                rubric: {criteria: [{name: c, description: d, key_points: [again]}]}
"""
    points = _line(text, "key_points: ['…'")
    duplicate = [i for i, line in enumerate(text.splitlines(), 1) if "- id: breath_check" in line][1]
    assert _problems(tmp_path, text) == [
        f"mini.yaml:{points}: key point '…' has no letters or digits to match",
        f"mini.yaml:{points}: key point 'x*': '*' may only end a word of 3 or more letters",
        f"mini.yaml:{duplicate}: duplicate check id 'breath_check'",
    ]


def test_duplicate_and_reserved_source_ids(tmp_path):
    text = MINI.replace(
        "  - {id: guide, title: The guide, file: mini/guide.md}\n",
        "  - {id: guide, title: The guide, file: mini/guide.md}\n"
        "  - {id: guide, title: Again, file: mini/guide.md}\n"
        "  - {id: module, title: Reserved, file: mini/guide.md}\n",
    )
    problems = _problems(tmp_path, text)
    assert f"mini.yaml:{_line(text, 'title: Again')}: duplicate source id 'guide'" in problems
    assert any("source id 'module' is reserved" in p for p in problems)


def test_source_sections_come_from_level_two_headings():
    source, problems = parse_source(GUIDE, "guide", "The guide")
    assert problems == []
    assert [(s.id, s.title, s.line) for s in source.sections] == [
        ("intro", "The guide", 3), ("slow_breathing", "Slow breathing", 5), ("grounding", "Grounding", 10)]
    text = "## Same\n\nOne.\n\n## Same\n\nTwo.\n\n## Empty\n\n```\n## not a heading\n```\n\n## Ünïcode héading\n\nok\n"
    source, problems = parse_source(text, "x", "X")
    assert problems == [(5, "duplicate section id 'same' (set one with '{#other_id}')")]
    assert [s.id for s in source.sections] == ["same", "same", "empty", "unicode_heading"]
    assert "## not a heading" in source.section("empty").text
    _, problems = parse_source("## 5-4-3-2-1\n\ntext\n\n## Nothing\n", "x", "X")
    assert problems == [(1, "section id '5_4_3_2_1' is not a snake_case id (give it an explicit id: "
                            "'## Heading {#some_id}')"), (5, "section 'nothing' is empty")]
    assert slugify("How the body's alarm works!") == "how_the_body_s_alarm_works"


def test_the_published_schema_describes_checks_and_sources(sample, tmp_path):
    schema = json.loads(schema_json())
    jsonschema.validate(yaml.safe_load(MINI), schema)
    for name in ("Check", "Criterion", "Rubric", "KeyPoint", "SourceFile", "Misconception"):
        assert name in schema["$defs"], name
    bad = yaml.safe_load(MINI)
    bad["phases"][0]["sections"][0]["topics"][0]["checks"][0]["rubric"]["criteria"][0]["weight"] = -1
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(bad))
