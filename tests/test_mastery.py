"""Seen and mastered, both the server's (tutor.progress, tutor.teach.check_plan.plan_check): on the
sample module, where 24 of 25 topics have checks."""

from __future__ import annotations

import pytest

from tutor.content.modules import REPO_ROOT, load_library
from tutor.progress import (
    ProgressState,
    done_count,
    is_complete,
    mastered_ids,
    milestones_reached,
    module_state,
    percentage,
    reconcile,
    shown_topics,
)
from tutor.teach.intent import classify
from tutor.teach.check_plan import plan_check
from tutor.teach.teaching import CheckHistory, mastered_from

SAMPLE = load_library(REPO_ROOT / "modules").get("understanding_anxiety")
CHECKED = [t.id for t in SAMPLE.topics if t.checks]
UNCHECKED = [t.id for t in SAMPLE.topics if not t.checks]


def test_the_sample_has_one_topic_without_checks():
    assert UNCHECKED == ["box_breathing"] and len(CHECKED) == 24


def test_seeing_every_topic_without_answering_a_check_stops_near_half_way():
    state = reconcile(SAMPLE, ProgressState(), SAMPLE.topic_ids).state
    assert percentage(SAMPLE, state) == 52.0  # 24 topics half done, box breathing done
    assert not is_complete(SAMPLE, state) and done_count(SAMPLE, state) == 1
    assert milestones_reached(SAMPLE, state) == ("25%", "50%")
    assert module_state(SAMPLE, state).current_section == "What anxiety is"  # the first topic not done


def test_complete_means_every_checked_topic_mastered_and_the_rest_seen():
    state = reconcile(SAMPLE, ProgressState(), (), CHECKED).state
    assert set(state.covered) == set(CHECKED)  # a mastered topic is seen too
    assert percentage(SAMPLE, state) == 96.0 and not is_complete(SAMPLE, state)
    done = reconcile(SAMPLE, state, UNCHECKED)
    assert is_complete(SAMPLE, done.state) and percentage(SAMPLE, done.state) == 100.0
    assert done.milestone == "100%"
    assert mastered_ids(SAMPLE, done.state) == CHECKED


def test_mastery_comes_only_from_judged_scores_at_the_threshold():
    check = SAMPLE.find_check("fear_or_anxiety")[1]
    assert mastered_from(SAMPLE, [("fear_or_anxiety", check.threshold - 1)]) == ()
    assert mastered_from(SAMPLE, [("fear_or_anxiety", None)]) == ()  # the judge failed: unscored
    assert mastered_from(SAMPLE, [("fear_or_anxiety", 3), ("fear_or_anxiety", check.threshold)]) == ("anxiety_vs_fear",)
    assert mastered_from(SAMPLE, [("fear_or_anxiety", 9), ("fear_or_anxiety", 2)]) == ("anxiety_vs_fear",)  # the best
    assert mastered_from(SAMPLE, [("removed_check", 10)]) == ()


def test_a_model_claiming_every_topic_in_a_reply_listing_them_sees_two():
    titles = "\n".join(t.title for t in SAMPLE.topics)
    shown = shown_topics(SAMPLE, ProgressState(), SAMPLE.topic_ids, titles)
    assert len(shown.topics) == 2
    update = reconcile(SAMPLE, ProgressState(), shown.topics)
    assert percentage(SAMPLE, update.state) == 4.0 and update.state.mastered == ()


def test_mastered_never_decreases_and_unknown_ids_are_ignored():
    state = reconcile(SAMPLE, ProgressState(), (), ["anxiety_vs_fear", "made_up"]).state
    assert state.mastered == ("anxiety_vs_fear",)
    assert reconcile(SAMPLE, state, ["fight_or_flight"]).state.mastered == ("anxiety_vs_fear",)


# --- what counts as an answer, and which check comes next ----------------------------------------


@pytest.mark.parametrize("text, check_open, intent", [
    ("Anxiety is getting ready for what might go wrong", True, "answer"),
    ("Anxiety is getting ready for what might go wrong", False, "other"),
    ("I don't know", True, "stuck"),  # a hint, the check again (tests/test_stuck_turns.py)
    ("I don't know, maybe the body gets ready for danger", True, "answer"),
    ("Why does my heart race?", True, "question"),
    ("Continue", True, "navigate"),
    ("Tell me more about this please", True, "navigate"),
    ("Next: The physical level", True, "navigate"),
    ("Skip this check", True, "skip"),
    ("Try again", True, "retry"),
    ("Show me a summary", True, "summary"),
    ("Okay so anxiety is the body's alarm getting us ready for danger that might come", True, "answer"),
])
def test_free_text_right_after_a_check_is_the_answer_unless_plainly_something_else(text, check_open, intent):
    assert classify(text, check_open=check_open) == intent


def _plan(state, history=CheckHistory(), intent="navigate", answered=None, goto=None, detected=()):
    ask = plan_check(SAMPLE, state, history, intent, answered, goto, detected)
    return None if ask is None else (ask.check_id, ask.again, ask.review)


def test_after_a_topic_is_taught_its_check_comes_next_once():
    state = ProgressState(("anxiety_defined",))
    assert _plan(state) == ("anxiety_in_a_nutshell", False, False)
    asked = CheckHistory(asked={"anxiety_in_a_nutshell": 2}, last_asked="anxiety_in_a_nutshell")
    assert _plan(state, asked) is None  # moving on past it: not asked again now
    assert _plan(state, asked, intent="retry") == ("anxiety_in_a_nutshell", True, False)
    assert _plan(state, asked, intent="question") == ("anxiety_in_a_nutshell", True, False)  # still open
    assert _plan(state, intent="question") is None
    assert _plan(state, intent="navigate", detected={"avoidance"}) is None  # "Tell me about avoidance"
    assert _plan(state, intent="form", goto="mental_level") is None


def test_an_answer_below_the_threshold_keeps_the_check_and_a_mastered_one_moves_on():
    check = SAMPLE.find_check("anxiety_in_a_nutshell")[1]
    state = ProgressState(("anxiety_defined",))
    low = CheckHistory({"anxiety_in_a_nutshell": 2}, "anxiety_in_a_nutshell", (("anxiety_in_a_nutshell", 4),))
    assert _plan(state, low, intent="answer", answered=check) == ("anxiety_in_a_nutshell", True, False)
    high = CheckHistory({"anxiety_in_a_nutshell": 2}, "anxiety_in_a_nutshell", (("anxiety_in_a_nutshell", 8),))
    assert _plan(state, high, intent="answer", answered=check) is None


def test_once_everything_is_seen_the_checks_not_mastered_come_back_oldest_first():
    state = reconcile(SAMPLE, ProgressState(), SAMPLE.topic_ids).state
    assert _plan(state) == ("getting_help", False, False)  # the latest topic's check, never asked
    all_asked = {c.id: i for i, (_, c) in enumerate((t, c) for t in SAMPLE.topics for c in t.checks)}
    assert _plan(state, CheckHistory(asked=all_asked)) == ("anxiety_in_a_nutshell", True, True)
    skipped = CheckHistory(asked=all_asked, last_asked="anxiety_in_a_nutshell")
    assert _plan(state, skipped, intent="skip") == ("fear_or_anxiety", True, True)
