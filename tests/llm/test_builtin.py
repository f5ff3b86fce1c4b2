"""The built-in tutor walks a module offline and its replies pass the contract like any model's."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from tutor.content.modules import Module, load_library
from tutor.contract import TutorResponse, parse
from tutor.llm.base import (
    ChatMessage,
    CheckData,
    CompletionRequest,
    JudgedData,
    LearnerInput,
    PassageData,
    Provider,
    TeachingContext,
    TurnContext,
)
from tutor.llm.builtin import BuiltinTutor, markdown_blocks
from tutor.progress import (
    ProgressState,
    apply_evidence,
    is_complete,
    reconcile,
    shown_topics,
)
from tutor.topic_mentions import detect_form, detect_text, form_covers

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = load_library(ROOT / "tests" / "fixtures" / "modules" / "good")
MINI = LIBRARY.get("mini")
QUICK = LIBRARY.get("quick")


@dataclass
class Turn:
    response: TutorResponse
    raw: str
    milestone: str | None
    newly: tuple[str, ...]
    state: ProgressState


class Session:
    """Drives the tutor the way the app does: learner evidence (a module form's `covers`),
    the reply through `parse`, then the server's reconciliation: claimed topics count as
    seen when the reply's own text mentions them (tutor.progress.shown_topics)."""

    def __init__(self, module: Module, tutor: BuiltinTutor | None = None) -> None:
        self.module = module
        self.tutor = tutor or BuiltinTutor()
        self.state = ProgressState()
        self.turns: list[Turn] = []

    def send(self, learner: LearnerInput | None = None, teaching: TeachingContext | None = None) -> Turn:
        seen: set[str] = set()
        if learner is None:
            detected: set[str] = set()
        elif learner.is_form:
            detected = detect_form(self.module, learner.form_id, learner.answers)
            seen = form_covers(self.module, learner.form_id, learner.answers)
        else:
            detected = detect_text(self.module, learner.text)
        ctx = TurnContext(self.module, apply_evidence(self.module, self.state, seen),
                          frozenset(detected), learner, len(self.turns), teaching or TeachingContext())
        request = CompletionRequest([ChatMessage("user", "(ignored)")], 0.7, 2048, context=ctx)
        completion = asyncio.run(self.tutor.complete(request))
        parsed = parse(completion.text)
        assert parsed.outcome == "valid", parsed.errors
        claimed = parsed.response.meta.progress.covered_topics or []
        shown = shown_topics(self.module, ctx.progress, claimed, _texts(parsed.response), detected)
        update = reconcile(self.module, self.state, seen | set(shown.topics))
        self.state = update.state
        turn = Turn(parsed.response, completion.text, update.milestone, update.newly_covered, update.state)
        self.turns.append(turn)
        return turn

    def say(self, text: str, teaching: TeachingContext | None = None) -> Turn:
        return self.send(LearnerInput(text=text), teaching)


def _texts(response: TutorResponse) -> str:
    return "\n".join(b.content for b in response.content.text_blocks)


def _headings(response: TutorResponse) -> list[str]:
    return [b.content for b in response.content.text_blocks if b.type == "heading"]


def _next_suggestion(response: TutorResponse) -> str:
    return response.content.next_step.suggestions[-1]


def test_it_implements_the_provider_protocol():
    tutor: Provider = BuiltinTutor()
    assert tutor.name == "builtin" and tutor.model == "builtin-tutor"
    assert asyncio.run(tutor.aclose()) is None


def test_opening_turn_greets_and_teaches_the_first_topic():
    turn = Session(MINI).send()
    blocks = turn.response.content.text_blocks
    assert blocks[0].type == "heading" and blocks[0].content == "Mini anxiety course"
    assert "A short walk through what anxiety is" in blocks[1].content
    assert "What anxiety is" in _headings(turn.response)
    assert "**alarm system**" in _texts(turn.response)
    assert turn.newly == ("what_is_anxiety",)  # claimed, and the server counted it
    assert turn.response.meta.emotion == "encouraging"


def test_reply_is_json_text_with_unescaped_unicode():
    session = Session(MINI)
    raw = session.send().raw
    assert json.loads(raw)["meta"]["progress"]["covered_topics"] == ["what_is_anxiety"]
    turn = session.say("Tell me about self-care")
    assert "Self-care" in turn.raw and "\\u" not in turn.raw


def test_walks_to_100_percent_in_author_order_celebrating_each_milestone_once():
    session = Session(MINI)
    turn = session.send()
    order = list(turn.newly)
    while len(session.state.covered) < len(MINI.topic_ids):
        turn = session.say(_next_suggestion(turn.response))
        order += turn.newly
        assert len(session.turns) < 20
    assert order == list(MINI.topic_ids)
    celebrated = [t for t in session.turns if t.response.meta.emotion == "celebratory"]
    assert [t.milestone for t in celebrated] == ["25%", "50%", "75%", "100%"]
    assert [t.response.meta.progress.milestone for t in celebrated] == ["25%", "50%", "75%", "100%"]
    for t in celebrated:
        blocks = t.response.content.text_blocks
        kinds = [b.type for b in blocks]
        assert kinds.count("success") <= 1  # never two success callouts in a row
        assert not any("🎉" in h for h in _headings(t.response))  # a blank box without an emoji font
        assert any(b.content.startswith("You've") for b in blocks if b.type == "paragraph")
    assert all(t.milestone is None for t in session.turns if t not in celebrated)
    # At 100% the tutor offers a summary, and gives one when asked.
    assert _next_suggestion(turn.response) == "Show me a summary"
    summary = session.say("Show me a summary").response
    assert summary.meta.response_type == "summary"
    assert "Summary: Mini anxiety course" in _headings(summary)
    assert "**Coping**: Avoidance, Gradual exposure, Self-care" in _texts(summary)
    assert session.say("Continue").milestone is None  # never twice


def test_plain_continue_also_walks_the_module():
    session = Session(QUICK)
    session.send()
    while len(session.state.covered) < 3:
        session.say("Continue")
    assert session.state.covered == ("alpha", "beta", "gamma")
    assert session.state.milestones == ("25%", "50%", "100%")


def test_a_question_about_a_later_topic_is_answered_with_that_topic():
    session = Session(MINI)
    session.send()
    turn = session.say("How does breathing help?")
    assert _headings(turn.response)[0] == "Breathing"
    assert "A long exhale calms the body." in _texts(turn.response)
    # ... then the tutor resumes the author's order where it left off.
    assert _next_suggestion(turn.response) == "Next: Anxiety and fear"
    nxt = session.say("Continue")
    assert nxt.newly == ("anxiety_vs_fear",)


def test_the_topic_named_by_its_title_wins_over_a_keyword_of_another():
    session = Session(MINI)
    session.send()
    # "Anxiety and fear" contains "anxiety", a keyword of the first topic.
    turn = session.say("Next: Anxiety and fear")
    assert _headings(turn.response)[0] == "Fear or anxiety?"


def test_a_statement_mentioning_a_topic_is_acknowledged_and_the_walk_goes_on():
    session = Session(MINI)
    session.send()
    turn = session.say("I avoid crowded places")
    assert "It connects to **Avoidance**." in _texts(turn.response)
    assert turn.newly == ("anxiety_vs_fear",)  # the taught topic: naming one is not seeing it
    assert _headings(turn.response)[0] == "Fear or anxiety?"


def test_questions_and_remarks_off_the_module_are_answered_honestly_and_the_walk_goes_on():
    session = Session(MINI)
    session.send()
    asked = session.say("What is the capital of France?")
    assert "I don't have a prepared answer to that question." in _texts(asked.response)
    assert asked.newly == ("anxiety_vs_fear",)
    remark = session.say("I had a long day")
    assert _texts(remark.response).startswith("Thank you for sharing that.")
    moving_on = session.say("ok")
    assert not _texts(moving_on.response).startswith("Thank you")
    assert remark.milestone is None and remark.response.meta.emotion == "informative"


def test_form_answers_are_acknowledged_without_repeating_them_and_cover_their_topics():
    session = Session(MINI)
    session.send()
    session.say("Continue")
    turn = session.say("Continue")
    [form] = turn.response.content.forms
    assert form.id == "levels_check" and form.is_optional
    turn = session.send(LearnerInput(form_id="levels_check", answers={"primary_level": "mental", "note": ""}))
    text = _texts(turn.response)
    # The answers show in the learner's message and the read-only form; not a third time.
    assert text.startswith("Thank you") and "Mental" not in text
    assert "physical_signs" in session.state.covered
    assert turn.response.meta.emotion == "celebratory"  # 50% reached with the form + next topic
    assert _headings(turn.response)[0] == "Breathing"


def test_topic_extras_are_offered():
    session = Session(MINI)
    session.send()
    turn = session.say("Continue")
    [media] = turn.response.content.media
    assert media.src == "https://example.org/fear.png" and media.alt == "A fear curve"
    first = session.turns[0].response.content.next_step
    assert first.suggestions == ["Is anxiety dangerous?", "Next: Anxiety and fear"]
    assert first.can_skip is True
    assert turn.response.meta.module_state.current_section == "The basics"


def test_navigation_suggestions_never_count_as_evidence_for_untaught_topics():
    session = Session(MINI)
    turn = session.send()
    while len(session.state.covered) < len(MINI.topic_ids):
        nav = _next_suggestion(turn.response)
        untaught = set(MINI.topic_ids) - set(session.state.covered)
        named = [t.id for t in MINI.topics if nav == f"Next: {t.title}"]
        assert detect_text(MINI, nav) & untaught <= set(named)
        turn = session.say(nav)


def test_the_first_turn_of_a_finished_module_is_a_summary():
    session = Session(QUICK)
    session.state = ProgressState(QUICK.topic_ids, ("25%", "50%", "100%"))
    turn = session.send()
    assert "Welcome back! You've covered 3 of 3 topics so far." in _texts(turn.response)
    assert turn.response.meta.response_type == "summary" and turn.milestone is None


def test_without_context_it_still_answers_with_valid_json():
    completion = asyncio.run(BuiltinTutor().complete(CompletionRequest([], 0.0, 100)))
    parsed = parse(completion.text)
    assert parsed.outcome == "valid" and parsed.response.meta.response_type == "error"


def test_walking_the_sample_module_sees_every_topic_but_completing_it_needs_the_checks():
    sample = load_library(ROOT / "modules").get("understanding_anxiety")
    session = Session(sample)
    turn = session.send()
    while len(session.state.covered) < len(sample.topic_ids):
        turn = session.say(_next_suggestion(turn.response))
        assert len(session.turns) <= len(sample.topic_ids)
    assert session.state.milestones == ("25%", "50%")  # 24 of 25 topics have checks: 26 of 50 units
    assert not is_complete(sample, session.state)
    assert sum(t.response.meta.emotion == "celebratory" for t in session.turns) == 2
    summary = session.say("Show me a summary", TeachingContext(intent="summary")).response
    assert "To complete the module, answer the checks on: What anxiety is" in _texts(summary)


# --- authored markdown -> blocks -----------------------------------------------------------------


def test_markdown_blocks_split_authored_content():
    md = (
        "## Title here\n"
        "First paragraph\ncontinues here.\n\n"
        "- one\n- two\n  wrapped\n"
        "1. first\n\n"
        "> quoted\n> more\n\n"
        "!!! tip Breathe out slowly.\n\n"
        "!!! WARNING\n    Indented body\n    two lines\n\n"
        "Last words."
    )
    blocks = [(b.type, b.content, b.level) for b in markdown_blocks(md)]
    assert blocks == [
        ("heading", "Title here", 2),
        ("paragraph", "First paragraph\ncontinues here.", None),
        ("list", "- one\n- two\n  wrapped\n1. first", None),
        ("quote", "quoted\nmore", None),
        ("tip", "Breathe out slowly.", None),
        ("warning", "Indented body\ntwo lines", None),
        ("paragraph", "Last words.", None),
    ]


@pytest.mark.parametrize("md", ["", "\n\n", "!!! tip", ">"])
def test_markdown_blocks_never_emit_empty_blocks(md):
    assert all(b.content.strip() for b in markdown_blocks(md))


# --- teaching: what the server decided this turn -------------------------------------------------

SAMPLE = load_library(ROOT / "modules").get("understanding_anxiety")


def _passage(topic_id: str, score: float = 1.0) -> PassageData:
    topic = SAMPLE.topic(topic_id)
    return PassageData("module", SAMPLE.title, topic_id, topic.title, topic_id, topic.content.split("\n\n")[0], score)


def test_a_question_is_answered_from_the_best_passages_quoted_with_topic_and_source():
    session = Session(SAMPLE)
    session.send()
    teaching = TeachingContext(intent="question", passages=(_passage("physical_level"), _passage("fight_or_flight", 0.9),
                                                            _passage("avoidance", 0.2)))
    turn = session.say("Why does my heart race?", teaching)
    blocks = turn.response.content.text_blocks
    assert [b.type for b in blocks] == ["paragraph", "quote", "paragraph", "quote", "paragraph"]
    assert blocks[1].content == _passage("physical_level").text.strip()
    assert "part of the topic **The physical level**" in blocks[2].content and "Understanding anxiety" in blocks[2].content
    assert turn.newly == ()  # a quoted passage is a glimpse: the topics are taught in their turn
    assert turn.response.content.next_step.suggestions == ["Tell me more about The physical level", "Continue"]
    assert "I don't have a prepared answer" not in _texts(turn.response)


def test_a_question_naming_a_topic_whose_passage_answers_it_is_taught_that_topic():
    session = Session(SAMPLE)
    session.send()
    teaching = TeachingContext(intent="question", passages=(_passage("fight_or_flight"),))
    turn = session.say("What is the fight or flight response?", teaching)
    assert _headings(turn.response)[0] == "The fight-or-flight response"


def test_a_check_turn_says_why_and_teaches_nothing_new():
    session = Session(SAMPLE)
    session.send()
    check = SAMPLE.topic("anxiety_defined").checks[0]
    ask = CheckData(check.id, "anxiety_defined", "What anxiety is", check.question)
    turn = session.say("Continue", TeachingContext(intent="navigate", ask=ask))
    assert "let's check what stayed with you from **What anxiety is**" in _texts(turn.response)
    assert turn.newly == () and turn.response.content.forms is None  # the server adds the check's form
    assert turn.response.content.next_step.suggestions == ["Skip this check"]
    again = session.say("I don't know", TeachingContext(
        intent="answer", ask=replace(ask, again=True),
        judged=JudgedData(check.id, "anxiety_defined", "What anxiety is", check.question, 2, 7, False, "Good start.")))
    assert _texts(again.response).startswith("Have another go below")
    assert "/10" not in _texts(again.response)  # the score is the server's to show


def test_a_mastered_answer_moves_on_to_the_next_topic():
    session = Session(SAMPLE)
    session.send()
    check = SAMPLE.topic("anxiety_defined").checks[0]
    judged = JudgedData(check.id, "anxiety_defined", "What anxiety is", check.question, 9, 7, True, "Well done!")
    turn = session.say(check.example_answer, TeachingContext(intent="answer", judged=judged))
    assert _headings(turn.response)[0] == "Anxiety and fear"
    assert turn.newly == ("anxiety_vs_fear",)


def test_a_form_answer_follows_the_authored_next_topic():
    session = Session(SAMPLE)
    session.send()
    turn = session.send(LearnerInput(form_id="anxiety_levels_check", answers={"primary_level": "mental"}),
                        TeachingContext(intent="form", goto_topic="mental_level"))
    assert "Mental (thoughts and worries)" not in _texts(turn.response)  # shown by the page already
    assert _headings(turn.response)[0] == "The mental level"
    assert turn.newly == ("three_levels_overview", "mental_level")  # the form covers its topic


def test_a_thought_record_comes_back_with_the_learners_own_words_and_numbers():
    session = Session(SAMPLE)
    session.send()
    answers = {"situation": "My manager asked to talk tomorrow", "anxious_thought": "I'm in *trouble* [again]",
               "belief_before": 80, "thinking_trap": "fortune_telling",
               "balanced_thought": "Last time it was about a new project", "belief_after": 40}
    text = _texts(session.send(LearnerInput(form_id="thought_record", answers=answers)).response)
    assert "went from 80 to 40 out of 100" in text
    assert "Fortune telling" in text and "fortune_telling" not in text  # the choice's label
    assert "Last time it was about a new project" in text
    # What the learner typed is quoted as text: their asterisks and brackets are not markup.
    assert r"I'm in \*trouble\* \[again\]" in text
    assert "Thank you. Let's keep going." not in text

    stuck = dict(answers, belief_after=85)
    text = _texts(session.send(LearnerInput(form_id="thought_record", answers=stuck)).response)
    assert "85 out of 100 now (it was 80)" in text and "went from" not in text


def test_a_form_with_nothing_to_reflect_is_thanked():
    session = Session(SAMPLE)
    session.send()
    text = _texts(session.send(LearnerInput(form_id="thought_record", answers={"situation": "a meeting"})).response)
    assert text.startswith("Thank you. Let's keep going.")  # no reflect line names only the situation
