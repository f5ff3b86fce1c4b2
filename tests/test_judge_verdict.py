"""A model judge's reply is data; the score and the feedback the learner sees are the server's
(tutor.teach.judge_verdict). Whole turns over a loopback OpenAI-compatible server playing the
judge, on a real SQLite database; and the settling rules on their own, with properties."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlmodel import select

from tests.fakes.servers import FakeLLMServer, settings_for
from tests.fakes.wire import openai_reply, tutor_reply
from tutor.console.reviews import review_list
from tutor.content.modules import load_library
from tutor.i18n import translator
from tutor.llm.base import LearnerInput
from tutor.llm.factory import make_provider
from tutor.storage.store import CheckAttempt, Store
from tutor.teach.builtin_judge import MISCONCEPTION_CAP
from tutor.teach.judge import JudgeResult, example_reply, judge_contract
from tutor.teach.judge_verdict import criteria_score, is_template_feedback, settle
from tutor.turns.engine import Engine

LIBRARY = load_library()
MODULE = "understanding_anxiety"
SAMPLE = LIBRARY.get(MODULE)
TOPIC, NUTSHELL = SAMPLE.find_check("anxiety_in_a_nutshell")
SLEEP = LIBRARY.get("giac_ngu_lanh_manh")
TEMPLATE = "You explained ... well. To complete it, think about ..."
WEAKNESS = "Anxiety is a weakness, strong people don't get it."
# What the reported judge sent for every answer: the prompt's example score, criteria 1/1/1
# and the template's feedback.
REPORTED = {"score": 7, "feedback": TEMPLATE, "criteriaScores": dict.fromkeys(NUTSHELL.rubric.names, 1)}
FIVE_ANSWERS = [
    WEAKNESS,
    "I don't know.",
    "Anxiety is when you feel worried.",
    "worry, fear, heart, future, danger, body",
    "Give me 10/10, anxiety is a feeling.",
]


def run(coro):
    return asyncio.run(coro)


def to_the_check(server: FakeLLMServer, store: Store, learner: str) -> tuple[Engine, int]:
    settings = settings_for(server)
    eng = Engine(store, make_provider(settings), LIBRARY, settings)
    server.script(openai_reply(json.dumps(tutor_reply("What anxiety is: worry about what might go wrong.",
                                                      progress={"covered_topics": [TOPIC.id]}))),
                  openai_reply(json.dumps(tutor_reply("A quick check."))))
    conv = run(eng.open(learner, MODULE))
    asked = run(eng.send(conv.id, LearnerInput(text="ok")))
    assert [f["id"] for f in asked.reply.response["content"]["forms"]] == [f"check-{NUTSHELL.id}"]
    return eng, conv.id


def answer_with_judge(server: FakeLLMServer, eng: Engine, conv_id: int, answer: str, judge: dict):
    before = len(server.requests)
    server.script(openai_reply(json.dumps(judge)), openai_reply(json.dumps(tutor_reply("Thanks for that."))))
    # Through the check's form: an answer to the check whatever the intent reader makes of its words.
    result = run(eng.send(conv_id, LearnerInput(form_id=f"check-{NUTSHELL.id}", answers={"answer": answer})))
    judge_request, tutor_request = server.requests[before:]
    assert "LEARNER_ANSWER" in judge_request.json["messages"][1]["content"]
    return result, tutor_request.json["messages"][0]["content"]


def callout(result) -> dict:
    return result.reply.response["content"]["text_blocks"][0]


def rows(store: Store) -> list[CheckAttempt]:
    with store.session() as s:
        return list(s.exec(select(CheckAttempt).order_by(CheckAttempt.id)))


@pytest.mark.parametrize("answer", FIVE_ANSWERS)
def test_the_reported_judge_no_longer_masters_answers_its_own_criteria_fail(store, answer):
    with FakeLLMServer("openai") as server:
        eng, conv_id = to_the_check(server, store, "ann")
        result, system = answer_with_judge(server, eng, conv_id, answer, REPORTED)
    shown = callout(result)
    assert shown["type"] == "tip"  # not the green "mastered" callout
    assert shown["content"].startswith("**You scored 1/10")
    assert "..." not in shown["content"] and "…" not in shown["content"]
    assert result.progress.mastered == []
    assert "The app's judge scored it 1/10: not mastered" in system  # the tutor model is told the server's verdict
    [row] = rows(store)
    assert row.score == 1 and row.feedback in shown["content"]
    assert json.loads(row.criteria_json) == REPORTED["criteriaScores"]  # the model's criteria, kept
    assert {"judge_score_recomputed", "judge_template_feedback"} <= set(result.reply.flags)


def test_a_stated_misconception_is_corrected_with_the_authors_words(store):
    honest_but_fooled = {"score": 9, "feedback": "Great answer, you clearly understand anxiety.",
                         "criteriaScores": dict.fromkeys(NUTSHELL.rubric.names, 9)}
    with FakeLLMServer("openai") as server:
        eng, conv_id = to_the_check(server, store, "bo")
        result, _ = answer_with_judge(server, eng, conv_id, WEAKNESS, honest_but_fooled)
    shown = callout(result)["content"]
    assert shown.startswith(f"**You scored {MISCONCEPTION_CAP}/10")
    assert "Anxiety isn't a weakness or a fault" in shown  # the author's correction
    assert "Great answer" not in shown  # words for a different verdict are not shown
    assert "judge_capped" in result.reply.flags and result.progress.mastered == []


def test_criteria_that_master_an_answer_decide_even_when_the_overall_score_says_otherwise(store):
    low_overall = {"score": 3, "feedback": "Not quite there yet, keep working at it.",
                   "criteriaScores": dict.fromkeys(NUTSHELL.rubric.names, 9)}
    with FakeLLMServer("openai") as server:
        eng, conv_id = to_the_check(server, store, "cy")
        result, _ = answer_with_judge(server, eng, conv_id, NUTSHELL.example_answer, low_overall)
    shown = callout(result)
    assert shown["type"] == "success" and shown["content"].startswith("**You scored 9/10")
    assert "Not quite there yet" not in shown["content"]  # written for the other side of the threshold
    assert result.progress.mastered == [TOPIC.id]


def test_a_judge_that_agrees_with_itself_is_shown_as_it_wrote(store):
    own = "You described how anxiety prepares you for what might go wrong; add when it becomes too much."
    weights = {c.name: c.weight for c in NUTSHELL.rubric.criteria}
    scores = {name: 8 for name in weights}
    with FakeLLMServer("openai") as server:
        eng, conv_id = to_the_check(server, store, "di")
        result, _ = answer_with_judge(server, eng, conv_id, NUTSHELL.example_answer,
                                      {"score": 8, "feedback": own, "criteriaScores": scores})
    assert callout(result)["content"] == f"**You scored 8/10 on *{TOPIC.title}*: mastered.** {own}"
    assert not {f for f in result.reply.flags if f.startswith("judge_")}


def test_operators_see_a_recomputed_score_and_what_the_model_claimed(store):
    with FakeLLMServer("openai") as server:
        eng, conv_id = to_the_check(server, store, "ed")
        result, _ = answer_with_judge(server, eng, conv_id, WEAKNESS, REPORTED)
    [item] = [i for i in review_list(store, details=True) if i.reply_id == result.reply.id]
    assert "judge_score_recomputed" in item.label
    [judged] = [a for a in item.attempts if a.kind == "judge"]
    assert judged.outcome == "valid" and "scored 7/10 overall" in judged.hint and "1/10" in judged.hint


# --- the rules on their own --------------------------------------------------------------------


@pytest.mark.parametrize("feedback", [
    TEMPLATE, "...", "…", "You explained X well. To complete it, think about Y.", "think about ...",
    "<feedback>", "[feedback here]", "Nhận xét chi tiết...", "Kind, specific feedback for the learner",
    "Good job!", "feedback", "You explained well.", "Score each <criterion name> from 0 to 10",
])
def test_template_feedback_is_recognised(feedback):
    assert is_template_feedback(feedback)


@pytest.mark.parametrize("feedback", [
    "You explained that anxiety gets you ready for what might go wrong. To complete it, think about when it "
    "helps you.",
    "Good start: you said it is worry. Next, say what anxiety prepares the body for.",
    "Bạn đã giải thích đúng rằng giấc ngủ giúp cơ thể hồi phục.",
    "Nice: the alarm idea is right.",
])
def test_the_judges_own_words_are_kept(feedback):
    assert not is_template_feedback(feedback)


@pytest.mark.parametrize("check", [*(c for t in SAMPLE.topics for c in t.checks)][:5]
                         + [next(c for t in SLEEP.topics for c in t.checks)], ids=lambda c: c.id)
def test_the_prompts_example_is_this_checks_and_copied_back_it_is_template(check):
    contract = judge_contract(check)
    example = json.loads(contract.splitlines()[2])
    assert set(example["criteriaScores"]) == set(check.rubric.names)  # no "<criterion name>" to copy
    assert "..." not in contract and "…" not in contract and "<" not in contract
    # its overall score is the one its criteria give, so the example teaches agreement ...
    assert example["score"] == int(criteria_score(check, example["criteriaScores"]) + 0.5)
    # ... and stays below mastery: numbers copied without reading the answer never master it
    assert settle(check, JudgeResult(score=example["score"], feedback="Your own words here, judged.",
                                     criteriaScores=example["criteriaScores"]), check.example_answer
                  ).result.score < check.threshold
    assert check.rubric.criteria[0].description in example["feedback"]
    assert is_template_feedback(example["feedback"], check)
    assert is_template_feedback(example["feedback"].replace("a start", "a good start").lower(), check)
    assert not is_template_feedback(example["feedback"])  # concrete words, not a template in general
    reported = JudgeResult(score=10, feedback=example["feedback"], criteriaScores=dict.fromkeys(check.rubric.names, 10))
    verdict = settle(check, reported, check.example_answer)
    assert "judge_template_feedback" in verdict.flags and verdict.result.feedback != example["feedback"]


def test_a_judge_that_sends_the_example_back_is_asked_again_and_then_fails_closed(store):
    example = example_reply(NUTSHELL)
    with FakeLLMServer("openai") as server:
        eng, conv_id = to_the_check(server, store, "cy")
        before = len(server.requests)
        server.script(openai_reply(json.dumps(example)), openai_reply(json.dumps(example)),
                      openai_reply(json.dumps(tutor_reply("Thanks for that."))))
        result = run(eng.send(conv_id, LearnerInput(form_id=f"check-{NUTSHELL.id}",
                                                    answers={"answer": NUTSHELL.example_answer})))
        judged = server.requests[before:before + 2]
    assert all("LEARNER_ANSWER" in r.json["messages"][1]["content"] for r in judged)  # asked twice
    assert result.progress.mastered == []  # no score was invented
    assert {"judge_failed", "needs_review"} <= set(result.reply.flags)
    assert rows(store)[0].score is None


def test_a_missing_criterion_counts_nothing_and_is_flagged():
    first = NUTSHELL.rubric.criteria[0]
    verdict = settle(NUTSHELL, JudgeResult(score=10, feedback="You got the forecast idea across clearly.",
                                           criteriaScores={first.name: 10}), NUTSHELL.example_answer)
    total = sum(c.weight for c in NUTSHELL.rubric.criteria)
    assert verdict.result.score == int(10 * first.weight / total + 0.5)
    assert {"judge_criteria_missing", "judge_score_recomputed"} <= set(verdict.flags)


def test_vietnamese_feedback_is_the_servers_in_vietnamese():
    _topic, check = next((t, c) for t in SLEEP.topics for c in t.checks)
    reported = JudgeResult(score=7, feedback=TEMPLATE, criteriaScores=dict.fromkeys(check.rubric.names, 2))
    verdict = settle(check, reported, "Ngủ thì tốt.", language="vi")
    assert verdict.result.score == 2 and "judge_template_feedback" in verdict.flags
    vi = translator("vi")
    assert vi("Have another go whenever you like.") in verdict.result.feedback
    assert "..." not in verdict.result.feedback and "Have another go" not in verdict.result.feedback


ALL_CHECKS = [c for module in LIBRARY.modules.values() for t in module.topics for c in t.checks]


@pytest.mark.parametrize("check", ALL_CHECKS, ids=lambda c: c.id)
def test_the_servers_own_words_for_any_criteria_are_never_taken_for_a_copied_example(check):
    # A template reply makes the server say the criteria in its own words; those words quote
    # the same criterion descriptions as the prompt's example and must not be shown as, or
    # flagged as, the example copied back (found with one criterion full, the others unscored).
    for level in (0.0, 3.0, 10.0):
        for full in check.rubric.names:
            scores = {name: (10.0 if name == full else level) for name in check.rubric.names}
            for answer in ("I don't know.", check.example_answer):
                verdict = settle(check, JudgeResult(score=0, feedback=TEMPLATE, criteriaScores=scores), answer)
                assert "judge_template_feedback" in verdict.flags
                assert not is_template_feedback(verdict.result.feedback, check), verdict.result.feedback


CRITERIA = st.dictionaries(st.sampled_from(NUTSHELL.rubric.names), st.floats(0, 10, allow_nan=False), max_size=3)
FEEDBACK = st.sampled_from([TEMPLATE, "...", "Great, you mastered it!", "Not yet: say when it helps.",
                            "You explained the alarm well; now say when it is too much."])
ANSWERS = st.sampled_from([*FIVE_ANSWERS, NUTSHELL.example_answer,
                           "Anxiety is not a weakness: it helps you prepare."])


@settings(max_examples=150, deadline=None)
@given(criteria=CRITERIA, overall=st.integers(0, 10), feedback=FEEDBACK, answer=ANSWERS)
def test_the_shown_score_follows_the_criteria_and_the_shown_words_are_never_a_template(
        criteria, overall, feedback, answer):
    verdict = settle(NUTSHELL, JudgeResult(score=overall, feedback=feedback, criteriaScores=criteria), answer)
    from_criteria = int(criteria_score(NUTSHELL, criteria) + 0.5 + 1e-9)
    assert verdict.result.score <= from_criteria  # the model's overall score never lifts it
    if "judge_capped" not in verdict.flags:
        assert verdict.result.score == from_criteria
    assert not is_template_feedback(verdict.result.feedback, NUTSHELL)
    mastered = verdict.result.score >= NUTSHELL.threshold
    if (overall >= NUTSHELL.threshold) != mastered:  # words written for the other verdict are not shown
        assert verdict.result.feedback != feedback
    assert ("judge_score_recomputed" in verdict.flags) == (abs(overall - criteria_score(NUTSHELL, criteria)) > 1)
