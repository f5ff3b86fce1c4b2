"""Server-authoritative progress: detection, reconciliation, milestones, module state.
(The mini module has no checks: a topic seen is a topic done. Mastery: tests/test_mastery.py.)"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tutor.content.modules import check_text, load_library
from tutor.contract import ModuleState, Progress
from tutor.progress import (
    ProgressState,
    apply_evidence,
    module_state,
    normalize,
    percentage,
    reconcile,
    server_progress,
    shown_topics,
)
from tutor.topic_mentions import detect_form, detect_text

GOOD = Path(__file__).parent / "fixtures" / "modules" / "good"
LIBRARY = load_library(GOOD)
MINI = LIBRARY.get("mini")
QUICK = LIBRARY.get("quick")  # 3 topics, milestones 25/50/100


def _state(*covered: str, milestones: tuple[str, ...] = ()) -> ProgressState:
    return ProgressState(tuple(covered), milestones)


# --- detection from free text --------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("I feel anxious a lot", {"what_is_anxiety"}),
        ("Tôi bị lo âu", {"what_is_anxiety"}),  # alias with diacritics
        ("toi bi lo au", {"what_is_anxiety"}),  # typed without diacritics
        ("LO ÂU mỗi ngày", {"what_is_anxiety"}),  # upper case
        ("TỰ CHĂM SÓC", {"self_care"}),
        ("my heart racing at night", {"physical_signs"}),  # multi-word phrase
        ("heart, racing!", {"physical_signs"}),  # punctuation between words of a phrase
        ("the fight or flight thing", {"physical_signs"}),  # hyphens are word breaks
        ("step by step please", {"exposure"}),
        ("Tell me about self-care", {"self_care"}),  # by title
        ("what about gradual exposure?", {"exposure"}),
        ("I'm fearless and threatless", set()),  # no substring hits
        ("heart is racing", set()),  # a phrase's words must be adjacent, in order
        ("", set()),
    ],
)
def test_detect_text_matches_whole_words_and_phrases_only(text, expected):
    assert detect_text(MINI, text) == expected


def test_detect_text_ignores_case_and_diacritics_both_ways():
    assert normalize("LO ÂU") == normalize("lo au") == normalize("lo âu") == "lo au"
    assert normalize("Đau") == "dau"  # đ has no NFKD decomposition but is folded
    assert detect_text(MINI, "ANGOÏSSE") == {"what_is_anxiety"}


def test_detect_text_in_scripts_without_spaces_matches_inside_the_sentence():
    text = (GOOD / "quick.yaml").read_text(encoding="utf-8").replace("[first]", "[不安]")
    module = check_text(text, "quick.yaml").module
    assert detect_text(module, "我今天很不安。") == {"alpha"}


def test_navigation_words_never_count_as_evidence():
    assert detect_text(MINI, "Continue") == set()
    assert detect_text(MINI, "next") == set()


@given(st.text(max_size=300))
def test_detect_text_never_fails_and_returns_only_canonical_ids(text):
    assert detect_text(MINI, text) <= set(MINI.topic_ids)


@given(
    st.sampled_from([(t.id, p) for t in MINI.topics for p in (t.title, *t.keywords, *t.aliases)]),
    st.sampled_from(["", "I think ", "So: ", "¿"]),
    st.sampled_from(["", ".", " today", "?!"]),
    st.booleans(),
)
def test_every_authored_phrase_is_detected_in_a_sentence_in_any_case(item, prefix, suffix, upper):
    topic_id, phrase = item
    text = f"{prefix}{phrase}{suffix}"
    assert topic_id in detect_text(MINI, text.upper() if upper else text)


# --- detection from forms ------------------------------------------------------------------


def test_form_answers_cover_the_topics_the_form_declares():
    covered = detect_form(MINI, "levels_check", {"primary_level": "mental"})
    assert covered == {"three_levels", "physical_signs"}


def test_free_text_answers_in_a_form_are_detected_too():
    covered = detect_form(MINI, "levels_check", {"note": "I avoid parties"})
    assert covered == {"three_levels", "physical_signs", "avoidance"}


@pytest.mark.parametrize("answers", [{}, {"primary_level": ""}, {"primary_level": None, "note": ""}, None])
def test_an_empty_submission_covers_nothing(answers):
    assert detect_form(MINI, "levels_check", answers) == set()


def test_an_unknown_form_covers_nothing():
    assert detect_form(MINI, "no_such_form", {"x": "y"}) == set()


# --- reconciliation --------------------------------------------------------------------------


def test_evidence_counts_in_module_order():
    update = reconcile(MINI, _state("what_is_anxiety"), {"breathing", "anxiety_vs_fear"})
    assert update.newly_covered == ("anxiety_vs_fear", "breathing")
    assert update.state.covered == ("what_is_anxiety", "anxiety_vs_fear", "breathing")


def test_non_canonical_ids_are_ignored_and_logged(caplog):
    with caplog.at_level(logging.WARNING, logger="tutor.progress"):
        update = reconcile(MINI, _state(), {"Introduction to Anxiety", "breathing", "BREATHING", "avoidance "})
    assert update.state.covered == ("breathing",)
    assert "Introduction to Anxiety" in caplog.text


def test_a_claim_counts_only_by_canonical_id_and_when_the_reply_shows_the_topic(caplog):
    text = "Breathing out slowly calms the body."
    with caplog.at_level(logging.INFO, logger="tutor.progress"):
        shown = shown_topics(MINI, _state(), ["Introduction to Anxiety", "breathing", "BREATHING", "avoidance"], text)
    assert shown.topics == ("breathing",)
    assert shown.ignored == ("Introduction to Anxiety", "BREATHING", "avoidance")  # avoidance: not in the text
    assert "Introduction to Anxiety" in caplog.text


def test_a_reply_listing_every_topic_shows_at_most_two_new_ones():
    text = ", ".join(t.title for t in MINI.topics)
    shown = shown_topics(MINI, _state("what_is_anxiety"), MINI.topic_ids, text, preferred={"avoidance"})
    assert shown.topics == ("what_is_anxiety", "anxiety_vs_fear", "avoidance")  # the asked-about one first
    assert len(shown.ignored) == len(MINI.topic_ids) - 3


def test_coverage_never_decreases():
    state = _state("breathing", "avoidance")
    update = reconcile(MINI, state, set())
    assert update.state.covered == state.covered and update.newly_covered == ()
    again = reconcile(MINI, update.state, {"breathing", "avoidance"})
    assert again.newly_covered == () and again.state.covered == state.covered


@given(st.lists(st.tuples(st.sets(st.sampled_from(MINI.topic_ids)), st.lists(st.text(max_size=20) | st.sampled_from(MINI.topic_ids))), max_size=12))
def test_reconcile_invariants_over_any_sequence_of_turns(turns):
    state = ProgressState()
    fired: list[str] = []
    for detected, claimed in turns:
        update = reconcile(MINI, state, detected | set(claimed))
        assert set(state.covered) <= set(update.state.covered)  # never decreases
        assert set(update.state.covered) <= set(MINI.topic_ids)  # only canonical ids
        assert len(set(update.state.covered)) == len(update.state.covered)
        if update.milestone:
            fired.append(update.milestone)
        state = update.state
    assert len(fired) == len(set(fired))  # never twice
    # Milestones are recorded in threshold order, and only those actually reached.
    assert list(state.milestones) == sorted(state.milestones, key=lambda m: int(m[:-1]))
    for m in state.milestones:
        assert len(state.covered) * 100 >= int(m[:-1]) * len(MINI.topic_ids)


def test_each_milestone_fires_once_in_order():
    state, fired = ProgressState(), []
    for topic in MINI.topic_ids:
        update = reconcile(MINI, state, {topic})
        fired.append(update.milestone)
        state = update.state
    # 8 topics: 25% at 2, 50% at 4, 75% at 6, 100% at 8.
    assert fired == [None, "25%", None, "50%", None, "75%", None, "100%"]
    assert state.milestones == ("25%", "50%", "75%", "100%")
    assert reconcile(MINI, state, set(MINI.topic_ids)).milestone is None


def test_a_jump_reports_the_highest_threshold_and_records_all_crossed():
    update = reconcile(MINI, _state("what_is_anxiety"), set(MINI.topic_ids[:7]))
    assert update.milestone == "75%"
    assert update.state.milestones == ("25%", "50%", "75%")
    later = reconcile(MINI, update.state, set(MINI.topic_ids))
    assert later.milestone == "100%" and later.state.milestones[-1] == "100%"


def test_only_the_module_thresholds_fire():
    fired = []
    state = ProgressState()
    for topic in QUICK.topic_ids:  # 33.3%, 66.7%, 100%
        update = reconcile(QUICK, state, {topic})
        fired.append(update.milestone)
        state = update.state
    assert fired == ["25%", "50%", "100%"]
    assert state.milestones == ("25%", "50%", "100%")


def test_a_non_canonical_id_never_fires_a_milestone():
    update = reconcile(MINI, _state("what_is_anxiety"), {"Anxiety and fear", "fear"})
    assert update.milestone is None and update.state.milestones == ()


def test_apply_evidence_keeps_milestones_for_the_tutor_to_celebrate():
    state = apply_evidence(MINI, _state("what_is_anxiety"), {"breathing"})
    assert state.covered == ("what_is_anxiety", "breathing") and state.milestones == ()


# --- what the learner sees ---------------------------------------------------------------------


def test_server_progress_is_computed_from_the_state():
    update = reconcile(MINI, _state("what_is_anxiety"), {"anxiety_vs_fear", "made_up"})
    progress = server_progress(MINI, update)
    assert progress == Progress(
        percentage=25.0,
        covered_topics=["what_is_anxiety", "anxiety_vs_fear"],
        newly_covered=["anxiety_vs_fear"],
        remaining_topics=6,
        milestone="25%",
    )


def test_percentage_rounds_to_one_decimal_and_ignores_stale_ids():
    assert percentage(QUICK, _state("alpha")) == 33.3
    assert percentage(QUICK, _state("alpha", "removed_topic")) == 33.3
    progress = server_progress(QUICK, reconcile(QUICK, _state("alpha", "removed_topic")))
    assert progress.covered_topics == ["alpha"] and progress.remaining_topics == 2


def test_module_state_follows_the_first_uncovered_topic():
    assert module_state(MINI, _state()) == ModuleState(
        current_phase="Foundations", current_section="The basics", sections_completed=0, total_sections=3
    )
    basics_done = _state("what_is_anxiety", "anxiety_vs_fear", "three_levels", "avoidance")
    assert module_state(MINI, basics_done) == ModuleState(
        current_phase="Foundations", current_section="The body", sections_completed=1, total_sections=3
    )
    everything = _state(*MINI.topic_ids)
    assert module_state(MINI, everything) == ModuleState(
        current_phase="Practice", current_section="Coping", sections_completed=3, total_sections=3
    )


def test_state_round_trips_through_storage():
    state = _state("breathing", "avoidance", milestones=("25%",))
    assert state.to_dict() == {"covered": ["breathing", "avoidance"], "milestones": ["25%"]}
    assert ProgressState.from_dict(state.to_dict()) == state
    assert ProgressState.from_dict(None) == ProgressState()
    assert ProgressState.from_dict({"covered": ["a", "a", "b"]}) == _state("a", "b")


def test_module_state_is_where_the_lesson_is_when_it_is_told():
    # The learner asked about coping before finishing the basics: the lesson is there now.
    basics_started = _state("what_is_anxiety")
    coping = next(t.id for s in MINI.sections if s.title == "Coping" for t in s.topics)
    assert module_state(MINI, basics_started, at=coping) == ModuleState(
        current_phase="Practice", current_section="Coping", sections_completed=0, total_sections=3
    )
    assert module_state(MINI, basics_started, at="not_a_topic").current_section == "The basics"
