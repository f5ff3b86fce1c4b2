"""A model that cannot be heard: the learner gets the built-in tutor's lesson turn under one
line saying the tutor is having trouble, marked as such, counted as shown; and the model is
never told that the app's own words (apologies, that lesson) were its own.

Real SQLite with migrations, the real engine, and a loopback OpenAI-compatible server that
goes down, answers garbage or an empty reply, or never answers.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from sqlmodel import select

from tests.fakes.servers import FakeLLMServer, RecordedRequest, Scripted, settings_for
from tests.fakes.wire import error, openai_reply, openai_stream, tutor_json, tutor_reply
from tutor.console.console import backend_health
from tutor.console.reviews import review_list
from tutor.content.modules import load_library
from tutor.i18n import translator
from tutor.llm.base import LearnerInput
from tutor.llm.factory import make_provider
from tutor.llm.replies import APOLOGY_TEXT, DEADLINE_TEXT, ENGINE_ERROR_TEXT, STOPPED_TEXT
from tutor.storage.store import AuditEvent, Message, Store
from tutor.turns.engine import Engine
from tutor.turns.fallback_lesson import TROUBLE_TEXT
from tutor.turns.turn_store import LESSON_STAND_IN, UNSHOWN_REPLY

LIBRARY = load_library()
ANXIETY = LIBRARY.get("understanding_anxiety")
SLEEP = LIBRARY.get("giac_ngu_lanh_manh")  # Vietnamese
FIRST = ANXIETY.topics[0]
SECOND = ANXIETY.topics[1]
OPENING = tutor_reply("What anxiety is: feeling worried about what might go wrong.",
                      progress={"covered_topics": [FIRST.id]})
APP_WORDS = [APOLOGY_TEXT, DEADLINE_TEXT, STOPPED_TEXT, ENGINE_ERROR_TEXT, TROUBLE_TEXT]


def run(coro):
    return asyncio.run(coro)


def engine_for(store: Store, server: FakeLLMServer, **overrides) -> Engine:
    settings = settings_for(server, **overrides)
    return Engine(store, make_provider(settings), LIBRARY, settings)


def blocks(result) -> list[dict]:
    return result.reply.response["content"]["text_blocks"]


def audit(store: Store, reply_id: int) -> list[AuditEvent]:
    with store.session() as s:
        return list(s.exec(select(AuditEvent).where(AuditEvent.message_id == reply_id).order_by(AuditEvent.id)))


def assistant_texts(request: RecordedRequest) -> list[str]:
    return [m["content"] for m in request.json["messages"] if m["role"] == "assistant"]


def opened(store: Store, server: FakeLLMServer, learner: str, **overrides):
    """A conversation whose opening turn the model wrote (it taught the first topic)."""
    eng = engine_for(store, server, **overrides)
    server.script(openai_reply(json.dumps(OPENING)))
    conv = run(eng.open(learner, ANXIETY.id))
    assert FIRST.id in conv.progress.covered
    return eng, conv


def assert_lesson_under_trouble_line(result, language: str = "en") -> None:
    first, *rest = blocks(result)
    assert first == {"type": "info", "content": translator(language)(TROUBLE_TEXT)}
    assert rest, "a lesson follows the trouble line"
    shown = "\n".join(b["content"] for b in rest)
    for words in APP_WORDS:  # no apology on top of the lesson
        assert translator(language)(words) not in shown
    flags = set(result.reply.flags)
    assert "builtin_fallback" in flags and "needs_review" in flags and "fallback_apology" not in flags
    assert result.reply.outcome == "invalid"  # the model's reply: nothing of it was usable


# Each way a model fails to give a turn: (what the server does, the flag naming the failure).
FAILURES = {
    "server_down": ([], lambda r: error(503, "overloaded"), "transport_error"),
    "garbage_body": ([], lambda r: Scripted(200, b"<html><body>502 Bad Gateway</body></html>"), "transport_error"),
    "empty_replies": ([openai_reply(""), openai_reply("")], None, "reasked"),
    "placeholder_replies": ([openai_reply(tutor_json("...")), openai_reply(tutor_json("<text>"))], None,
                            "placeholder_text"),
    "refusals": ([openai_reply("I'm sorry, but I can't help with that."),
                  openai_reply("I cannot help with that request.")], None, "refusal"),
}


@pytest.mark.parametrize("how", list(FAILURES))
def test_a_failed_turn_teaches_the_next_topic_from_the_module_and_counts_it_as_shown(store, how):
    queued, default, flag = FAILURES[how]
    with FakeLLMServer("openai") as server:
        eng, conv = opened(store, server, f"ann-{how}")
        before = len(server.requests)
        server.script(*queued)
        server.default = default
        result = run(eng.send(conv.id, LearnerInput(text=f"Next: {SECOND.title}")))
        calls = len(server.requests) - before
    assert calls >= 2  # the model was asked (and re-asked, or retried) before the module stood in
    assert_lesson_under_trouble_line(result)
    assert flag in result.reply.flags
    # The built-in tutor's turn for where the learner is: the topic asked for, in the author's words.
    assert blocks(result)[1] == {"type": "heading", "content": SECOND.title, "level": 2}
    # The learner saw it, so it counts as seen; the server's meta says so too.
    assert SECOND.id in result.progress.covered
    assert result.reply.response["meta"]["progress"]["covered_topics"] == result.progress.covered
    rows = audit(store, result.reply.id)
    model_rows, (fallback,) = rows[:-1], rows[-1:]
    assert model_rows and all(r.provider == "openai" and r.error_class for r in model_rows)  # each one failed
    assert (fallback.provider, fallback.outcome, json.loads(fallback.detail_json)["kind"]) == \
        ("builtin", "fallback", "fallback")
    assert fallback.tokens_in == fallback.tokens_out == 0  # nothing counted against the learner's tokens


def test_an_opening_turn_with_the_server_down_greets_and_teaches_the_first_topic(store):
    with FakeLLMServer("openai") as server:
        server.default = lambda r: error(503)
        eng = engine_for(store, server)
        conv = run(eng.open("bo", ANXIETY.id))
    [reply] = conv.messages
    first, heading, *_ = reply.response["content"]["text_blocks"]
    assert first["content"] == TROUBLE_TEXT
    assert heading == {"type": "heading", "content": ANXIETY.title, "level": 1}
    assert FIRST.id in conv.progress.covered


def test_a_server_that_never_answers_gives_the_lesson_at_the_deadline(store):
    with FakeLLMServer("openai") as server:
        eng, conv = opened(store, server, "cy", deadline_s=1.5, timeout_s=10.0, stream=True)
        server.script(Scripted(hang=True))
        result = run(eng.send(conv.id, LearnerInput(text=f"Next: {SECOND.title}")))
    assert_lesson_under_trouble_line(result)
    assert "deadline" in result.reply.flags
    assert SECOND.id in result.progress.covered


def test_a_reply_the_model_had_begun_is_kept_at_the_deadline_not_replaced(store):
    streamed = tutor_json("Fear is about a danger that is here now, and anxiety is about what might come.")
    with FakeLLMServer("openai") as server:
        eng, conv = opened(store, server, "di", deadline_s=1.5, timeout_s=10.0, stream=True)
        server.script(openai_stream(streamed, pieces=6, stall_after=4, delay_s=30.0))
        result = run(eng.send(conv.id, LearnerInput(text="How is fear different?")))
    assert "deadline" in result.reply.flags and "builtin_fallback" not in result.reply.flags
    shown = "\n".join(b["content"] for b in blocks(result))
    assert "Fear is about a danger" in shown and TROUBLE_TEXT not in shown


def test_the_trouble_line_is_in_the_modules_language(store):
    with FakeLLMServer("openai") as server:
        server.default = lambda r: error(503)
        eng = engine_for(store, server)
        conv = run(eng.open("lan", SLEEP.id))
    first = conv.messages[0].response["content"]["text_blocks"][0]
    vi = translator("vi")(TROUBLE_TEXT)
    assert vi != TROUBLE_TEXT and first == {"type": "info", "content": vi}


def test_the_model_never_reads_the_apps_words_as_its_own(store):
    """The server was killed mid-turn and came back: the next turns' requests carry a short
    stand-in for the turn the module gave, not its trouble line or lesson, and no apology."""
    with FakeLLMServer("openai") as server:
        eng, conv = opened(store, server, "ed")
        server.script(Scripted(drop=True), Scripted(drop=True), Scripted(drop=True))
        failed = run(eng.send(conv.id, LearnerInput(text="Continue")))
        assert "builtin_fallback" in failed.reply.flags
        lesson = "\n".join(b["content"] for b in blocks(failed)[1:])
        server.script(openai_reply(json.dumps(tutor_reply("Good question about fear."))))
        again = run(eng.send(conv.id, LearnerInput(text="How is fear different?")))
        request = server.requests[-1]
    assert again.reply.outcome == "valid"
    said = assistant_texts(request)
    assert len(said) == 2  # the opening the model wrote, then the stand-in
    opening_words = OPENING["content"]["text_blocks"][0]["content"]
    assert json.loads(said[0])["content"]["text_blocks"][0]["content"] == opening_words
    assert json.loads(said[1]) == json.loads(LESSON_STAND_IN)
    everything = "\n".join(said)
    assert TROUBLE_TEXT not in everything and lesson[:80] not in everything
    for words in APP_WORDS:
        assert words not in everything


def test_a_stopped_turns_own_words_are_not_read_back_as_the_models(store):
    with FakeLLMServer("openai") as server:
        eng, conv = opened(store, server, "fa", stream=True, deadline_s=10.0)
        server.script(Scripted(hang=True))

        async def stop_soon():
            pending = await eng.accept(conv.id, LearnerInput(text="Tell me more"))
            task = asyncio.ensure_future(eng.respond(pending))
            for _ in range(100):
                if eng.stop(conv.id):
                    break
                await asyncio.sleep(0.05)
            return await task

        stopped = run(stop_soon())
        assert blocks(stopped)[0]["content"] == STOPPED_TEXT and "builtin_fallback" not in stopped.reply.flags
        server.script(openai_reply(json.dumps(tutor_reply("Here is more."))))
        run(eng.send(conv.id, LearnerInput(text="Tell me more, please")))
        said = assistant_texts(server.requests[-1])
    assert STOPPED_TEXT not in "\n".join(said)
    assert said[-1] == UNSHOWN_REPLY


def test_operators_see_the_module_turn_apart_from_model_calls(store):
    with FakeLLMServer("openai") as server:
        eng, conv = opened(store, server, "gu")
        server.default = lambda r: error(503)
        result = run(eng.send(conv.id, LearnerInput(text="Continue")))
    [item] = [i for i in review_list(store, details=True) if i.reply_id == result.reply.id]
    assert "builtin_fallback" in item.label
    assert [(a.provider, a.kind, a.outcome) for a in item.attempts][-1] == ("builtin", "fallback", "fallback")
    assert all(a.provider == "openai" for a in item.attempts[:-1])
    last_hour = backend_health(store).windows[0]
    assert (last_hour.builtin_turns, last_hour.fallback_turns) == (1, 1)  # a line of its own
    assert all(c.outcome != "fallback" for c in last_hour.counts)
    with store.session() as s:
        model_calls = len(s.exec(select(AuditEvent).where(AuditEvent.provider == "openai")).all())
    assert last_hour.calls == model_calls  # not counted as a model call
    with store.session() as s:
        stored = s.get(Message, result.reply.id)
    assert "builtin_fallback" in stored.flags and json.loads(stored.parsed_json)["content"]["text_blocks"]
