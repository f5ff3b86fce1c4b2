"""Kept-alive connections the server dropped (tutor.llm._transport): never reused once the
hang-up can be seen, and a request that met an unseen one is sent again, once, on a fresh
connection, for every kind of call (a streamed or whole reply, a judge or screen contract),
within the call's deadline. Against tests/fakes/keepalive.py on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import pytest

from tests.fakes.keepalive import KeepAliveServer
from tests.fakes.wire import tutor_json
from tutor.llm import ChatMessage, CompletionRequest, ConnectionFailed, LLMSettings, make_provider
from tutor.llm._http import http_limits
from tutor.llm._transport import AiohttpTransport
from tutor.llm.base import Contract
from tutor.llm.contract_call import call_contract
from tutor.llm.policy import run_turn

REQUEST = CompletionRequest([ChatMessage("system", "s"), ChatMessage("user", "hi")], 0.7, 200)
CONTRACT = Contract("judge", {"type": "object"})
IDLE_S = 0.2


def content(body: dict) -> str:
    """A tutor reply for a lesson, a small JSON object for a contract call."""
    if "response_format" in body and body["response_format"]["type"] == "json_schema":
        return '{"score": 7}'
    return '{"score": 7}' if "judge" in json.dumps(body["messages"]) else tutor_json("Breathe out slowly.")


def dead_when_idle(number: int, on_connection: int, idle_s: float) -> str:
    """A connection idle past IDLE_S was closed by the server, unseen by the client."""
    return "reset" if on_connection > 1 and idle_s >= IDLE_S else "answer"


def settings(server: KeepAliveServer, **overrides) -> LLMSettings:
    values = dict(provider="openai", base_url=server.base_url, model="m", max_retries=0, timeout_s=5.0,
                  stream=False, deadline_s=10.0, retry_base_delay_s=0.0, context_window=8192)
    return LLMSettings(**{**values, **overrides})


class Calls:
    """One provider over one AiohttpTransport (so the test can read `resent`)."""

    def __init__(self, settings: LLMSettings) -> None:
        self.settings = settings
        self.transport = AiohttpTransport(http_limits())
        self.client = httpx.AsyncClient(transport=self.transport, timeout=settings.timeout_s)
        self.provider = make_provider(settings, client=self.client)

    async def reply(self):
        return await run_turn(self.provider, REQUEST, self.settings)

    async def contract(self, deadline_s: float = 10.0):
        messages = lambda shortened: [ChatMessage("system", "judge this"), ChatMessage("user", "an answer")]  # noqa: E731
        return await call_contract(self.provider, self.settings, CONTRACT, messages, json.loads,
                                   max_tokens=100, deadline_s=deadline_s)

    async def aclose(self) -> None:
        await self.client.aclose()


def usable(kind: str, result) -> bool:
    if kind == "contract":
        return result.value == {"score": 7} and [a.outcome for a in result.attempts] == ["valid"]
    return "Breathe out slowly." in result.parsed.raw and [a.outcome for a in result.attempts] == ["valid"]


CALL_KINDS = [("reply", True), ("reply", False), ("contract", False)]


@pytest.mark.parametrize("kind,stream", CALL_KINDS, ids=["streamed reply", "whole reply", "judge or screen"])
def test_a_request_on_a_connection_the_server_dropped_unseen_is_sent_again_on_a_fresh_one(kind, stream):
    async def main(server: KeepAliveServer):
        calls = Calls(settings(server, stream=stream))
        try:
            first = await getattr(calls, kind)()
            await asyncio.sleep(IDLE_S + 0.1)  # idle: the server drops the connection, without a word
            second = await getattr(calls, kind)()
            return first, second, calls.transport.resent
        finally:
            await calls.aclose()

    with KeepAliveServer(content, fate=dead_when_idle) as server:
        first, second, resent = asyncio.run(main(server))
    assert usable(kind, first) and usable(kind, second)  # one attempt each: no policy retry, no re-ask
    assert server.resets == 1 and resent == 1
    assert server.connections == 2 and server.requests == 3


def test_a_connection_hung_up_while_the_event_loop_was_busy_is_not_reused():
    # The server closes the idle connection while the client's loop is blocked (as a parse or
    # the semantic layer blocks it): the hang-up is in the socket, unread. The connection is
    # not taken for the next call (no reset, nothing to send again).
    async def main(server: KeepAliveServer):
        calls = Calls(settings(server))
        try:
            await calls.contract()
            time.sleep(IDLE_S * 3)  # the loop is busy; the server hangs up meanwhile
            second = await calls.contract()
            return second, calls.transport.resent
        finally:
            await calls.aclose()

    with KeepAliveServer(content, close_idle_after=IDLE_S) as server:
        second, resent = asyncio.run(main(server))
    assert usable("contract", second)
    assert resent == 0 and server.connections == 2 and server.requests == 2


def test_the_fresh_connection_is_tried_once():
    def only_the_first(number: int, on_connection: int, idle_s: float) -> str:
        return "answer" if number == 1 else "reset"

    async def main(server: KeepAliveServer):
        calls = Calls(settings(server, stream=True))
        try:
            await calls.reply()
            await asyncio.sleep(0.05)
            with pytest.raises(ConnectionFailed):
                await calls.provider.complete(REQUEST)
            return calls.transport.resent
        finally:
            await calls.aclose()

    with KeepAliveServer(content, fate=only_the_first) as server:
        resent = asyncio.run(main(server))
    assert resent == 1 and server.requests == 3  # the answered one, the reused one, one fresh one


def test_a_fresh_connection_that_fails_is_not_sent_again():
    def never(number: int, on_connection: int, idle_s: float) -> str:
        return "reset"

    async def main(server: KeepAliveServer):
        calls = Calls(settings(server))
        try:
            with pytest.raises(ConnectionFailed):
                await calls.provider.complete(REQUEST)
            return calls.transport.resent
        finally:
            await calls.aclose()

    with KeepAliveServer(content, fate=never) as server:
        resent = asyncio.run(main(server))
    assert resent == 0 and server.requests == 1


def test_sending_again_stays_within_the_calls_deadline():
    def slow_when_fresh(number: int, on_connection: int, idle_s: float) -> str | float:
        if number == 1:
            return "answer"
        return "reset" if on_connection > 1 else 5.0

    async def main(server: KeepAliveServer):
        calls = Calls(settings(server))
        try:
            await calls.contract()
            started = time.monotonic()
            outcome = await calls.contract(deadline_s=0.6)
            return outcome, time.monotonic() - started, calls.transport.resent
        finally:
            await calls.aclose()

    with KeepAliveServer(content, fate=slow_when_fresh) as server:
        outcome, took, resent = asyncio.run(main(server))
    assert resent == 1 and outcome.value is None
    assert outcome.attempts[0].flags == ["deadline"]
    assert took < 3.0  # the deadline (0.6 s), not the fresh connection's 5 s answer
