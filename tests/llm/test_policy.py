"""The turn policy end to end over loopback HTTP: re-ask, retries, fail-closed, audit records."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.fakes import wire
from tests.fakes.servers import Scripted, settings_for
from tutor.contract import parse
from tutor.llm import ChatMessage, Completion, CompletionRequest, make_provider, run_turn
from tutor.llm.policy import looks_like_refusal
from tutor.llm.replies import APOLOGY_TEXT

HISTORY = [
    ChatMessage("system", "You are a tutor for 'Understanding anxiety'. Reply with one JSON object."),
    ChatMessage("user", "Hi"),
    ChatMessage("assistant", wire.tutor_json("Welcome")),
    ChatMessage("user", "What does anxiety feel like?"),
    ChatMessage("assistant", wire.tutor_json("It can feel like a racing heart.")),
    ChatMessage("user", "Why does my chest get tight?"),
]


def request(strategy: str = "json_object", messages=None) -> CompletionRequest:
    return CompletionRequest(list(messages or HISTORY), temperature=0.7, max_tokens=400, strategy=strategy)


def turn(server, req=None, *, delays=None, **settings_overrides):
    settings = settings_for(server, **settings_overrides)

    async def sleep(seconds: float) -> None:
        if delays is not None:
            delays.append(seconds)

    async def go():
        provider = make_provider(settings)
        try:
            return await run_turn(provider, req or request(), settings, fallback_suggestion="Tell me more",
                                  sleep=sleep)
        finally:
            await provider.aclose()

    return asyncio.run(go())


def test_valid_first_reply_is_one_audited_attempt(openai_server):
    openai_server.script(wire.openai_reply(wire.tutor_json("Tight chest: muscles tense."), tokens=(500, 80)))
    result = turn(openai_server)
    assert result.parsed.outcome == "valid" and result.flags == [] and result.operator_message is None
    assert result.parsed.response.content.text_blocks[0].content == "Tight chest: muscles tense."
    (record,) = result.attempts
    assert (record.attempt, record.provider, record.model, record.strategy) == (1, "openai", "fake-model-1",
                                                                              "json_object")
    assert (record.tokens_in, record.tokens_out, record.outcome, record.kind) == (500, 80, "valid", "first")
    assert record.temperature == 0.7 and record.strict_json is True and record.error_class is None
    assert record.latency_ms >= 0
    assert result.tokens_used == 580 and result.cost is None
    assert len(openai_server.requests) == 1


def test_invalid_reply_is_reasked_at_temperature_zero_with_errors_and_short_history(openai_server):
    broken = '{"content": {"text_blocks": [{"type": "paragraph"}]}, "meta": {"response_type": "chat"}}'
    openai_server.script(wire.openai_reply(broken), wire.openai_reply(wire.tutor_json("Second try")))
    result = turn(openai_server)
    assert result.parsed.outcome == "valid" and "reasked" in result.flags
    assert result.parsed.response.content.text_blocks[0].content == "Second try"
    first, second = (r.json for r in openai_server.requests)
    assert first["temperature"] == 0.7 and second["temperature"] == 0.0
    assert second["response_format"] == {"type": "json_object"}
    # system + the last exchange + the learner's last turn carrying the re-ask note:
    # roles alternate (chat templates refuse two user messages in a row)
    sent = second["messages"]
    roles = [m["role"] for m in sent]
    assert roles == ["system", "user", "assistant", "user"]
    assert [m["content"] for m in sent[:3]] == [m.content for m in [HISTORY[0], *HISTORY[3:5]]]
    reask = sent[-1]["content"]
    assert reask.startswith(HISTORY[5].content + "\n\n---\n")
    for error in parse(broken).errors:
        assert error in reask
    assert broken in reask
    assert '"properties"' not in reask  # errors only, not the schema again
    assert [(r.kind, r.outcome, r.temperature) for r in result.attempts] == [
        ("first", "invalid", 0.7), ("reask", "valid", 0.0)]
    assert result.attempts[0].error_class == "InvalidReply"


def test_failed_output_is_quoted_truncated(openai_server):
    long_prose = "word " * 2000
    openai_server.script(wire.openai_reply(long_prose), wire.openai_reply(wire.tutor_json()))
    turn(openai_server, reask_output_chars=300)
    reask = openai_server.requests[1].json["messages"][-1]["content"]
    assert long_prose[:300] in reask and long_prose[:301] not in reask and "cut short" in reask


def test_still_invalid_fails_closed_to_markdown(openai_server):
    openai_server.script(wire.openai_reply("**Breathing** helps: in for 4, out for 6."),
                         wire.openai_reply("Try *box breathing*."))
    result = turn(openai_server)
    assert result.parsed.outcome == "invalid" and result.parsed.response is None
    assert result.parsed.raw == "Try *box breathing*."  # the newest text worth showing
    assert "needs_review" in result.flags and "fallback_apology" not in result.flags
    assert result.parsed.flags == result.flags
    assert len(result.attempts) == 2 and result.completion.text == "Try *box breathing*."


@pytest.mark.parametrize("strategy", ["json_schema", "prompt"])
def test_refusals_end_in_a_calm_apology_the_learner_can_answer(openai_server, strategy):
    openai_server.script(wire.openai_reply(None, refusal="I can't help with that."),
                         wire.openai_reply("I'm sorry, but I can't assist with that request."))
    result = turn(openai_server, request(strategy))
    reply = result.parsed.response
    assert reply is not None and reply.content.text_blocks[0].content == APOLOGY_TEXT
    assert reply.meta.response_type == "error" and reply.meta.emotion == "supportive"
    assert reply.content.next_step.suggestions == ["Tell me more"]
    assert {"needs_review", "fallback_apology", "refusal"} <= set(result.flags)
    assert [r.error_class for r in result.attempts] == ["Refusal", "Refusal"]


def test_empty_reply_then_valid(openai_server):
    openai_server.script(wire.openai_reply("   \n"), wire.openai_reply(wire.tutor_json()))
    result = turn(openai_server)
    assert result.parsed.outcome == "valid"
    assert "the reply was empty" in openai_server.requests[1].json["messages"][-1]["content"]
    assert result.attempts[0].error_class == "EmptyReply"


def test_truncated_reply_is_flagged_and_reasked_for_a_shorter_reply(openai_server):
    cut = wire.tutor_json("x" * 50)[:60]
    openai_server.script(wire.openai_reply(cut, finish_reason="length"), wire.openai_reply(wire.tutor_json()))
    result = turn(openai_server)
    assert result.parsed.outcome == "valid" and "truncated" not in result.flags
    assert "truncated" in result.attempts[0].flags
    assert "cut off at the length limit" in openai_server.requests[1].json["messages"][-1]["content"]


def test_truncated_twice_shows_markdown_and_keeps_the_flag(openai_server):
    cut = "Anxiety is a natural response to a thr"
    openai_server.script(wire.openai_reply(cut, finish_reason="length"),
                         wire.openai_reply(cut, finish_reason="length"))
    result = turn(openai_server)
    assert result.parsed.outcome == "invalid" and result.parsed.raw == cut
    assert {"truncated", "needs_review"} <= set(result.flags)


def test_repaired_truncated_reply_is_accepted_with_the_flag(openai_server):
    cut = wire.tutor_json()[:150]
    assert parse(cut, finish_reason="length").outcome == "repaired"  # the contract ladder closes it
    openai_server.script(wire.openai_reply(cut, finish_reason="length"))
    result = turn(openai_server)
    assert result.parsed.outcome == "repaired" and "truncated" in result.flags
    assert len(result.attempts) == 1 and result.attempts[0].outcome == "repaired"


def test_complete_reply_at_length_limit_is_accepted_but_flagged(openai_server):
    openai_server.script(wire.openai_reply(wire.tutor_json(), finish_reason="length"))
    result = turn(openai_server)
    assert result.parsed.outcome == "valid" and "truncated" in result.flags and len(result.attempts) == 1


def test_a_bounded_json_schema_reply_at_the_limit_is_reasked_not_shown(openai_server):
    # json_schema on an OpenAI-compatible server sends a schema bounded to fit max_tokens:
    # a reply that still reaches the limit wrote text the bound does not price, and is not a
    # lesson however well it repairs (json_object, above, keeps the repaired reply)
    cut = wire.tutor_json()[:150]
    openai_server.script(wire.openai_reply(cut, finish_reason="length"),
                         wire.openai_reply(wire.tutor_json("A fresh reply")))
    result = turn(openai_server, request("json_schema"))
    assert len(result.attempts) == 2 and result.attempts[0].outcome == "invalid"
    assert "truncated" in result.attempts[0].flags and "reasked" in result.flags
    assert result.parsed.outcome == "valid" and "truncated" not in result.flags


def test_a_bounded_json_schema_reply_at_the_limit_twice_fails_closed(openai_server):
    cut = wire.tutor_json()[:150]
    openai_server.script(wire.openai_reply(cut, finish_reason="length"), wire.openai_reply(cut, finish_reason="length"))
    result = turn(openai_server, request("json_schema"))
    assert {"truncated", "needs_review"} <= set(result.flags)


def test_server_errors_are_retried_with_backoff_then_succeed(openai_server):
    openai_server.script(wire.error(500), wire.error(502), wire.openai_reply(wire.tutor_json()))
    delays: list[float] = []
    result = turn(openai_server, delays=delays)
    assert result.parsed.outcome == "valid" and result.operator_message is None
    assert [(r.kind, r.outcome, r.http_status) for r in result.attempts] == [
        ("first", "error", 500), ("retry", "error", 502), ("retry", "valid", None)]
    assert len(delays) == 2 and all(0 < d <= 0.02 for d in delays)
    assert delays[1] >= 0.001  # doubled base (0.002) with jitter in [0.5, 1)


def test_retry_after_is_honoured_and_capped(openai_server):
    openai_server.script(wire.error(429, retry_after="0.01"), wire.error(429, retry_after="120"),
                         wire.openai_reply(wire.tutor_json()))
    delays: list[float] = []
    result = turn(openai_server, delays=delays)
    assert delays == [0.01, 0.02] and result.parsed.outcome == "valid"
    assert [r.error_class for r in result.attempts[:2]] == ["RateLimited", "RateLimited"]


def test_real_backoff_sleeps_are_tiny_in_tests(openai_server):
    openai_server.script(wire.error(503), wire.openai_reply(wire.tutor_json()))
    settings = settings_for(openai_server)

    async def go():
        provider = make_provider(settings)
        result = await run_turn(provider, request(), settings)  # real asyncio.sleep
        await provider.aclose()
        return result

    assert asyncio.run(go()).parsed.outcome == "valid"


def test_persistent_server_errors_give_up_and_apologise(openai_server):
    openai_server.script(*[wire.error(500, "kaputt")] * 3)
    result = turn(openai_server)
    assert len(openai_server.requests) == 3  # 1 + TUTOR_LLM_MAX_RETRIES=2
    assert {"fallback_apology", "needs_review", "transport_error"} <= set(result.flags)
    assert result.parsed.response.meta.response_type == "error"
    assert "gave up after 3 tries" in result.operator_message and "kaputt" in result.operator_message
    assert [r.outcome for r in result.attempts] == ["error"] * 3


@pytest.mark.parametrize("status", [401, 403, 404])
def test_rejections_are_not_retried_and_tell_the_operator(openai_server, status):
    openai_server.script(wire.error(status, "denied"))
    result = turn(openai_server)
    assert len(openai_server.requests) == 1
    assert "fallback_apology" in result.flags
    if status == 401:
        assert result.operator_message == "The model endpoint rejected the API key (401): check TUTOR_LLM_API_KEY"
    assert result.attempts[0].error_class in ("AuthError", "NotFound")


def test_timeouts_are_retried_then_fail_closed(openai_server):
    openai_server.script(Scripted(delay_s=1.0), Scripted(delay_s=1.0))
    result = turn(openai_server, timeout_s=0.1, max_retries=1)
    assert len(openai_server.requests) == 2
    assert [r.error_class for r in result.attempts] == ["RequestTimeout", "RequestTimeout"]
    assert "TUTOR_LLM_TIMEOUT=0.1s" in result.operator_message
    assert result.parsed.response.content.text_blocks[0].content == APOLOGY_TEXT


def test_streaming_turn_through_policy(anthropic_server):
    anthropic_server.script(wire.anthropic_stream('{"content": '), wire.anthropic_stream(wire.tutor_json("ok")))
    result = turn(anthropic_server, request("json_schema"), stream=True)
    assert result.parsed.outcome == "valid" and "reasked" in result.flags
    second = anthropic_server.requests[1].json
    assert second["temperature"] == 0.0 and second["stream"] is True
    assert second["tool_choice"] == {"type": "tool", "name": "tutor_response"}
    assert "Your previous reply" in second["messages"][-1]["content"]


def test_cost_uses_configured_prices(openai_server):
    openai_server.script(wire.openai_reply(wire.tutor_json(), tokens=(1_000_000, 500_000)))
    result = turn(openai_server, price_input_per_mtok=0.15, price_output_per_mtok=0.60)
    assert result.cost == pytest.approx(0.15 + 0.30)


def test_missing_usage_is_estimated_and_flagged(openai_server):
    openai_server.script(wire.openai_reply(wire.tutor_json(), usage=False))
    result = turn(openai_server)
    record = result.attempts[0]
    assert record.tokens_in > 0 and record.tokens_out > 0 and "tokens_estimated" in record.flags


class ExplodingProvider:
    """A provider with a bug: the policy must still leave the learner a way on."""

    name = "exploding"
    model = "none"

    async def complete(self, request: CompletionRequest) -> Completion:
        raise KeyError("choices")

    async def aclose(self) -> None:
        pass


def test_a_provider_bug_fails_closed_without_retries(openai_server):
    settings = settings_for(openai_server)
    result = asyncio.run(run_turn(ExplodingProvider(), request(), settings))
    assert "fallback_apology" in result.flags and len(result.attempts) == 1
    assert result.attempts[0].error_class == "ProviderFailure"
    assert "KeyError" in result.operator_message


def test_audit_records_are_plain_json(openai_server):
    openai_server.script(wire.error(500), wire.openai_reply("nope"), wire.openai_reply(wire.tutor_json()))
    result = turn(openai_server)
    rows = [r.to_json_dict() for r in result.attempts]
    assert json.loads(json.dumps(rows)) == rows
    assert [r["attempt"] for r in rows] == [1, 2, 3]


@pytest.mark.parametrize(
    ("text", "refusal"),
    [
        ("I'm sorry, but I can't help with that.", True),
        ("Sorry, I can\u2019t do that", True),
        ("I cannot assist with this request.", True),
        ("I'm unable to comply.", True),
        ("Unfortunately, I am not able to do that.", True),
        ("As an AI, I have no feelings.", True),
        ("Sorry to hear that! Anxiety is common.", False),
        ("I can help with that: anxiety is the body's alarm.", False),
        ("I think anxiety is normal.", False),
    ],
)
def test_refusal_prose(text, refusal):
    assert looks_like_refusal(text) is refusal
