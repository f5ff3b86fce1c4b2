"""The cap on model calls in flight (tutor.llm.gate): FIFO, visible, inside the deadline."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace

import pytest

from tests.fakes.llama_endpoints import LlamaEndpoints
from tests.fakes.servers import FakeLLMServer, settings_for
from tests.fakes.wire import openai_stream, tutor_reply
from tutor.llm import ChatMessage, CompletionRequest, LLMSettings, make_provider, run_turn
from tutor.llm import context as ctx
from tutor.llm.gate import ModelGate, gated, queue_line, reporting
from tutor.llm.replies import DEADLINE_TEXT

MESSAGES = [ChatMessage("system", "Reply with one JSON object."), ChatMessage("user", "What is anxiety?")]


class Positions:
    """A turn listener that hears only its place in the queue (and when it heard it)."""

    def __init__(self) -> None:
        self.seen: list[int] = []
        self.at: list[float] = []

    async def queued(self, position: int) -> None:
        self.seen.append(position)
        self.at.append(time.monotonic())

    async def text(self, raw: str) -> None:
        pass

    async def status(self, status: str) -> None:
        pass


def test_the_queue_line_reads_as_a_place_in_line():
    assert queue_line(1) == "Many learners are asking at once — you're next in line…"
    assert queue_line(3) == "Many learners are asking at once — you're 3rd in line…"
    assert [queue_line(n).split("you're ")[1].split(" ")[0] for n in (2, 11, 12, 13, 21, 22)] == \
        ["2nd", "11th", "12th", "13th", "21st", "22nd"]


def test_at_most_the_cap_run_at_once_and_the_rest_go_first_come_first_served():
    async def go():
        gate = ModelGate(2, news_every_s=0)  # every move told (the pacing is tested below)
        running, started, listeners = 0, [], []
        most = 0

        async def call(n: int) -> None:
            nonlocal running, most
            listener = Positions()
            listeners.append((n, listener))
            async with reporting(listener), gate.slot():
                running += 1
                most = max(most, running)
                started.append(n)
                await asyncio.sleep(0.02)
                running -= 1

        tasks = []
        for n in range(6):
            tasks.append(asyncio.create_task(call(n)))
            await asyncio.sleep(0)  # they arrive in this order
        await asyncio.gather(*tasks)
        return gate, most, started, dict(listeners)

    gate, most, started, listeners = asyncio.run(go())
    assert most == 2 and gate.most == 2
    assert started == list(range(6))
    assert listeners[0].seen == [] and listeners[1].seen == []  # a free slot: never queued
    assert listeners[2].seen == [1, 0]
    moves = listeners[5].seen  # told as the line moves (two slots freed at once: one step of 2)
    assert moves[0] == 4 and moves[-1] == 0 and moves == sorted(set(moves), reverse=True) and len(moves) >= 3
    assert gate.busy == 0 and gate.waiting == 0


def test_a_waiter_that_gives_up_leaves_the_line_and_those_behind_move_up():
    async def go():
        gate = ModelGate(1, news_every_s=0)
        release = asyncio.Event()
        behind = Positions()

        async def holder():
            async with gate.slot():
                await release.wait()

        async def waiter(listener=None):
            async with reporting(listener), gate.slot():
                return "served"

        first = asyncio.create_task(holder())
        await asyncio.sleep(0)
        quitter = asyncio.create_task(waiter())
        await asyncio.sleep(0)
        patient = asyncio.create_task(waiter(behind))
        await asyncio.sleep(0.01)
        quitter.cancel()  # Stop, or the deadline
        await asyncio.sleep(0.01)
        release.set()
        result = await patient
        await first
        return gate, behind.seen, result, quitter.cancelled()

    gate, seen, result, cancelled = asyncio.run(go())
    assert cancelled and result == "served"
    assert seen == [2, 1, 0]
    assert gate.busy == 0 and gate.waiting == 0


def test_a_slot_handed_to_a_waiter_cancelled_at_that_moment_passes_on():
    async def go():
        gate = ModelGate(1)
        async with gate.slot():
            late = asyncio.create_task(gate.slot().__aenter__())
            nxt = asyncio.create_task(_hold(gate))
            await asyncio.sleep(0.01)
        late.cancel()  # the slot was just handed to it, before it could run
        assert await nxt == "served"
        return gate

    async def _hold(gate):
        async with gate.slot():
            return "served"

    gate = asyncio.run(go())
    assert gate.busy == 0 and gate.waiting == 0


def test_the_built_in_tutor_is_never_queued():
    provider = make_provider(LLMSettings())
    assert gated(provider, ModelGate(1)) is provider


def test_queued_calls_go_to_the_model_one_at_a_time_in_order():
    """With a cap of 1 and a slow model, the second turn waits (told it is next), then runs."""
    with FakeLLMServer("openai") as server:
        settings = settings_for(server, stream=True, strategy="json_object", max_retries=0, deadline_s=20)
        server.script(openai_stream(json.dumps(tutor_reply("first")), pieces=5, chunk_delay_s=0.1),
                      openai_stream(json.dumps(tutor_reply("second")), pieces=5, chunk_delay_s=0.01))
        gate = ModelGate(1)
        provider = gated(make_provider(settings), gate)

        async def go():
            second = Positions()
            request = CompletionRequest(MESSAGES, 0.7, 256, "json_object")
            a = asyncio.create_task(run_turn(provider, request, settings))
            await asyncio.sleep(0.05)
            async with reporting(second):
                b = await run_turn(provider, request, settings)
            return await a, b, second.seen

        a, b, seen = asyncio.run(go())
    assert [x.parsed.response.content.text_blocks[0].content for x in (a, b)] == ["first", "second"]
    assert seen == [1, 0]
    assert gate.most == 1 and len(server.requests) == 2


def test_a_turn_that_gets_no_slot_before_its_deadline_gets_the_calm_apology():
    with FakeLLMServer("openai") as server:
        for stream in (True, False):
            settings = settings_for(server, stream=stream, strategy="json_object", max_retries=0, deadline_s=0.5)
            gate = ModelGate(1)
            provider = gated(make_provider(settings), gate)
            server.reset()

            async def go():
                async with gate.slot():  # another learner's call holds the only slot
                    return await run_turn(provider, CompletionRequest(MESSAGES, 0.7, 256, "json_object"), settings)

            result = asyncio.run(go())
            assert result.parsed.response.content.text_blocks[0].content == DEADLINE_TEXT
            assert "deadline" in result.parsed.flags
            assert server.requests == []  # the model was never called
            assert gate.busy == 0 and gate.waiting == 0


def test_a_turn_waiting_only_for_its_own_other_call_hears_nothing():
    """On a one-slot server the model safety screen runs beside the turn's reply: the reply
    waiting for it is not "many learners asking at once". Another learner behind is told."""

    async def go():
        gate = ModelGate(1, news_every_s=0)
        me, other = Positions(), Positions()
        release = asyncio.Event()

        async def call(wait: bool = False) -> None:
            async with gate.slot():
                if wait:
                    await release.wait()

        with reporting(me):  # tasks made here belong to this turn, as the engine's screen does
            screen = asyncio.create_task(call(wait=True))
            await asyncio.sleep(0)
            reply = asyncio.create_task(call())
        await asyncio.sleep(0.02)
        with reporting(other):
            behind = asyncio.create_task(call())
        await asyncio.sleep(0.02)
        release.set()
        await asyncio.gather(screen, reply, behind)
        assert gate.busy == 0 and gate.waiting == 0 and gate.most == 1
        return me.seen, other.seen

    mine, theirs = asyncio.run(go())
    assert mine == []  # neither "next in line" nor "your turn"
    assert theirs[0] == 2 and theirs[-1] == 0  # told: my turn's two calls are ahead of them


# --- pacing: what the page hears while a turn waits ------------------------------------------


def _line_moving(news_every_s: float, moves: list[tuple[int, float]]) -> tuple[Positions, float]:
    """Ten turns wait behind one call; the watched turn is last (10th in line). `moves`: how
    many calls end at once, then the pause before the next ones. What does the watched turn
    hear, and when did it get its slot?"""

    async def go() -> tuple[Positions, float]:
        gate = ModelGate(1, news_every_s=news_every_s)
        tokens: asyncio.Queue[None] = asyncio.Queue()
        watched = Positions()

        async def call(listener=None) -> None:
            async with reporting(listener), gate.slot():
                await tokens.get()  # holds its slot until the test lets it finish

        tasks = [asyncio.create_task(call())]
        for n in range(10):
            tasks.append(asyncio.create_task(call(watched if n == 9 else None)))
            await asyncio.sleep(0)
        await asyncio.sleep(0.05)
        ended = 0
        for count, pause in moves:
            ended += count
            if ended >= 10:
                granted = time.monotonic()  # this burst gives the watched turn its slot
            for _ in range(count):
                tokens.put_nowait(None)
            await asyncio.sleep(pause)
        await asyncio.gather(*tasks)
        assert gate.busy == 0 and gate.waiting == 0
        return watched, granted

    return asyncio.run(go())


def test_the_place_in_line_is_told_at_once_then_at_most_once_a_pace_and_the_turn_at_once():
    # three places at once; 1.15 s later the other seven and the watched turn's slot at once
    heard, granted = _line_moving(1.0, [(3, 1.15), (8, 0)])
    assert heard.seen[0] == 10  # "you're 10th in line" at once
    assert heard.seen[1] == 7  # three moves in a burst: one message, a pace after the first
    assert heard.seen[-1] == 0  # "your turn"
    assert len(heard.seen) == 3, heard.seen  # 7 -> 1 within the pace: no message
    assert heard.at[1] - heard.at[0] >= 1.0
    # told the moment it had its slot, not a pace after the last message (that would be ~0.85 s on)
    assert heard.at[-1] - granted < 0.5


def test_a_line_moving_step_by_step_is_told_once_a_pace():
    trickle = [(1, 0.1)] * 11  # one call ends every 0.1 s: ~1.1 s in line
    every, _ = _line_moving(0, trickle)
    assert every.seen == [10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0]  # unpaced: each step a message
    paced, _ = _line_moving(1.0, trickle)
    assert paced.seen[0] == 10 and paced.seen[-1] == 0 and len(paced.seen) <= 3, paced.seen
    assert paced.seen == sorted(paced.seen, reverse=True)


# --- sizing: what the model backend can take --------------------------------------------------


@pytest.fixture
def fresh_props():
    ctx.forget()
    yield
    ctx.forget()


def _most_at_once(gate: ModelGate, calls: int) -> int:
    async def go() -> int:
        async def call() -> None:
            async with gate.slot():
                await asyncio.sleep(0.05)

        await asyncio.gather(*(call() for _ in range(calls)))
        assert gate.busy == 0 and gate.waiting == 0
        return gate.most

    return asyncio.run(go())


def props_asks(server: LlamaEndpoints) -> int:
    return sum(1 for method, path, _, _ in server.requests if (method, path) == ("GET", "/props"))


def test_a_llama_cpp_server_sizes_the_gate_with_its_slots(fresh_props):
    with LlamaEndpoints({"default_generation_settings": {"n_ctx": 4096}, "total_slots": 3}) as server:
        gate = ModelGate.for_backend(None, server.settings())
        assert gate.capped and gate.slots is None  # asked on the first call, not at start
        assert _most_at_once(gate, 8) == 3 and gate.slots == 3
        assert props_asks(server) == 1  # eight first calls at once: one question
        _most_at_once(gate, 4)
        assert props_asks(server) == 1  # the answer is kept


def test_the_operators_setting_wins_and_nothing_is_asked(fresh_props):
    with LlamaEndpoints({"total_slots": 3}) as server:
        assert _most_at_once(ModelGate.for_backend(5, server.settings()), 8) == 5
        no_cap = ModelGate.for_backend(0, server.settings())
        assert not no_cap.capped and _most_at_once(no_cap, 8) == 8
        assert server.requests == []


def test_hosted_apis_and_servers_that_do_not_say_are_not_capped(fresh_props):
    hosted = LLMSettings(provider="openai", base_url="https://api.openai.com/v1", model="gpt-4o-mini")
    anthropic = LLMSettings(provider="anthropic", base_url="https://api.anthropic.com", model="claude")
    for settings in (hosted, anthropic):
        gate = ModelGate.for_backend(None, settings)
        assert not gate.capped  # a class is never queued here: 429 + Retry-After pace the API
        assert gated(make_provider(replace(settings, api_key="sk-test")), gate).__class__.__name__ \
            .endswith("Provider") and _most_at_once(gate, 20) == 20
    with LlamaEndpoints({"error": {"message": "File Not Found"}}, 404) as server:  # vLLM, Ollama
        gate = ModelGate.for_backend(None, server.settings())
        assert _most_at_once(gate, 20) == 20 and gate.slots is None
        assert props_asks(server) == 1


def test_a_server_still_starting_is_asked_again_and_then_sizes_the_gate(fresh_props, monkeypatch):
    monkeypatch.setattr(ctx, "RETRY_UNKNOWN_AFTER_S", 0.0)  # (a minute in the app)
    with LlamaEndpoints({"error": {"message": "Loading model"}}, 503) as server:
        gate = ModelGate.for_backend(None, server.settings())
        assert _most_at_once(gate, 4) == 4  # unknown for now: no cap
        server.status, server.props = 200, {"default_generation_settings": {"n_ctx": 4096}, "total_slots": 2}
        gate.most = 0
        assert _most_at_once(gate, 6) == 2 and gate.slots == 2
        asks = props_asks(server)
        _most_at_once(gate, 3)
        assert props_asks(server) == asks  # final: not asked again


def test_a_cap_learned_while_calls_are_in_flight_is_kept_from_then_on():
    """Calls made while the server's size was still unknown ran uncapped; once it is known,
    no freed slot is passed on until the calls in flight are within it."""

    async def go():
        answers = iter([(None, False)] * 4 + [(2, True)])  # the server still starting, then its slots

        async def sizer():
            return next(answers)

        gate = ModelGate(None, sizer=sizer)
        release = asyncio.Event()
        running, most_after = 0, []

        async def call(after: bool = False):
            nonlocal running
            async with gate.slot():
                running += 1
                if after:
                    most_after.append(running)
                await (asyncio.sleep(0.01) if after else release.wait())
                running -= 1

        early = [asyncio.create_task(call()) for _ in range(4)]  # unknown: all four run
        await asyncio.sleep(0.01)
        late = [asyncio.create_task(call(after=True)) for _ in range(3)]  # now 2: they wait
        await asyncio.sleep(0.01)
        release.set()
        await asyncio.gather(*early, *late)
        return gate, max(most_after)

    gate, most_after = asyncio.run(go())
    assert gate.slots == 2 and gate.most == 4
    assert most_after <= 2  # the late calls never ran more than two at once
    assert gate.busy == 0 and gate.waiting == 0
