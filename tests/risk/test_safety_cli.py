"""`tutor safety check` and `tutor safety eval` as an author runs them."""

from __future__ import annotations

import json

from tutor.cli import main

from .conftest import DEFAULT_FILE


def test_eval_prints_recall_and_false_positives_per_label_and_overall_with_timing(capsys):
    assert main(["safety", "eval", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    for label in ("self_harm", "harm_to_others", "abuse", "medical_emergency", "concern_for_other", "overall"):
        row = next(line for line in out.splitlines() if line.startswith(label))
        assert "%" in row, row
    assert "recall" in out and "false pos." in out
    assert "mean" in out and "p99" in out and " ms" in out
    assert "BELOW GOAL" not in out


def test_eval_json_has_the_numbers(capsys):
    assert main(["safety", "eval", "--rounds", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
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
    assert main(["safety", "eval", "--set", str(labelled), "--rounds", "1"]) == 1
    out = capsys.readouterr().out
    assert "BELOW GOAL: self_harm: recall 50.0% < 95%" in out
    assert "missed  line 2: ['self_harm'] 'I feel a bit low today'" in out


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
