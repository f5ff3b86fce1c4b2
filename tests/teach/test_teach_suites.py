"""The evidence suites keep retrieval and the built-in judge from regressing, and
`tutor teach eval` reports them."""

from __future__ import annotations

import json

import pytest

from tutor.cli import main
from tutor.content.modules import REPO_ROOT
from tutor.teach.suites import (
    GOALS,
    SuiteError,
    evaluate_judge,
    evaluate_retrieval,
    load_answers,
    load_questions,
)

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


# What retrieval (words and meaning, tutor.teach.understanding) measured on each set:
# (top-1 hits, top-3 hits, on-topic questions, refused rightly, questions to refuse).
# The held-out sets were written before any tuning and never tuned on; these floors keep
# what was measured from slipping (SLACK questions of noise), they are not the goals.
RETRIEVAL = {
    "questions.yaml": (72, 82, 92, 0, 0),
    "dev/questions_understanding_anxiety.yaml": (58, 75, 91, 26, 29),
    "dev/questions_giac_ngu_lanh_manh.yaml": (37, 43, 51, 11, 19),
    "holdout/questions_understanding_anxiety.yaml": (67, 93, 110, 25, 30),
    "holdout/questions_giac_ngu_lanh_manh.yaml": (43, 47, 58, 18, 23),
}
SLACK = 2


@pytest.mark.parametrize("name", list(RETRIEVAL))
def test_retrieval_holds_its_measured_numbers(library, name):
    from tutor.cli.teach_cmd import _suite_module

    path = SUITES / name
    module = library.get(_suite_module(path))
    report = evaluate_retrieval(module, load_questions(path, module))
    top1, top3, n, refused, refusals = RETRIEVAL[name]
    total = report.groups["all"]
    assert (total.n, total.refusals) == (n, refusals), "the set changed: re-measure"
    assert total.top1 >= top1 - SLACK and total.top3 >= top3 - SLACK, report.misses
    assert total.refused >= refused - SLACK, report.misses


# The built-in judge on each set: (within band, good answers at mastery, wrong, swapped or
# gaming answers at mastery at most).
# Re-measured with more misconceptions: the sleep module's (before: dev 30, 10, 2; held out
# 35) and the anxiety module's reversed ideas (before: dev 71, 28, 4; held out 78, 30, 5).
JUDGE = {
    "answers.yaml": (78, 26, 0),
    "dev/answers_understanding_anxiety.yaml": (75, 28, 2),
    "dev/answers_giac_ngu_lanh_manh.yaml": (32, 10, 0),
    "holdout/answers_understanding_anxiety.yaml": (79, 30, 5),
    "holdout/answers_giac_ngu_lanh_manh.yaml": (36, 11, 2),
}
# What a message is doing, read by meaning: (right, messages).
INTENTS = {
    "dev/intents_understanding_anxiety.yaml": (88, 99),
    "dev/intents_giac_ngu_lanh_manh.yaml": (52, 62),
    "holdout/intents_understanding_anxiety.yaml": (90, 111),
    "holdout/intents_giac_ngu_lanh_manh.yaml": (54, 73),
}


@pytest.mark.parametrize("name", list(JUDGE))
def test_the_judge_holds_its_measured_numbers(library, name):
    from tutor.cli.teach_cmd import _suite_module

    path = SUITES / name
    module = library.get(_suite_module(path))
    report = evaluate_judge(module, load_answers(path, module))
    within, good, wrongly = JUDGE[name]
    assert report.within >= within - SLACK and report.good_mastered >= good - SLACK, report.misses
    assert len(report.wrongly_mastered) <= wrongly + SLACK, report.wrongly_mastered


@pytest.mark.parametrize("name", list(INTENTS))
def test_intents_hold_their_measured_numbers(library, name):
    from tutor.cli.teach_cmd import _screen, _suite_module
    from tutor.teach.suites import evaluate_intents, load_intents

    path = SUITES / name
    module = library.get(_suite_module(path))
    report = evaluate_intents(module, load_intents(path, module), _screen(library))
    right, n = INTENTS[name]
    assert report.n == n, "the set changed: re-measure"
    assert report.right >= right - SLACK, report.misses


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


def test_the_command_prints_every_set_and_exits_by_the_goals(capsys, tmp_path):
    status = main(["teach", "eval", "--misses", "0"])
    out = capsys.readouterr().out
    for name in ("=== set own ===", "=== set dev ===", "=== set holdout ===", "top-1", "top-3", "refused",
                 "within band", "good answers at mastery", "intents:"):
        assert name in out
    assert status == (0 if "all goals met" in out else 1)
    assert main(["teach", "eval", "--json", "--set", str(SUITES / "questions.yaml")]) in (0, 1)
    report = json.loads(capsys.readouterr().out)
    assert report["goals"] == GOALS and report["suites"][0]["kind"] == "question"
    assert set(report["suites"][0]["groups"]) >= {"all", "en", "vi", "held_out"}
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
