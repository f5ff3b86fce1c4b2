"""The cap on model calls in flight (tutor.llm.gate): FIFO, visible, inside the deadline."""

from __future__ import annotations

import asyncio
import json

from tests.fakes.servers import FakeLLMServer, settings_for
from tests.fakes.wire import openai_stream, tutor_reply
from tutor.llm import ChatMessage, CompletionRequest, LLMSettings, make_provider, run_turn
from tutor.llm.gate import ModelGate, gated, queue_line, reporting
from tutor.llm.replies import DEADLINE_TEXT

MESSAGES = [ChatMessage("system", "Reply with one JSON object."), ChatMessage("user", "What is anxiety?")]


class Positions:
    """A turn listener that hears only its place in the queue."""

    def __init__(self) -> None:
        self.seen: list[int] = []

    async def queued(self, position: int) -> None:
        self.seen.append(position)

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
        gate = ModelGate(2)
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
        gate = ModelGate(1)
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
