"""Loading and checking author modules: sound files load, broken ones are refused with
file:line messages that name the offending value."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest
import yaml

from tutor.content.modules import (
    REPO_ROOT,
    Library,
    ModuleNotServable,
    check_file,
    check_text,
    load_library,
    modules_dir,
    schema_json,
)
from tutor.contract import Form

FIXTURES = Path(__file__).parent / "fixtures" / "modules"
GOOD = FIXTURES / "good"
BROKEN = FIXTURES / "broken"
SAMPLE = REPO_ROOT / "modules" / "understanding_anxiety.yaml"


def _problems(name: str, **kwargs) -> list[str]:
    path = BROKEN / f"{name}.yaml"
    return check_file(path, f"broken/{name}.yaml", **kwargs).problems


# --- sound modules ---------------------------------------------------------------------


def test_good_fixtures_load_with_their_structure_in_author_order():
    library = load_library(GOOD)
    assert library.problems == {}
    assert list(library.modules) == ["mini", "quick"]
    mini = library.get("mini")
    assert mini.topic_ids == (
        "what_is_anxiety", "anxiety_vs_fear", "three_levels", "physical_signs",
        "breathing", "avoidance", "exposure", "self_care",
    )
    assert [s.id for s in mini.sections] == ["basics", "body", "coping"]
    assert mini.section_of("breathing").title == "The body"
    assert mini.phase_of("coping").title == "Practice"
    assert mini.topic("exposure").title == "Gradual exposure"
    assert mini.topic("nope") is None and mini.section_of("nope") is None


def test_defaults_fill_what_authors_leave_out():
    quick = load_library(GOOD).get("quick")
    assert quick.mode == "stateless"
    assert quick.milestones == [25, 50, 100]  # sorted, as written subset
    mini = load_library(GOOD).get("mini")
    assert mini.milestones == [25, 50, 75, 100]
    assert mini.mode == "threaded"
    assert mini.variables["tone"].default == "calm and warm"


def test_form_covers_defaults_to_its_own_topic_and_converts_to_the_contract_form():
    text = (GOOD / "mini.yaml").read_text(encoding="utf-8").replace(
        "              covers: [three_levels, physical_signs]\n", ""
    )
    module = check_text(text, "mini.yaml").module
    assert module is not None
    entry = module.find_form("levels_check")
    assert entry.covers == ["three_levels"]
    form = entry.form
    assert type(form) is Form
    assert "covers" not in form.model_dump()
    assert [f.id for f in form.fields] == ["primary_level", "note"]
    assert form.fields[0].options[0].label == "Physical"
    assert module.find_form("unknown") is None


def test_the_sample_module_passes_the_check():
    result = check_file(SAMPLE)
    assert result.problems == []
    module = result.module
    assert module.id == "understanding_anxiety"
    assert len(module.sections) == 6
    assert len(module.topic_ids) >= 20


# --- broken modules: every rule, with file, line and offending value ------------------------

EXPECTED = {
    "duplicate_topic": [
        "broken/duplicate_topic.yaml:18: duplicate topic id 'breathing'",
        "broken/duplicate_topic.yaml:22: form 'calm_check' covers unknown topic 'relaxation'",
        "broken/duplicate_topic.yaml:33: section 'empty_one' has no topics",
    ],
    "bad_fields": [
        "broken/bad_fields.yaml:17: phases[0].sections[0].topics[0].form.fields[0]: "
        "field 'level' of type radio needs a non-empty options list",
        "broken/bad_fields.yaml:20: phases[0].sections[0].topics[0].form.fields[1]: "
        "field 'choices' of type checkbox needs a non-empty options list",
    ],
    "unresolved_variable": [
        "broken/unresolved_variable.yaml:10: unresolved variable '{{audience}}' "
        "(declare it under variables: with a default)",
        "broken/unresolved_variable.yaml:11: unresolved variable '{{dialect}}' "
        "(declare it under variables: with a default)",
    ],
    "invalid_yaml": ["broken/invalid_yaml.yaml:6: invalid YAML: found unexpected end of stream"],
    "schema_errors": [
        "broken/schema_errors.yaml:5: mode: Input should be 'threaded' or 'stateless' (got 'chatty')",
        "broken/schema_errors.yaml:6: milestones[1]: Input should be 25, 50, 75 or 100 (got 30)",
        "broken/schema_errors.yaml:14: phases[0].sections[0].topics[0].id: 'Breathing' is not a "
        "snake_case id (a-z, 0-9, _; starting with a letter)",
        "broken/schema_errors.yaml:16: unknown key 'keyword' in phases[0].sections[0].topics[0]",
        "broken/schema_errors.yaml:17: phases[0].sections[0].topics[1]: missing required key 'title'",
        "broken/schema_errors.yaml:21: phases[0].sections[0].topics[2].keywords[1]: "
        "Input should be a valid string (got 42)",
        "broken/schema_errors.yaml:23: phases[0].sections[0].topics[2].media[0].src: "
        "media src must be an app asset (/media/...) or on a host in TUTOR_MEDIA_HOSTS (got 'javascript:alert(1)')",
    ],
    "duplicate_key": ["broken/duplicate_key.yaml:15: duplicate key 'keywords' (YAML keeps only the last one)"],
    "wrong_name": [
        "broken/wrong_name.yaml:1: module id 'another_name' must equal the file name 'wrong_name'",
        "broken/wrong_name.yaml:14: keyword 'Next' is reserved for navigation and cannot mark a topic",
        "broken/wrong_name.yaml:15: alias '…' has no letters or digits to match",
        "broken/wrong_name.yaml:19: unknown callout '!!! note This callout type does not exist.' "
        "(use !!! info, !!! warning, !!! success, !!! tip)",
        "broken/wrong_name.yaml:21: media file not found: '/media/another_name/missing.svg' "
        "(expected in assets/media/another_name/missing.svg)",
        "broken/wrong_name.yaml:22: media '/media/other/x.svg' must live under /media/another_name/",
    ],
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_broken_fixture_reports_each_problem_at_its_line(name):
    result = check_file(BROKEN / f"{name}.yaml", f"broken/{name}.yaml")
    assert result.problems == EXPECTED[name]
    assert result.module is None and not result.ok


def test_every_broken_fixture_is_covered_by_an_expectation():
    assert sorted(p.stem for p in BROKEN.glob("*.yaml")) == sorted(EXPECTED)


def test_media_found_in_the_assets_directory_passes(tmp_path):
    (tmp_path / "media" / "another_name").mkdir(parents=True)
    (tmp_path / "media" / "another_name" / "missing.svg").write_text("<svg/>")
    problems = _problems("wrong_name", assets_dir=tmp_path)
    assert not any("not found" in p for p in problems)


def test_empty_and_non_mapping_files_are_refused():
    assert check_text("", "x.yaml").problems == [
        "x.yaml:1: a module file must be a mapping with id, title, description, language and phases"
    ]
    assert check_text("- just\n- a list\n", "x.yaml").problems[0].startswith("x.yaml:1: ")


def test_yaml_error_line_comes_from_the_problem_mark():
    text = "id: x\ntitle: X\ndescription: d\nlanguage: en\nphases:\n  - id: a\n   title: bad indent\n"
    [problem] = check_text(text, "x.yaml").problems
    assert problem.startswith("x.yaml:7: invalid YAML: ")


def test_block_scalar_lines_are_counted_inside_the_text():
    text = (
        "id: x\ntitle: X\ndescription: d\nlanguage: en\n"
        "instructions: |\n  line one\n\n  uses {{missing}} here\n"
        "phases:\n  - id: a\n    title: A\n    sections:\n      - id: s\n        title: S\n"
        "        topics:\n          - {id: t, title: T}\n"
    )
    assert check_text(text, "x.yaml").problems == [
        "x.yaml:8: unresolved variable '{{missing}}' (declare it under variables: with a default)"
    ]


# --- the library the app serves from ------------------------------------------------------


def _library_with_broken(tmp_path: Path) -> Library:
    shutil.copy(GOOD / "mini.yaml", tmp_path / "mini.yaml")
    shutil.copy(BROKEN / "duplicate_topic.yaml", tmp_path / "duplicate_topic.yaml")
    return load_library(tmp_path)


def test_library_serves_sound_modules_and_refuses_broken_ones_with_the_check_message(tmp_path):
    library = _library_with_broken(tmp_path)
    assert list(library.modules) == ["mini"]
    [(file, messages)] = library.problems.items()
    assert file.endswith("duplicate_topic.yaml")
    assert messages == check_file(tmp_path / "duplicate_topic.yaml", file).problems
    with pytest.raises(ModuleNotServable) as refused:
        library.get("duplicate_topic")
    assert str(refused.value) == "\n".join(messages)
    assert "duplicate topic id 'breathing'" in str(refused.value)


def test_unknown_module_names_what_is_available(tmp_path):
    library = _library_with_broken(tmp_path)
    with pytest.raises(ModuleNotServable, match=r"unknown module 'nope' \(available: mini\)"):
        library.get("nope")


def test_default_directory_comes_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("TUTOR_MODULES_DIR", raising=False)
    assert modules_dir() == REPO_ROOT / "modules"
    shutil.copy(GOOD / "quick.yaml", tmp_path / "quick.yaml")
    monkeypatch.setenv("TUTOR_MODULES_DIR", str(tmp_path))
    assert modules_dir() == tmp_path
    assert list(load_library().modules) == ["quick"]


def test_same_module_in_yaml_and_yml_is_reported(tmp_path):
    shutil.copy(GOOD / "quick.yaml", tmp_path / "quick.yaml")
    shutil.copy(GOOD / "quick.yaml", tmp_path / "quick.yml")
    library = load_library(tmp_path)
    [messages] = library.problems.values()
    assert "is also defined in" in messages[0]


# --- the published JSON Schema -------------------------------------------------------------


def test_committed_schema_equals_the_generated_one():
    committed = (REPO_ROOT / "modules" / "module.schema.json").read_text(encoding="utf-8")
    assert committed == schema_json(), "run `tutor modules schema` to regenerate"


@pytest.mark.parametrize("path", [GOOD / "mini.yaml", GOOD / "quick.yaml", SAMPLE], ids=lambda p: p.name)
def test_sound_modules_validate_against_the_schema(path):
    schema = json.loads(schema_json())
    jsonschema.validate(yaml.safe_load(path.read_text(encoding="utf-8")), schema)


def test_schema_rejects_what_the_models_reject():
    schema = json.loads(schema_json())
    data = yaml.safe_load((BROKEN / "schema_errors.yaml").read_text(encoding="utf-8"))
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(data))
    assert errors
