"""`tutor safety check` and `tutor safety eval` as an author runs them."""

from __future__ import annotations

import json

from tutor.cli import main

from .conftest import DEFAULT_FILE


def test_eval_prints_the_own_development_and_held_out_sets_per_label_language_and_kind(capsys):
    status = main(["safety", "eval"])
    out = capsys.readouterr().out
    assert [line for line in out.splitlines() if line.startswith("== ")] == [
        "== messages.yaml (both)", "== dev.yaml (both)", "== dev2.yaml (both)", "== dev3.yaml (both)",
        "== dev4.yaml (both)", "== holdout.yaml (both)", "== holdout2.yaml (both)", "== holdout3.yaml (both)",
        "== plans.yaml (both)", "== exposure.yaml (both)"]
    for label in ("self_harm", "harm_to_others", "abuse", "medical_emergency", "concern_for_other", "overall"):
        rows = [line for line in out.splitlines() if line.startswith(label)]
        assert len(rows) == 10 and all("%" in row for row in rows), rows
    for row in ("  en ", "  vi ", "  vi-plain ", "  plan ", "  farewell ", "  idiom ", "  goodbye "):
        assert row in out, row
    assert "said imminent" in out and "CPU per message" in out and "p99" in out
    assert status == (1 if "BELOW GOAL" in out else 0)  # the exit status tells whether a set is below its goals


def test_eval_json_has_the_numbers(capsys):
    assert main(["safety", "eval", "--set", "evals/safety/messages.yaml", "--layers", "phrases", "--json"]) == 0
    [report] = json.loads(capsys.readouterr().out)
    assert report["overall"]["recall"] >= 0.95 and report["overall"]["false_positive_rate"] <= 0.03
    assert set(report["labels"]) >= {"self_harm", "harm_to_others", "abuse", "medical_emergency"}
    assert report["timing_ms"]["mean"] > 0 and report["timing_ms"]["p99"] >= report["timing_ms"]["mean"] * 0.5
    assert report["failures"] == []


def test_eval_exits_1_below_the_goals(tmp_path, capsys):
    labelled = tmp_path / "set.yaml"
    labelled.write_text(
        "messages:\n"
        "  - {text: 'I feel a bit low today', language: en, labels: [self_harm]}\n"
        "  - {text: 'I want to kill myself', language: en, labels: [self_harm]}\n"
        "  - {text: 'Nice weather', language: en, labels: []}\n", encoding="utf-8")
    assert main(["safety", "eval", "--set", str(labelled), "--layers", "phrases", "--misses"]) == 1
    out = capsys.readouterr().out
    assert "BELOW GOAL: overall recall 50.0% < 90%" in out
    assert "missed  line 2: ['self_harm'] [] 'I feel a bit low today'" in out


def test_an_abbreviated_option_is_an_error_not_another_option(capsys):
    import pytest

    with pytest.raises(SystemExit) as stopped:
        main(["safety", "eval", "--lay", "phrases"])
    assert stopped.value.code == 2 and "unrecognized arguments: --lay" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["teach", "eval", "--module", "understanding_anxiety"])
    assert "--module" in capsys.readouterr().err


def test_eval_refuses_labels_the_safety_file_does_not_define(tmp_path, capsys):
    labelled = tmp_path / "set.yaml"
    labelled.write_text("messages:\n  - {text: 'x', language: en, labels: [sadness]}\n", encoding="utf-8")
    assert main(["safety", "eval", "--set", str(labelled)]) == 2
    assert f"{labelled}:2: unknown label(s) ['sadness']" in capsys.readouterr().err


def test_check_passes_the_default_and_fails_a_broken_file_with_file_and_line(tmp_path, capsys):
    assert main(["safety", "check"]) == 0
    assert main(["safety", "check", str(DEFAULT_FILE)]) == 0
    assert "ok (5 labels" in capsys.readouterr().err
    broken = tmp_path / "broken.yaml"
    broken.write_text(DEFAULT_FILE.read_text(encoding="utf-8").replace("  self_harm:\n    title:", "  self_harm:\n    titel:", 1),
                      encoding="utf-8")
    assert main(["safety", "check", str(broken)]) == 1
    out = capsys.readouterr().out
    assert f"{broken}:" in out and "unknown key 'titel'" in out and "missing required key 'title'" in out


def test_eval_reads_a_public_set_rated_by_risk_level(tmp_path, capsys):
    """A JSON list rated 0-8 (C-SSRS style) is measured as it is published: from level 3 a
    crisis, up to 1 ordinary, level 2 and empty entries left out."""
    rated = tmp_path / "knowledge_base.json"
    rated.write_text(json.dumps([
        {"user_query": "I want to kill myself tonight", "id": 1, "Risk_level": 7},
        {"user_query": "I am going to end my life", "id": 2, "Risk_level": 5},
        {"user_query": "What time does the library open tomorrow?", "id": 3, "Risk_level": 0},
        {"user_query": "Sometimes I feel a bit flat", "id": 4, "Risk_level": 2},
        {"user_query": "", "id": 5, "Risk_level": 0},
        {"user_query": 17, "id": 6, "Risk_level": 0},
    ]), encoding="utf-8")
    main(["safety", "eval", "--set", str(rated), "--layers", "phrases", "--json"])
    [report] = json.loads(capsys.readouterr().out)
    assert report["overall"]["crisis"] == 2 and report["overall"]["ordinary"] == 1
    assert report["overall"]["recall"] == 1.0 and report["overall"]["false_positive_rate"] == 0.0


def test_eval_refuses_a_rated_set_without_levels(tmp_path, capsys):
    rated = tmp_path / "rated.json"
    rated.write_text(json.dumps([{"user_query": "hello"}]), encoding="utf-8")
    assert main(["safety", "eval", "--set", str(rated), "--layers", "phrases"]) == 2
    assert "Risk_level" in capsys.readouterr().err
