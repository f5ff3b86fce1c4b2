"""Teaching in whole turns: checks asked, answers judged before the reply (the built-in
judge, or a model through the JUDGE contract), mastery stored and shown, passages in the
prompt, quotes verified. Real SQLite with migrations; a loopback OpenAI-compatible server
stands in for the model."""

from __future__ import annotations

import asyncio
import json

import pytest
from sqlmodel import select

from tests.fakes.servers import FakeLLMServer, settings_for
from tests.fakes.wire import openai_reply, tutor_reply
from tutor.content.modules import load_library
from tutor.llm.base import LearnerInput
from tutor.llm.config import LLMSettings
from tutor.llm.factory import make_provider
from tutor.storage.store import AuditEvent, CheckAttempt, Message, Store
from tutor.turns.engine import Engine

MODULE = "understanding_anxiety"
LIBRARY = load_library()
SAMPLE = LIBRARY.get(MODULE)
NUTSHELL = SAMPLE.find_check("anxiety_in_a_nutshell")[1]


def run(coro):
    return asyncio.run(coro)


@pytest.fixture
def engine(store: Store) -> Engine:
    settings = LLMSettings()
    return Engine(store, make_provider(settings), LIBRARY, settings)


def model_engine(store: Store, server: FakeLLMServer, **overrides) -> Engine:
    settings = settings_for(server, **overrides)
    return Engine(store, make_provider(settings), LIBRARY, settings)


def content(result) -> dict:
    return result.reply.response["content"]


def texts(result) -> str:
    return "\n".join(b["content"] for b in content(result)["text_blocks"])


def form_ids(result) -> list[str]:
    return [f["id"] for f in content(result).get("forms") or []]


def attempts(store: Store) -> list[CheckAttempt]:
    with store.session() as s:
        return list(s.exec(select(CheckAttempt).order_by(CheckAttempt.id)))


# --- with the built-in tutor and judge -------------------------------------------------------------


def test_a_check_follows_the_lesson_and_a_good_answer_is_scored_kindly_and_mastered(engine, store):
    conv = run(engine.open("ann", MODULE))
    asked = run(engine.send(conv.id, LearnerInput(text="Continue")))
    assert form_ids(asked) == ["check-anxiety_in_a_nutshell"]
    [form] = content(asked)["forms"]
    assert form["fields"] == [{"id": "answer", "type": "textarea", "label": NUTSHELL.question, "required": True,
                               "placeholder": "Your answer, in your own words"}]
    assert asked.progress.mastered == [] and asked.progress.covered == ["anxiety_defined"]

    judged = run(engine.send(conv.id, LearnerInput(text=NUTSHELL.example_answer)))
    first = content(judged)["text_blocks"][0]
    assert first["type"] == "success" and first["content"].startswith("**You scored 10/10 on *What anxiety is*: mastered.**")
    assert judged.progress.mastered == ["anxiety_defined"]
    assert "anxiety_vs_fear" in judged.progress.covered  # and the lesson moves on
    [row] = attempts(store)
    assert (row.check_id, row.topic_id, row.score, row.source) == ("anxiety_in_a_nutshell", "anxiety_defined", 10, "builtin")
    assert row.message_id == judged.learner.id and row.reply_id == judged.reply.id
    assert set(json.loads(row.criteria_json)) == set(NUTSHELL.rubric.names)
    reopened = run(engine.open("ann", MODULE))
    assert reopened.progress.mastered == ["anxiety_defined"]  # read back from the judged attempts
    assert engine.progress_for("ann", MODULE).mastered == ["anxiety_defined"]


def test_a_weak_answer_keeps_the_check_open_and_a_second_try_can_master_it(engine, store):
    conv = run(engine.open("bo", MODULE))
    run(engine.send(conv.id, LearnerInput(text="Continue")))
    weak = run(engine.send(conv.id, LearnerInput(form_id="check-anxiety_in_a_nutshell",
                                                 answers={"answer": "It is a feeling."})))
    first = content(weak)["text_blocks"][0]
    assert first["type"] == "tip" and first["content"].startswith("**You scored ")
    assert "(7 or more masters it)" in first["content"] and "another go" in first["content"]
    assert form_ids(weak) == ["check-anxiety_in_a_nutshell"]  # the same check, to try again
    assert content(weak)["forms"][0]["title"] == "Try again"
    assert weak.progress.mastered == []
    good = run(engine.send(conv.id, LearnerInput(text=NUTSHELL.example_answer)))  # typed, right after it
    assert good.progress.mastered == ["anxiety_defined"]
    assert [a.score for a in attempts(store)][1] == 10 and attempts(store)[0].score < NUTSHELL.threshold


def test_moving_on_skips_the_check_and_it_comes_back_once_everything_is_seen(engine):
    conv = run(engine.open("cy", MODULE))
    run(engine.send(conv.id, LearnerInput(text="Continue")))
    skipped = run(engine.send(conv.id, LearnerInput(text="Skip this check")))
    assert "check-anxiety_in_a_nutshell" not in form_ids(skipped)
    assert skipped.progress.covered == ["anxiety_defined", "anxiety_vs_fear"]


def test_a_question_is_answered_from_the_material_with_its_topic_and_source(engine):
    conv = run(engine.open("di", MODULE))
    result = run(engine.send(conv.id, LearnerInput(text="Why does my heart race?")))
    blocks = content(result)["text_blocks"]
    assert "I don't have a prepared answer" not in texts(result)
    assert "quote" in [b["type"] for b in blocks]
    assert "part of the topic **The physical level**" in texts(result)
    # One quoted passage is a glimpse, not the topic's lesson: not counted as taught ...
    assert result.progress.covered == ["anxiety_defined"]
    # ... so its check does not come before its lesson: "Continue" asks about the topic taught
    asked = run(engine.send(conv.id, LearnerInput(text="Continue")))
    assert form_ids(asked) == ["check-anxiety_in_a_nutshell"]
    # and the quick reply the quote offers teaches the topic, which then counts
    more = run(engine.send(conv.id, LearnerInput(text="Tell me more about The physical level")))
    assert "The physical level" in [b["content"] for b in content(more)["text_blocks"] if b["type"] == "heading"]
    assert "physical_level" in more.progress.covered


def test_a_question_asked_when_a_check_is_due_is_answered_above_the_check(engine):
    """After a few questions the waiting check comes below the answer. A question that names
    an untaught topic by its keyword ("coffee": Stress and everyday life) would otherwise be
    taught as that topic; a turn that asks a check anew teaches nothing new, so the question
    is answered from the material instead of being dropped."""
    conv = run(engine.open("fay", MODULE))
    for question in ("Why does my heart race?", "Why do I get racing thoughts?"):
        assert not form_ids(run(engine.send(conv.id, LearnerInput(text=question))))
    result = run(engine.send(conv.id, LearnerInput(text="Does coffee make anxiety worse?")))
    assert form_ids(result) == ["check-anxiety_in_a_nutshell"]
    blocks = content(result)["text_blocks"]
    quotes = [b["content"] for b in blocks if b["type"] == "quote"]
    assert any("Caffeine" in q for q in quotes), texts(result)
    assert "part of the topic **Stress and everyday life**" in texts(result)
    assert result.progress.covered == ["anxiety_defined"]  # answered, not taught: its check comes later


def test_tell_me_more_goes_on_about_what_was_just_quoted_without_repeating_it(engine):
    """After a question answered with a passage of a topic not taught yet, a typed "tell me
    more" goes on about that topic (as its quick reply does), not the lesson's current one;
    each "more" brings a passage not shown yet, one starting with a heading line included."""
    conv = run(engine.open("gus", MODULE))
    answered = run(engine.send(conv.id, LearnerInput(text="What can I do at 3am when my mind races?")))
    topic = "**Body, mind and behaviour**"
    assert f"part of the topic {topic}" in texts(answered)
    shown: list[str] = []
    for _ in range(3):
        more = run(engine.send(conv.id, LearnerInput(text="tell me more")))
        assert texts(more).startswith("Here is more on that") and f"part of the topic {topic}" in texts(more)
        [quote] = [b["content"] for b in content(more)["text_blocks"] if b["type"] == "quote"]
        assert quote not in shown
        shown.append(quote)
    assert any(q.startswith("## ") for q in shown)  # a passage whose first line is a heading
    assert more.progress.covered == ["anxiety_defined"]  # quoted, not taught


def test_a_learner_sharing_their_experience_is_heard_before_any_check(engine):
    """Telling the tutor how it is for them, right after a lesson, is met with a reply to
    that (a passage when one fits), not a test; the lesson waits for them, and the check
    comes when they go on."""
    conv = run(engine.open("hal", MODULE))
    for share in ("I've always been a worrier, even as a kid", "my sister gets panic attacks too"):
        heard = run(engine.send(conv.id, LearnerInput(text=share)))
        assert texts(heard).startswith("Thank you for sharing that.")
        assert form_ids(heard) == [] and heard.progress.covered == ["anxiety_defined"]  # no check, no new lesson
        step = content(heard)["next_step"]  # the way on is the lesson's own: ask about it, or continue
        assert "What anxiety is" in step["prompt"] and step["suggestions"][-1] == "Continue"
    going_on = run(engine.send(conv.id, LearnerInput(text="Continue")))
    assert form_ids(going_on) == ["check-anxiety_in_a_nutshell"]


def test_a_passage_shown_a_moment_ago_is_pointed_back_to_not_quoted_again(engine):
    conv = run(engine.open("ida", MODULE))
    first = run(engine.send(conv.id, LearnerInput(text="Why does my heart race?")))
    [quote] = [b["content"] for b in content(first)["text_blocks"] if b["type"] == "quote"][:1]
    again = run(engine.send(conv.id, LearnerInput(text="Why does my heart race?")))
    assert "That is in what we just went through on **The physical level**, above." in texts(again)
    assert quote not in [b["content"] for b in content(again)["text_blocks"]]
    assert content(again)["next_step"]["suggestions"][-1] == "Continue"  # answered: the lesson waits


def test_a_short_follow_up_question_is_read_with_what_the_learner_said_before_it(engine):
    """"Why do I do that?" alone is about nothing in the module; after the learner said what
    they do, it is a question about it, answered from the material. A follow-up to something
    off topic stays off topic."""
    conv = run(engine.open("jo", MODULE))
    run(engine.send(conv.id, LearnerInput(text="I keep checking my phone for messages from my boss, I can't stop")))
    follow = run(engine.send(conv.id, LearnerInput(text="why do I do that")))
    assert "isn't something this module covers" not in texts(follow)
    assert "part of the topic **Reassurance, checking and worry**" in texts(follow)
    # a question of its own that happens to say "it" is not read with what came before
    run(engine.send(conv.id, LearnerInput(text="I keep checking my phone for messages from my boss, I can't stop")))
    own = run(engine.send(conv.id, LearnerInput(text="is it going to rain")))
    assert "isn't something this module covers" in texts(own)
    run(engine.send(conv.id, LearnerInput(text="What's a good recipe for banana bread")))
    aside = run(engine.send(conv.id, LearnerInput(text="how long does that take to bake")))
    assert "isn't something this module covers" in texts(aside)


def test_the_reflection_form_follows_the_answer_to_its_level(engine):
    conv = run(engine.open("ed", MODULE))
    run(engine.send(conv.id, LearnerInput(text="Tell me about Body, mind and behaviour")))
    result = run(engine.send(conv.id, LearnerInput(form_id="anxiety_levels_check", answers={"primary_level": "mental"})))
    headings = [b["content"] for b in content(result)["text_blocks"] if b["type"] == "heading"]
    assert headings[0] == "The mental level"
    assert "physical_level" not in result.progress.covered


def test_listing_every_topic_title_in_one_message_sees_none_of_them(engine):
    conv = run(engine.open("fay", MODULE))
    titles = "I know about " + ", ".join(t.title for t in SAMPLE.topics)
    result = run(engine.send(conv.id, LearnerInput(text=titles)))
    assert result.progress.covered == ["anxiety_defined"]  # what the tutor taught; the titles count for nothing
    assert result.progress.percentage == 2.0 and not result.progress.complete


def test_start_over_resets_mastery_and_keeps_the_judged_history(engine, store):
    conv = run(engine.open("gus", MODULE))
    run(engine.send(conv.id, LearnerInput(text="Continue")))
    run(engine.send(conv.id, LearnerInput(text=NUTSHELL.example_answer)))
    fresh = run(engine.open("gus", MODULE, new=True))
    assert fresh.progress.mastered == [] and fresh.progress.covered == ["anxiety_defined"]
    assert len(attempts(store)) == 1  # the record of what was judged stays


def test_a_safety_reply_leaves_mastery_as_it_was(engine):
    conv = run(engine.open("hal", MODULE))
    run(engine.send(conv.id, LearnerInput(text="Continue")))
    run(engine.send(conv.id, LearnerInput(text=NUTSHELL.example_answer)))
    result = run(engine.send(conv.id, LearnerInput(text="I want to kill myself")))
    assert any(f.startswith("risk:") for f in result.reply.flags)
    assert result.progress.mastered == ["anxiety_defined"]


# --- with a model: the judge contract, passages in the prompt, verified quotes ----------------------

SHOWS_FIRST_TOPIC = tutor_reply("What anxiety is: feeling worried about what might go wrong.",
                                progress={"covered_topics": ["anxiety_defined"]})


def _judge(score: int, **extra_criteria: float) -> dict:
    criteria = {name: float(score) for name in NUTSHELL.rubric.names}
    return {"score": score, "feedback": "You explained it well. To complete it, think about when it helps.",
            "criteriaScores": {**criteria, **extra_criteria}}


def _to_the_check(server: FakeLLMServer, store: Store, learner: str, **overrides):
    eng = model_engine(store, server, **overrides)
    server.script(openai_reply(json.dumps(SHOWS_FIRST_TOPIC)), openai_reply(json.dumps(tutor_reply("A quick check."))))
    conv = run(eng.open(learner, MODULE))
    asked = run(eng.send(conv.id, LearnerInput(text="ok")))
    assert form_ids(asked) == ["check-anxiety_in_a_nutshell"]
    return eng, conv


def test_a_model_judges_the_answer_before_the_reply_and_the_reply_follows_it(store):
    with FakeLLMServer("openai") as server:
        eng, conv = _to_the_check(server, store, "ida", strategy="json_schema")
        before = len(server.requests)
        server.script(openai_reply(json.dumps(_judge(8))), openai_reply(json.dumps(tutor_reply("Lovely, let's go on."))))
        result = run(eng.send(conv.id, LearnerInput(text=NUTSHELL.example_answer)))
        judge_request, tutor_request = server.requests[before:]
    fmt = judge_request.json["response_format"]
    assert fmt["json_schema"]["name"] == "judge"
    assert fmt["json_schema"]["schema"]["properties"]["criteriaScores"]["required"] == list(NUTSHELL.rubric.names)
    assert "LEARNER_ANSWER" in judge_request.json["messages"][1]["content"]
    system = tutor_request.json["messages"][0]["content"]
    assert "The app's judge scored it 8/10: mastered" in system and "Do not repeat the score" in system
    blocks = content(result)["text_blocks"]
    assert blocks[0]["type"] == "success" and blocks[0]["content"].startswith("**You scored 8/10")
    assert blocks[1]["content"] == "Lovely, let's go on."  # the model's reply follows the server's feedback
    assert result.progress.mastered == ["anxiety_defined"]
    [row] = attempts(store)
    assert (row.score, row.source) == (8, "model")
    with store.session() as s:
        kinds = [json.loads(a.detail_json).get("kind") for a in s.exec(select(AuditEvent))]
    assert "judge" in kinds


def test_a_judge_that_fails_twice_leaves_the_answer_unscored_and_flagged(store):
    with FakeLLMServer("openai") as server:
        eng, conv = _to_the_check(server, store, "jo")
        before = len(server.requests)
        server.script(openai_reply("I think it deserves an 8."), openai_reply('{"feedback": "good"}'),
                      openai_reply(json.dumps(tutor_reply("Thanks for that."))))
        result = run(eng.send(conv.id, LearnerInput(text=NUTSHELL.example_answer)))
        judge_1, judge_2, _tutor = server.requests[before:]
    assert judge_1.json["temperature"] == 0.7 and judge_2.json["temperature"] == 0.0
    assert {"judge_failed", "needs_review"} <= set(result.reply.flags)
    first = content(result)["text_blocks"][0]
    assert first["type"] == "info" and "couldn't score it" in first["content"] and "/10" not in first["content"]
    assert result.progress.mastered == []
    [row] = attempts(store)
    assert row.score is None and row.source == "model"
    assert form_ids(result) == ["check-anxiety_in_a_nutshell"]  # it may be tried again


def test_unknown_criterion_names_from_the_judge_are_dropped(store):
    with FakeLLMServer("openai") as server:
        eng, conv = _to_the_check(server, store, "kai")
        server.script(openai_reply(json.dumps(_judge(9, eloquence=10, grammar=2))),
                      openai_reply(json.dumps(tutor_reply("Well done."))))
        result = run(eng.send(conv.id, LearnerInput(text=NUTSHELL.example_answer)))
    [row] = attempts(store)
    assert set(json.loads(row.criteria_json)) == set(NUTSHELL.rubric.names)
    assert result.progress.mastered == ["anxiety_defined"]
    with store.session() as s:
        flags = [json.loads(a.flags_json) for a in s.exec(select(AuditEvent))]
    assert ["unknown_criteria_dropped"] in flags


def test_passages_travel_in_the_prompt_and_only_verbatim_quotes_are_shown(store):
    source = SAMPLE.loaded_sources["how_anxiety_works"]
    section = next(s for s in source.sections if "racing heart" in s.text)
    quote = next(line for line in section.text.splitlines() if "racing heart" in line).strip()
    cited = tutor_reply("Your heart races because the alarm is getting you ready.")
    cited["content"]["citations"] = [
        {"source_id": "how_anxiety_works", "quote": quote, "location": section.title},
        {"source_id": "how_anxiety_works", "quote": "Anxiety is caused by a lack of willpower and weak character."},
    ]
    with FakeLLMServer("openai") as server:
        eng = model_engine(store, server)
        server.script(openai_reply(json.dumps(tutor_reply("Welcome."))), openai_reply(json.dumps(cited)))
        conv = run(eng.open("lu", MODULE))
        result = run(eng.send(conv.id, LearnerInput(text="Why does my heart race?")))
        system = server.requests[-1].json["messages"][0]["content"]
    assert '[Source: "How the body\'s alarm system works" (id: how_anxiety_works), Section: "' in system
    # after the stable part (rules, module, instructions, contract) that a prompt cache keeps
    assert system.index("## Response contract") < system.index("## This turn") < system.index("## Your reply")
    assert "unverified_quote" in result.reply.flags
    [shown] = content(result)["citations"]
    assert shown["quote"] == quote and shown["location"] == f"How the body's alarm system works › {section.title}"
    with store.session() as s:
        raw = s.get(Message, result.reply.id).raw
    assert "weak character" in raw  # the model's claim stays in the raw text


def test_a_check_says_how_to_answer_once_and_offers_one_way_past(engine):
    from tutor.render.display import message_item

    conv = run(engine.open("ed", MODULE))
    asked = run(engine.send(conv.id, LearnerInput(text="Continue")))
    [form] = content(asked)["forms"]
    step = content(asked)["next_step"]
    words = " ".join([texts(asked), form["description"], step.get("prompt") or ""]).lower()
    assert words.count("own words") == 1 and words.count("message box") == 1  # the form's description says it
    assert step["suggestions"].count("Skip this check") == 1
    assert form["title"] == "Check your understanding"
    item = message_item(asked.reply).forms[0]
    assert item.is_check and not item.has_required  # one field: no "* marks a required answer"
    # A question while the check is open asks it again, but nobody has tried it yet: no "Try again".
    again = run(engine.send(conv.id, LearnerInput(text="Why does anxiety make my heart race?")))
    assert form_ids(again) == ["check-anxiety_in_a_nutshell"]
    assert content(again)["forms"][0]["title"] == "Check your understanding"


def test_a_check_a_model_reply_carries_can_be_skipped_from_its_quick_replies(store):
    with FakeLLMServer("openai") as server:
        eng = model_engine(store, server)
        server.script(openai_reply(json.dumps(SHOWS_FIRST_TOPIC)),
                      openai_reply(json.dumps(tutor_reply("A quick check."))))
        conv = run(eng.open("fay", MODULE))
        asked = run(eng.send(conv.id, LearnerInput(text="ok")))
    assert form_ids(asked) == ["check-anxiety_in_a_nutshell"]
    assert content(asked)["next_step"]["suggestions"] == ["Skip this check", "Yes, go on"]


def test_a_check_answered_in_the_message_box_reads_answered_with_its_score_where_it_was_asked(engine, store):
    from tutor.render.display import message_item

    conv = run(engine.open("gus", MODULE))
    asked = run(engine.send(conv.id, LearnerInput(text="Continue")))
    good = run(engine.send(conv.id, LearnerInput(text=NUTSHELL.example_answer)))  # typed, not the form
    assert good.answered == ("check-anxiety_in_a_nutshell", 10)
    view = run(engine.open("gus", MODULE))  # as a reload reads it
    asking = next(m for m in view.messages if m.id == asked.reply.id)
    assert asking.form_states == {"check-anxiety_in_a_nutshell": {"status": "answered", "score": 10}}
    [form] = message_item(asking).forms
    assert (form.status, form.answers) == ("answered", ["Answered in the chat: 10/10."])
    assert message_item(asking, "vi").forms[0].answers == ["Đã trả lời trong khung trò chuyện: 10/10."]
    # A question typed while a check is open is not an answer: that form reads skipped.
    conv2 = run(engine.open("hal", MODULE))
    asked2 = run(engine.send(conv2.id, LearnerInput(text="Continue")))
    question = run(engine.send(conv2.id, LearnerInput(text="Why does anxiety make my heart race?")))
    assert question.answered is None
    view2 = run(engine.open("hal", MODULE))
    assert next(m for m in view2.messages if m.id == asked2.reply.id).form_states == {
        "check-anxiety_in_a_nutshell": {"status": "skipped"}}


@pytest.mark.parametrize("text, topic", [
    ("isnt self compassion just being soft on yourself", "Self-compassion"),
    ("thở chậm có phải lúc nào cũng giúp bớt lo âu không", "Slow breathing"),
    ("honestly I don't get why my stomach churns before every presentation", "The fight-or-flight response"),
])
def test_a_question_worded_as_one_without_a_question_mark_is_answered_not_thanked_as_a_share(engine, text, topic):
    """With no check open, a message worded as a question ("isn't …", "có phải … không") is
    answered from the material, even when it has no question mark and the meaning reader
    calls it a statement about oneself."""
    conv = run(engine.open("qf", MODULE))
    result = run(engine.send(conv.id, LearnerInput(text=text)))
    assert "Thank you for sharing" not in texts(result)
    assert topic in texts(result)


@pytest.mark.parametrize("text, asks", [
    ("isnt self compassion just being soft on yourself", True),
    ("can kids do the breathing too", True),
    ("does coffee make it worse", True),
    ("how come i shake before exams", True),
    ("ngáy có phải lúc nào cũng nguy hiểm không", True),
    ("co nen di kham khong", True),
    ("hôm nay ngày mấy", True),
    ("ok quick one, can kids do it too", True),  # a clause of its own asks
    ("right, is that normal", True),
    ("honestly i dont get why my hands shake before a call", True),  # asked indirectly
    ("wondering if naps make it worse", True),
    ("vậy ngủ trưa thì sao", True),
    ("tối nay ăn gì", True),
    # Chat drops its subjects: these tell, they do not ask.
    ("can't sleep again, third night in a row", False),
    ("did the breathing today and it helped", False),
    ("could not sleep last night", False),
    ("is so hard lately, everything piles up", False),
    ("would love more examples", False),
    ("mình không ngủ được", False),
    # "không … gì / nào" is "nothing / none", not a question
    ("mấy hôm nay mình không ăn gì", False),
    ("honestly, so tired, cant sleep again", False),
    ("i dont know what to do anymore", False),
    ("tối qua chẳng ngủ được chút nào", False),
])
def test_a_question_is_told_by_its_wording_not_by_a_first_word_alone(text, asks):
    from tutor.teach.intent import question_form

    assert question_form(text) is asks


def test_an_aside_worded_as_a_question_is_not_scored_as_the_answer_to_the_open_check(engine, store):
    """Short Vietnamese messages all sit close in meaning to a short check, so "what's the
    date today" was scored as the learner's answer (0/10). One worded as a question is not
    an answer; the check stays open and an answer is scored."""
    conv = run(engine.open("lan", "giac_ngu_lanh_manh"))
    asked = run(engine.send(conv.id, LearnerInput(text="tiếp tục")))
    assert form_ids(asked) == ["check-ngu_de_lam_gi"]
    result = run(engine.send(conv.id, LearnerInput(text="hôm nay ngày mấy")))
    assert attempts(store) == [], texts(result)
    answered = run(engine.send(conv.id, LearnerInput(text="ngủ giúp cơ thể hồi phục và não ghi nhớ bài học")))
    assert len(attempts(store)) == 1, texts(answered)


def test_a_personal_share_the_module_has_nothing_on_is_heard_not_called_off_topic(engine):
    """A learner saying they have felt low lately is not asking about anything outside the
    module: they get a warm acknowledgement and the way on, not "this module doesn't cover
    that"."""
    conv = run(engine.open("ngoc", "giac_ngu_lanh_manh"))
    result = run(engine.send(conv.id, LearnerInput(text="dạo này mình buồn lắm, chẳng muốn làm gì")))
    said = texts(result)
    assert "không nói về điều đó" not in said and "Cảm ơn bạn đã kể với mình" in said, said


@pytest.mark.parametrize("module, text, reply", [
    ("giac_ngu_lanh_manh", "mình không biết", "Không sao đâu, mình cứ từ từ nhé."),
    (MODULE, "I don't know", "That's okay, there's no rush."),
])
def test_i_dont_know_with_no_check_open_is_met_with_the_way_on_not_quotes(engine, store, module, text, reply):
    """With no check open, "I don't know" is the learner unsure what to do next: it was read
    as a question and answered with unrelated passages (when to see a doctor)."""
    conv = run(engine.open("vy", module))
    result = run(engine.send(conv.id, LearnerInput(text=text)))
    assert texts(result).startswith(reply), texts(result)
    assert "Trích từ" not in texts(result) and "From *" not in texts(result)
    assert attempts(store) == []


def test_a_short_answer_read_as_a_question_is_answered_and_the_learner_told_how_to_send_it_as_the_answer(
        engine, store):
    """"ngủ để cơ thể nghỉ ngơi" (sleep lets the body rest), typed under "what do the body and
    brain do in sleep?", reads to the meaning reader as a question. It is not judged (judging
    a question is the worse error) but the learner is told how to send it as the answer; a
    question worded as one is not."""
    conv = run(engine.open("mai", "giac_ngu_lanh_manh"))
    run(engine.send(conv.id, LearnerInput(text="tiếp tục")))
    result = run(engine.send(conv.id, LearnerInput(text="ngủ để cơ thể nghỉ ngơi")))
    assert attempts(store) == [] and form_ids(result) == ["check-ngu_de_lam_gi"]
    assert "Nếu đó là câu trả lời của bạn cho câu hỏi về **Vì sao chúng ta cần ngủ**" in texts(result), texts(result)
    asked = run(engine.send(conv.id, LearnerInput(text="tại sao người lớn cần ngủ 7 tiếng")))
    assert "Nếu đó là câu trả lời của bạn" not in texts(asked) and attempts(store) == []


@pytest.mark.parametrize("module, text, note", [
    (MODULE, "lo âu là gì vậy", "Học phần này được viết bằng tiếng Anh, nên nội dung bên dưới cũng bằng tiếng Anh."),
    (MODULE, "tim dap nhanh khi lo la sao", "Học phần này được viết bằng tiếng Anh"),
    ("giac_ngu_lanh_manh", "what are the different stages of sleep",
     "This module is written in Vietnamese, so what follows is in Vietnamese too."),
])
def test_a_question_in_another_language_is_answered_from_the_module_and_says_so(engine, module, text, note):
    """Retrieval reads across languages; the reply says, in the learner's language, that what
    it shows is in the module's."""
    conv = run(engine.open("kim", module))
    result = run(engine.send(conv.id, LearnerInput(text=text)))
    assert note in texts(result), texts(result)


def test_a_question_in_the_modules_own_language_has_no_language_note(engine):
    conv = run(engine.open("kim", MODULE))
    result = run(engine.send(conv.id, LearnerInput(text="Why does my heart race?")))
    assert "This module is written in" not in texts(result) and "Học phần này được viết" not in texts(result)
