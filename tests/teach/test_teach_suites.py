"""The evidence suites keep retrieval and the built-in judge from regressing, and
`tutor teach eval` reports them."""

from __future__ import annotations

import json

import pytest

from tutor.cli import main
from tutor.modules import REPO_ROOT
from tutor.teach.suites import GOALS, SuiteError, evaluate_judge, evaluate_retrieval, load_answers, load_questions

SUITES = REPO_ROOT / "evals" / "teach"


@pytest.fixture(scope="module")
def questions(sample):
    return load_questions(SUITES / "questions.yaml", sample)


@pytest.fixture(scope="module")
def answers(sample):
    return load_answers(SUITES / "answers.yaml", sample)


def test_the_suites_are_as_big_as_the_issue_asks(sample, questions, answers):
    assert sum(q.lang == "en" for q in questions) >= 50
    assert sum(q.lang == "vi" for q in questions) >= 8
    assert len(answers) >= 60
    for check in (c for t in sample.topics for c in t.checks):
        kinds = {a.kind for a in answers if a.check == check.id}
        assert {"good", "partial", "wrong"} <= kinds, check.id


def test_retrieval_meets_its_goals(sample, questions):
    report = evaluate_retrieval(sample, questions)
    total = report.groups["all"].rates()
    assert total["top1"] >= GOALS["top1"], report.misses
    assert total["top3"] >= GOALS["top3"], report.misses
    assert report.groups["vi"].rates()["top3"] >= GOALS["top3"]


def test_the_built_in_judge_agrees_with_the_bands(sample, answers):
    report = evaluate_judge(sample, answers)
    assert report.agreement >= GOALS["judge"], report.misses
    assert report.by_kind["gaming"][0] == report.by_kind["gaming"][1], report.misses
    assert report.examples_mastered == report.examples, report.misses


def test_suites_naming_unknown_topics_or_checks_are_refused(sample, tmp_path):
    bad = tmp_path / "q.yaml"
    bad.write_text("module: understanding_anxiety\nquestions:\n  - {q: 'Hi?', topic: not_a_topic}\n")
    with pytest.raises(SuiteError, match="unknown topic 'not_a_topic'"):
        load_questions(bad, sample)
    bad.write_text("module: understanding_anxiety\nanswers:\n  - {check: nope, kind: good, text: x}\n")
    with pytest.raises(SuiteError, match="unknown check 'nope'"):
        load_answers(bad, sample)
    bad.write_text("module: other\nanswers:\n  - {check: nope, kind: good, text: x}\n")
    with pytest.raises(SuiteError, match="not 'understanding_anxiety'"):
        load_answers(bad, sample)


def test_the_command_prints_the_numbers_and_exits_by_the_goals(capsys, tmp_path):
    assert main(["teach", "eval"]) == 0
    out = capsys.readouterr().out
    assert "top-1" in out and "top-3" in out and "within band" in out and "all goals met" in out
    assert main(["teach", "eval", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True and report["goals"] == GOALS
    assert set(report["retrieval"]["groups"]) >= {"all", "en", "vi", "held_out"}
    assert report["judge"]["agreement"] >= GOALS["judge"]
    # a suite the goals cannot be met on: exit 1
    hard = tmp_path / "hard.yaml"
    hard.write_text("module: understanding_anxiety\nquestions:\n"
                    "  - {q: 'What is the capital of France?', topic: grounding}\n")
    assert main(["teach", "eval", "--questions", str(hard)]) == 1
    assert "BELOW GOALS" in capsys.readouterr().out
    assert main(["teach", "eval", "--questions", str(tmp_path / "missing.yaml")]) == 2


def test_every_suite_question_counts_as_on_topic(sample, questions):
    from tutor.teach import Index

    index = Index.build(sample)
    assert [q.text for q in questions if not index.on_topic(q.text)] == []
