"""Usage limits in a whole turn: real SQLite, the engine, and a loopback model server whose
requests are counted (a refused turn must cost no model call and store nothing)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from sqlmodel import select

from tests.fakes.servers import FakeLLMServer, settings_for
from tests.fakes.wire import openai_reply, openai_stream, tutor_reply
from tests.test_engine import MODULE, _answers_for, _walk_to_a_form, rows
from tutor.access.usage import UsageLimits, UsageSettings
from tutor.content.modules import load_library
from tutor.llm.base import LearnerInput
from tutor.llm.config import LLMSettings
from tutor.llm.factory import make_provider
from tutor.risk.turn import SafetySettings
from tutor.storage.store import Conversation, Store
from tutor.turns.engine import Engine, InputError

REPLY_TOKENS = 120 + 45  # what the fake server reports for each reply (tests.fakes.wire)


def run(coro):
    return asyncio.run(coro)


def limited_engine(store: Store, server: FakeLLMServer | None, **limits) -> Engine:
    settings = settings_for(server, max_retries=0) if server is not None else LLMSettings()
    usage = UsageLimits(UsageSettings(**limits))
    return Engine(store, make_provider(settings), load_library(), settings, usage=usage)


def answer_everything(server: FakeLLMServer) -> None:
    server.default = lambda _request: openai_reply(json.dumps(tutor_reply("Let's keep going.")))


def learner_texts(store: Store, conversation_id: int) -> list[str]:
    return [m.text for m in rows(store, conversation_id) if m.role == "learner"]


def test_a_learner_sending_too_fast_is_refused_before_anything_is_stored_or_asked(store):
    with FakeLLMServer("openai") as server:
        answer_everything(server)
        engine = limited_engine(store, server, turns_per_minute=2)
        conv = run(engine.open("ada", MODULE, defer_opening=True))
        for text in ("one", "two"):
            run(engine.send(conv.id, LearnerInput(text=text)))
        assert len(server.requests) == 2
        with pytest.raises(InputError) as refused:
            run(engine.accept(conv.id, LearnerInput(text="three, too soon")))
        assert refused.value.message.startswith(
            "You're sending messages faster than the tutor can keep up — you can send again in")
        assert learner_texts(store, conv.id) == ["one", "two"]  # the refused text is not stored
        assert len(server.requests) == 2  # and no model was asked
        # Another learner is not held back by this one.
        other = run(engine.open("grace", MODULE, defer_opening=True))
        run(engine.send(other.id, LearnerInput(text="hello")))
        assert len(server.requests) == 3


def test_a_resent_message_is_not_a_new_turn(store):
    """A double click or a resend after a reconnect (the same browser-made id) returns the
    stored message; it is not counted against the learner's turns per minute."""
    engine = limited_engine(store, None, turns_per_minute=2)
    conv = run(engine.open("ada", MODULE, defer_opening=True))
    first = run(engine.accept(conv.id, LearnerInput(text="one"), client_id="send-1"))
    for _ in range(3):  # resent: the same message, never refused
        again = run(engine.accept(conv.id, LearnerInput(text="one"), client_id="send-1"))
        assert again.duplicate and again.learner.id == first.learner.id
    run(engine.accept(conv.id, LearnerInput(text="two"), client_id="send-2"))  # the second of two
    with pytest.raises(InputError):
        run(engine.accept(conv.id, LearnerInput(text="three"), client_id="send-3"))
    assert learner_texts(store, conv.id) == ["one", "two"]


def test_form_answers_count_as_turns_and_a_refused_form_stays_open(store):
    engine = limited_engine(store, None)  # the built-in tutor: forms without a model
    engine.usage = None  # walk to a form without limits
    view = run(engine.open("ann", MODULE))
    offered, form = _walk_to_a_form(engine, view.id)
    count = len(rows(store, view.id))

    engine.usage = UsageLimits(UsageSettings(turns_per_minute=1))
    run(engine.usage.admit_turn("ann"))  # one turn already sent this minute
    with pytest.raises(InputError) as refused:
        run(engine.accept(view.id, LearnerInput(form_id=form["id"], answers=_answers_for(form))))
    assert "faster than the tutor can keep up" in refused.value.message
    assert len(rows(store, view.id)) == count
    states = {m.id: m.form_states for m in engine.history(view.id)}
    assert states[offered.id][form["id"]]["status"] == "open"  # the learner can send it again later


def test_daily_tokens_are_the_learners_and_survive_start_over(store):
    with FakeLLMServer("openai") as server:
        answer_everything(server)
        engine = limited_engine(store, server, daily_tokens=2 * REPLY_TOKENS - 1, turns_per_minute=0)
        conv = run(engine.open("bo", MODULE, defer_opening=True))
        run(engine.send(conv.id, LearnerInput(text="What is anxiety?")))  # 165 spent
        run(engine.send(conv.id, LearnerInput(text="And panic?")))  # some left: allowed, 330 spent
        with pytest.raises(InputError) as refused:
            run(engine.accept(conv.id, LearnerInput(text="More please")))
        assert "today's limit" in refused.value.message and "carry on in" in refused.value.message
        assert refused.value.message.rstrip().endswith("saved.")

        # Start over would open with a model call: refused too, and the conversation kept.
        with pytest.raises(InputError, match="today's limit"):
            run(engine.open("bo", MODULE, new=True))
        assert run(engine.open("bo", MODULE, defer_opening=True)).id == conv.id
        assert len(server.requests) == 2


def test_a_new_conversations_opening_turn_waits_once_todays_tokens_are_spent(store, monkeypatch):
    """The opening turn is a model call the learner causes: the page asks for it only while
    tokens are left (tutor.web.chat_history.read_conversation, as the chat page reads it)."""
    from tutor.turns import runtime
    from tutor.web import chat_history

    with FakeLLMServer("openai") as server:
        answer_everything(server)
        engine = limited_engine(store, server, daily_tokens=REPLY_TOKENS, turns_per_minute=0)
        monkeypatch.setattr(runtime, "_engine", engine)  # the app's engine, as the page finds it
        view, _ = run(chat_history.read_conversation("fay", MODULE, "en"))
        assert view.awaiting_reply and view.messages == []  # the opening is owed: tokens left, so asked
        run(engine.respond_pending(view.id))
        assert len(server.requests) == 1 and run(engine.usage.tokens_left("fay")) == 0
        other = next(m for m in engine.library.modules if m != MODULE)
        with pytest.raises(InputError, match="today's limit"):
            run(chat_history.read_conversation("fay", other, "en"))
        with pytest.raises(InputError, match="today's limit"):
            run(engine.open("fay", MODULE, new=True, defer_opening=True))  # start over
        assert len(server.requests) == 1  # neither opening asked the model
        # Another learner's openings are not held back.
        assert run(chat_history.read_conversation("gil", other, "en"))[0].awaiting_reply


def test_the_built_in_tutor_spends_no_tokens(store):
    engine = limited_engine(store, None, daily_tokens=1, turns_per_minute=0)
    conv = run(engine.open("cy", MODULE))
    for _ in range(3):
        run(engine.send(conv.id, LearnerInput(text="Continue")))
    assert run(engine.usage.tokens_left("cy")) == 1


def test_start_over_beyond_the_days_allowance_is_refused_and_the_conversation_kept(store):
    engine = limited_engine(store, None, conversations_per_day=2)
    first = run(engine.open("di", MODULE, defer_opening=True))  # a module's first: counted
    second = run(engine.open("di", MODULE, new=True, defer_opening=True))
    with pytest.raises(InputError) as refused:
        run(engine.open("di", MODULE, new=True, defer_opening=True))
    assert "started 2 new conversations today" in refused.value.message
    with store.session() as s:
        convs = list(s.exec(select(Conversation).order_by("id")))
    assert [c.id for c in convs] == [first.id, second.id]
    assert [c.status for c in convs] == ["archived", "active"]  # nothing archived by the refusal
    assert run(engine.open("di", MODULE, defer_opening=True)).id == second.id  # resuming is fine


class Watcher:
    """Hears one turn: its places in the queue and the reply's text."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log, self.positions = name, log, []

    async def queued(self, position: int) -> None:
        self.positions.append(position)
        self.log.append(f"{self.name} queued {position}")

    async def text(self, raw: str) -> None:
        if not self.log or self.log[-1] != f"{self.name} text":
            self.log.append(f"{self.name} text")

    async def status(self, status: str) -> None:
        pass


def test_with_one_model_slot_a_second_learner_waits_in_line_sees_it_and_then_proceeds(store):
    with FakeLLMServer("openai") as server:
        server.script(openai_stream(json.dumps(tutor_reply("For Ada.")), pieces=6, chunk_delay_s=0.15),
                      openai_stream(json.dumps(tutor_reply("For Bo.")), pieces=3))
        settings = settings_for(server, max_retries=0, stream=True, deadline_s=30)
        usage = UsageLimits(UsageSettings(model_calls_in_flight=1))
        engine = Engine(store, make_provider(settings), load_library(), settings, usage=usage)
        ada = run(engine.open("ada", MODULE, defer_opening=True))
        bo = run(engine.open("bo", MODULE, defer_opening=True))
        log: list[str] = []
        first, second = Watcher("ada", log), Watcher("bo", log)

        async def go():
            a = await engine.accept(ada.id, LearnerInput(text="Ada asks first"))
            b = await engine.accept(bo.id, LearnerInput(text="Bo asks second"))
            ta = asyncio.create_task(engine.respond(a, first))
            # Bo asks once Ada's call is in flight (a fixed wait assumed the machine's pace:
            # reading Ada's message by meaning can take longer than 0.2 s on a busy one)
            deadline = time.monotonic() + 20
            while not server.requests and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            tb = asyncio.create_task(engine.respond(b, second))
            return await ta, await tb

        ra, rb = run(go())
    assert first.positions == []  # a free slot: never in line
    assert second.positions == [1, 0]  # "you're next in line…", then its turn
    # Bo's turn starts only once Ada's reply is written: one call at a time, in order.
    assert log.index("bo queued 0") > max(i for i, e in enumerate(log) if e == "ada text")
    assert [r.json["messages"][-1]["content"] for r in server.requests] == ["Ada asks first", "Bo asks second"]
    assert ra.reply.response["content"]["text_blocks"][0]["content"] == "For Ada."
    assert rb.reply.response["content"]["text_blocks"][0]["content"] == "For Bo."
    assert engine.gate.most == 1


def test_the_safety_screen_waits_in_the_same_line_and_its_tokens_count(store):
    with FakeLLMServer("openai") as server:
        # The screen and the reply run side by side: each is answered by what it asks.
        server.default = lambda request: openai_reply(json.dumps(
            {"risk_flags": []} if "risk_flags" in request.json["messages"][0]["content"]
            else tutor_reply("Breathing slows the alarm.")))
        settings = settings_for(server, max_retries=0)
        usage = UsageLimits(UsageSettings(model_calls_in_flight=1, daily_tokens=10_000))
        engine = Engine(store, make_provider(settings), load_library(), settings,
                        SafetySettings(model_screen=True), usage=usage)
        conv = run(engine.open("ed", MODULE, defer_opening=True))
        log: list[str] = []
        watcher = Watcher("ed", log)

        async def go():
            pending = await engine.accept(conv.id, LearnerInput(text="How do I calm down?"))
            async with engine.gate.slot():  # another learner's call holds the only slot
                turn = asyncio.create_task(engine.respond(pending, watcher))
                await asyncio.sleep(0.3)
                assert server.requests == []  # the screen waits in line too
            return await turn

        result = run(go())
        screen, tutor = sorted((r.json["messages"][0]["content"] for r in server.requests),
                               key=lambda system: "risk_flags" not in system)
    # The screen runs beside the reply: both calls wait in line, the learner sees their place.
    assert watcher.positions[0] >= 1 and watcher.positions[-1] == 0 and max(watcher.positions) <= 2
    assert "risk" in screen.lower() and screen != tutor
    assert result.reply.response["content"]["text_blocks"][0]["content"] == "Breathing slows the alarm."
    assert run(usage.tokens_left("ed")) == 10_000 - 2 * REPLY_TOKENS  # the screen's tokens count too
