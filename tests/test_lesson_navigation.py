"""Finding one's way in a lesson: "where was I?" and "what will I learn?" are answered with the
recap (what is covered, what the module holds, what comes next), and "go back" shows the
topic before the one the lesson is on again, in English and Vietnamese. Before, "where was
I?" and "what skills will I learn?" were told the module does not cover them, and "go back
to the previous topic" was taken as "continue" and asked a check. Real SQLite with
migrations; the built-in tutor, and a loopback OpenAI-compatible server for a model."""

from __future__ import annotations

import json

import pytest

from tests.fakes.servers import FakeLLMServer
from tests.fakes.wire import openai_reply, tutor_reply
from tests.test_teaching_turns import LIBRARY, _to_the_check, attempts, form_ids, run, texts
from tutor.llm.base import LearnerInput
from tutor.llm.config import LLMSettings
from tutor.llm.factory import make_provider
from tutor.progress import ProgressState, previous_topic
from tutor.storage.store import Store
from tutor.teach.intent import classify
from tutor.turns.engine import Engine

ANXIETY, SLEEP = "understanding_anxiety", "giac_ngu_lanh_manh"


@pytest.fixture
def engine(store: Store) -> Engine:
    return Engine(store, make_provider(LLMSettings()), LIBRARY, LLMSettings())


@pytest.mark.parametrize("text, intent", [
    ("where was I?", "summary"), ("where were we", "summary"), ("mình đang học đến đâu rồi", "summary"),
    ("what skills will I learn?", "summary"), ("what's in this course?", "summary"), ("học phần này dạy gì", "summary"),
    ("go back to the previous topic", "back"), ("can we go back", "back"), ("quay lại bài trước đi", "back"),
    # longer messages are read as usual
    ("I want to go back to when I was a kid and nothing worried me", "answer"),
])
def test_where_was_i_and_go_back_are_read_as_requests(text, intent):
    assert classify(text, check_open=True) == intent


def test_the_topic_before_is_the_one_before_the_topic_taught_last():
    module = LIBRARY.get(ANXIETY)
    first, second, third = (t.id for t in module.topics[:3])
    assert previous_topic(module, ProgressState((first, second, third))) == second
    assert previous_topic(module, ProgressState((first,))) == first  # nothing before the first: it again
    assert previous_topic(module, ProgressState(())) is None


@pytest.mark.parametrize("asked", ["where was I?", "what skills will I learn?"])
def test_where_was_i_and_what_will_i_learn_get_the_recap_not_a_refusal(engine, asked):
    conv = run(engine.open("ana", ANXIETY))
    run(engine.send(conv.id, LearnerInput(text="Continue")))
    run(engine.send(conv.id, LearnerInput(text="skip")))  # on to the second topic
    result = run(engine.send(conv.id, LearnerInput(text=asked)))
    said = texts(result)
    assert "You've covered 2 of 25 topics" in said and "Calming the body" in said, said
    assert "isn't something this module covers" not in said and "prepared answer" not in said
    assert result.progress.covered == ["anxiety_defined", "anxiety_vs_fear"]


def test_go_back_shows_the_topic_before_again_and_asks_no_check(engine, store):
    conv = run(engine.open("ben", ANXIETY))
    run(engine.send(conv.id, LearnerInput(text="Continue")))
    run(engine.send(conv.id, LearnerInput(text="skip")))
    result = run(engine.send(conv.id, LearnerInput(text="go back to the previous topic")))
    said = texts(result)
    assert "Anxiety is the mind and body getting ready for something that *might* go wrong" in said, said
    assert "Thank you for sharing" not in said and form_ids(result) == [] and attempts(store) == []
    assert result.progress.covered == ["anxiety_defined", "anxiety_vs_fear"]  # nothing new, nothing lost


def test_a_vietnamese_learner_can_go_back(engine):
    conv = run(engine.open("chi", SLEEP))
    run(engine.send(conv.id, LearnerInput(text="tiếp tục")))
    run(engine.send(conv.id, LearnerInput(text="bỏ qua")))
    result = run(engine.send(conv.id, LearnerInput(text="quay lại bài trước")))
    said = texts(result)
    assert "Ngủ không phải là thời gian" in said and "Cảm ơn bạn đã chia sẻ" not in said, said


def test_a_model_is_told_to_teach_the_topic_before_again(store):
    with FakeLLMServer("openai") as server:
        eng, conv = _to_the_check(server, store, "dan")
        server.script(openai_reply(json.dumps(tutor_reply("Here it is again."))))
        run(eng.send(conv.id, LearnerInput(text="go back")))
        systems = [r.json["messages"][0]["content"] for r in server.requests]
    system = [s for s in systems if s.startswith("You are a tutor")][-1]
    assert "The learner asked to go back to topic anxiety_defined: teach it again" in system


def test_tell_me_more_about_a_named_thing_is_about_that_not_the_current_topic(engine):
    conv = run(engine.open("dao", SLEEP))  # the lesson is on why we sleep
    result = run(engine.send(conv.id, LearnerInput(text="nói thêm về ngủ trưa đi")))  # naps: another topic
    said = texts(result)
    assert "Ngủ trưa ngắn, khoảng 20 phút" in said and "Giờ giấc đều đặn" in said, said
    assert "Học phần này chỉ nói đến đó thôi" not in said
    plain = run(engine.send(conv.id, LearnerInput(text="nói thêm đi")))  # nothing named: the topic quoted last
    assert "Ngủ trưa ngắn, khoảng 20 phút" not in texts(plain)
