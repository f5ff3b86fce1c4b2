"""What the learner says about themselves is acknowledged for what it is. A greeting, thanks
or goodbye on its own is answered in kind: not "this module doesn't cover that", never
judged as a check answer, and the lesson waits where it was. A personal share is met as a
person would meet it: something hard, something that went well, a step towards support.
Real SQLite with migrations; the built-in tutor, and a loopback OpenAI-compatible server for
a model."""

from __future__ import annotations

import json

import pytest

from tests.fakes.servers import FakeLLMServer, settings_for
from tests.fakes.wire import openai_reply, tutor_reply
from tests.test_teaching_turns import LIBRARY, attempts, form_ids, run, texts
from tutor.llm.base import LearnerInput
from tutor.llm.config import LLMSettings
from tutor.llm.factory import make_provider
from tutor.storage.store import Store
from tutor.teach.intent import social
from tutor.turns.engine import Engine

ANXIETY, SLEEP = "understanding_anxiety", "giac_ngu_lanh_manh"


@pytest.fixture
def engine(store: Store) -> Engine:
    return Engine(store, make_provider(LLMSettings()), LIBRARY, LLMSettings())


def model_system_prompt(store: Store, learner: str, text: str) -> str:
    """The system prompt a model is sent for the learner's first message."""
    with FakeLLMServer("openai") as server:
        settings = settings_for(server)
        eng = Engine(store, make_provider(settings), LIBRARY, settings)
        server.script(openai_reply(json.dumps(tutor_reply("Welcome."))), openai_reply(json.dumps(tutor_reply("Yes."))))
        conv = run(eng.open(learner, ANXIETY))
        run(eng.send(conv.id, LearnerInput(text=text)))
        return server.requests[-1].json["messages"][0]["content"]


@pytest.mark.parametrize("text, kind", [
    ("hi", "greeting"), ("Good morning!", "greeting"), ("chào bạn", "greeting"),
    ("thanks!", "thanks"), ("that was really helpful, thank you", "thanks"), ("cam on ban nhieu nha", "thanks"),
    ("thanks, bye!", "thanks"), ("bye, see you tomorrow", "goodbye"), ("tạm biệt nhé", "goodbye"),
    ("haha", "laugh"),
    # anything more is read as usual
    ("hi, what is anxiety?", None), ("no thanks", None), ("later", None), ("ok", None),
    ("I want to say goodbye to everyone", None), ("thanks, and what about sleep?", None),
    ("is that useful?", None), ("was this helpful to you?", None),
])
def test_a_greeting_thanks_or_goodbye_alone_is_read_as_such(text, kind):
    assert social(text) == kind


def test_a_greeting_and_thanks_are_answered_in_kind_and_the_lesson_waits(engine):
    conv = run(engine.open("ana", ANXIETY))
    for text, reply in (("hi", "Hi! Good to have you here."), ("thanks!", "You're welcome. I'm glad it helps.")):
        result = run(engine.send(conv.id, LearnerInput(text=text)))
        assert texts(result).startswith(reply)
        assert "isn't something this module covers" not in texts(result)
        assert result.progress.covered == ["anxiety_defined"] and form_ids(result) == []  # nothing moved
        step = result.reply.response["content"]["next_step"]
        assert "What anxiety is" in step["prompt"] and step["suggestions"][-1] == "Continue"


def test_thanks_with_a_check_open_is_not_judged_and_the_check_stays(engine, store):
    conv = run(engine.open("ben", ANXIETY))
    asked = run(engine.send(conv.id, LearnerInput(text="Continue")))
    assert form_ids(asked) == ["check-anxiety_in_a_nutshell"]
    result = run(engine.send(conv.id, LearnerInput(text="thank you so much")))
    assert texts(result).startswith("You're welcome.") and "scored" not in texts(result)
    assert attempts(store) == []
    assert form_ids(result) == ["check-anxiety_in_a_nutshell"]  # still open, asked again below


def test_a_vietnamese_learner_is_answered_in_the_modules_language(engine):
    conv = run(engine.open("chi", SLEEP))
    result = run(engine.send(conv.id, LearnerInput(text="cảm ơn bạn nhiều")))
    assert texts(result).startswith("Không có gì đâu.")
    bye = run(engine.send(conv.id, LearnerInput(text="tạm biệt nha")))
    assert texts(bye).startswith("Tạm biệt bạn nhé.")


def test_a_model_is_told_the_learner_only_greeted_it(store):
    system = model_system_prompt(store, "dan", "hello there")
    assert "The learner only greeted you, thanked you, said goodbye or said they don't know" in system
    assert "not about this module" not in system


@pytest.mark.parametrize("module, share, opening", [
    (ANXIETY, "my mum passed away last year and since then everything feels heavier",
     "That sounds really hard. Thank you for telling me."),
    (ANXIETY, "I tried the slow breathing on the bus when I felt the panic coming and it actually worked",
     "That's good to hear."),
    (ANXIETY, "I'm a nurse and I work nights", "Thank you for sharing that."),  # plain background, as before
    (SLEEP, "dạo này công việc áp lực quá, tối nào mình cũng thấy kiệt sức", "Nghe thật sự vất vả."),
])
def test_a_share_is_acknowledged_for_what_it_is(engine, module, share, opening):
    conv = run(engine.open("eve", module))
    result = run(engine.send(conv.id, LearnerInput(text=share)))
    assert texts(result).startswith(opening)
    assert form_ids(result) == [] and len(result.progress.covered) == 1  # heard, not tested or moved on


def test_a_learner_seeking_support_is_pointed_to_the_modules_part_on_it(engine):
    conv = run(engine.open("fay", ANXIETY))
    result = run(engine.send(conv.id, LearnerInput(text="I think I should see someone about all this")))
    assert texts(result).startswith("Reaching out for support is a good step.")
    assert "part of the topic **When and where to seek help**" in texts(result)
    assert result.progress.covered == ["anxiety_defined"]  # quoted, not taught


def test_a_model_is_told_what_the_share_is_about(store):
    system = model_system_prompt(store, "gil", "my grandad died last month and I can't focus on anything")
    assert "The learner shared something about themselves" in system
    assert "It reads as something hard for them right now" in system


def test_a_share_about_another_topic_is_not_judged_as_the_open_checks_answer(engine, store):
    """Close in meaning to "what does sleep do for the body?", but about screens at night: the
    learner telling what helped them is heard, not scored 0/10 (it was, before)."""
    conv = run(engine.open("hai", SLEEP))
    asked = run(engine.send(conv.id, LearnerInput(text="tiếp tục")))
    assert form_ids(asked) == ["check-ngu_de_lam_gi"]
    result = run(engine.send(conv.id, LearnerInput(text="mình thử tắt điện thoại trước khi ngủ rồi, thấy ngủ ngon hơn hẳn")))
    assert attempts(store) == []
    assert texts(result).startswith("Thật vui khi nghe vậy.")
    assert form_ids(result) == ["check-ngu_de_lam_gi"]  # the check waits below


def test_asking_for_an_exercise_is_answered_with_one_not_with_thanks(engine):
    conv = run(engine.open("ivy", ANXIETY))
    for _ in range(2):  # asked for at once, and again while that check is open
        result = run(engine.send(conv.id, LearnerInput(text="give me an exercise")))
        assert texts(result).startswith("Here is something to practise: a question on **What anxiety is**.")
        assert "Thank you for sharing" not in texts(result)
        assert form_ids(result) == ["check-anxiety_in_a_nutshell"]
