""""I don't know", said to an open check, is the learner stuck: the tutor says that is fine,
gives a way in (the check's weightiest idea as a next step), and asks the check again below,
unjudged. Before, English was taken for a skip and Vietnamese ("không biết") for a question,
answered with an unrelated passage. Real SQLite with migrations; the built-in tutor, and a
loopback OpenAI-compatible server for a model."""

from __future__ import annotations

import json

import pytest

from tests.fakes.servers import FakeLLMServer
from tests.fakes.wire import openai_reply, tutor_reply
from tests.test_teaching_turns import LIBRARY, _to_the_check, attempts, form_ids, run, texts
from tutor.llm.base import LearnerInput
from tutor.llm.config import LLMSettings
from tutor.llm.factory import make_provider
from tutor.storage.store import Store
from tutor.teach.intent import classify, dont_know
from tutor.turns.engine import Engine

ANXIETY, SLEEP = "understanding_anxiety", "giac_ngu_lanh_manh"


@pytest.fixture
def engine(store: Store) -> Engine:
    return Engine(store, make_provider(LLMSettings()), LIBRARY, LLMSettings())


@pytest.mark.parametrize("text, stuck", [
    ("I don't know", True), ("I don’t know", True), ("idk", True), ("no idea tbh", True), ("hmm not sure", True),
    ("I honestly don't know, sorry", True), ("không biết", True), ("khong biet", True), ("chịu", True),
    ("mình không biết ạ", True), ("em chịu thôi", True),
    # an attempt, a question, or something else
    ("idk maybe you start small and build up", False), ("I don't know why I panic", False),
    ("not sure?", False), ("I don't want to answer", False), ("no", False), ("", False),
])
def test_i_dont_know_alone_is_read_as_stuck(text, stuck):
    assert dont_know(text) is stuck
    assert (classify(text, check_open=True) == "stuck") is stuck
    assert classify(text, check_open=False) != "stuck"  # with no check open there is nothing to be stuck on


def test_a_stuck_learner_gets_a_way_in_and_the_check_again_unjudged(engine, store):
    conv = run(engine.open("ana", ANXIETY))
    asked = run(engine.send(conv.id, LearnerInput(text="Continue")))
    assert form_ids(asked) == ["check-anxiety_in_a_nutshell"]
    result = run(engine.send(conv.id, LearnerInput(text="I don't know")))
    said = texts(result)
    assert said.startswith("That's okay: this isn't a test. A good next step: think about how anxiety is the mind "
                           "and body getting ready"), said
    assert "scored" not in said and "No problem. We can come back to it later." not in said
    assert attempts(store) == []
    assert form_ids(result) == ["check-anxiety_in_a_nutshell"]  # still open, asked again below
    assert result.progress.covered == ["anxiety_defined"]  # the lesson waits
    answered = run(engine.send(conv.id, LearnerInput(
        text="It's the mind and body getting ready for something that might go wrong, and a little helps you focus")))
    assert "You scored" in texts(answered) and len(attempts(store)) == 1


def test_a_vietnamese_learner_who_does_not_know_is_answered_in_vietnamese(engine, store):
    conv = run(engine.open("chi", SLEEP))
    run(engine.send(conv.id, LearnerInput(text="tiếp tục")))
    result = run(engine.send(conv.id, LearnerInput(text="khong biet")))
    assert texts(result).startswith("Không sao đâu: đây không phải bài kiểm tra. Bước tiếp theo nên thử: "), texts(result)
    assert "Trích từ" not in texts(result)  # no passage quoted for it
    assert attempts(store) == [] and form_ids(result) == ["check-ngu_de_lam_gi"]


def test_a_model_is_told_the_learner_is_stuck(store):
    with FakeLLMServer("openai") as server:
        eng, conv = _to_the_check(server, store, "dan")
        server.script(openai_reply(json.dumps(tutor_reply("That's fine, here's a way in."))))
        result = run(eng.send(conv.id, LearnerInput(text="no idea")))
        systems = [r.json["messages"][0]["content"] for r in server.requests]
    system = [s for s in systems if s.startswith("You are a tutor")][-1]
    assert "The learner says they don't know the answer to the open check" in system
    assert attempts(store) == [] and form_ids(result) == ["check-anxiety_in_a_nutshell"]
