"""Token budgets: trim history first, fail closed when a call cannot fit, log it in the audit."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from tests.fakes import wire
from tests.fakes.servers import settings_for
from tutor.llm import ChatMessage, CompletionRequest, LLMSettings, make_provider, run_turn
from tutor.llm.budget import check_budget, estimate_tokens, request_estimate, trim_history
from tutor.llm.policy import BUDGET_TEXT

SYSTEM = ChatMessage("system", "S" * 400)  # ~100 tokens


def history(exchanges: int, size: int = 400) -> list[ChatMessage]:
    messages = [SYSTEM]
    for i in range(exchanges):
        messages += [ChatMessage("user", f"q{i} " + "u" * size), ChatMessage("assistant", f"a{i} " + "a" * size)]
    return messages + [ChatMessage("user", "the last question")]


def req(messages, max_tokens=200) -> CompletionRequest:
    return CompletionRequest(messages, temperature=0.7, max_tokens=max_tokens, strategy="json_object")


def run(server, request, used=0, **overrides):
    settings = settings_for(server, **overrides)

    async def go():
        provider = make_provider(settings)
        try:
            return await run_turn(provider, request, settings, conversation_tokens_used=used)
        finally:
            await provider.aclose()

    return asyncio.run(go())


def test_no_budgets_means_no_change():
    request = req(history(20))
    check = check_budget(request, LLMSettings())
    assert check.ok and check.request is request and not check.trimmed


def test_turn_budget_trims_oldest_history_first(openai_server):
    request = req(history(10))
    budget = request_estimate(req(history(3)))  # room for about three exchanges
    openai_server.script(wire.openai_reply(wire.tutor_json()))
    result = run(openai_server, request, turn_token_budget=budget)
    assert result.parsed.outcome == "valid" and "history_trimmed" in result.flags
    sent = openai_server.requests[0].json["messages"]
    assert sent[0]["content"] == SYSTEM.content and sent[-1]["content"] == "the last question"
    assert sent[1]["role"] == "user" and sent[1]["content"].startswith("q7")
    assert request_estimate(req([ChatMessage(m["role"], m["content"]) for m in sent])) <= budget


def test_turn_budget_that_cannot_fit_fails_closed_without_calling(openai_server):
    result = run(openai_server, req(history(2), max_tokens=2000), turn_token_budget=1000)
    assert openai_server.requests == []
    assert {"turn_budget_exceeded", "needs_review", "fallback_apology"} <= set(result.flags)
    assert "TUTOR_TURN_TOKEN_BUDGET=1000" in result.operator_message
    (record,) = result.attempts
    assert record.outcome == "skipped" and record.error_class == "BudgetExceeded"
    assert "turn_budget_exceeded" in record.flags


def test_exhausted_conversation_budget_fails_closed(openai_server):
    result = run(openai_server, req(history(1)), used=50_000, conversation_token_budget=50_000)
    assert openai_server.requests == []
    assert result.parsed.response.content.text_blocks[0].content == BUDGET_TEXT
    assert "conversation_budget_exhausted" in result.flags
    assert "TUTOR_CONVERSATION_TOKEN_BUDGET=50000" in result.operator_message


def test_conversation_remainder_limits_the_next_call(openai_server):
    request = req(history(10))
    openai_server.script(wire.openai_reply(wire.tutor_json()))
    remaining = request_estimate(req(history(2)))
    result = run(openai_server, request, used=10_000, conversation_token_budget=10_000 + remaining)
    assert "history_trimmed" in result.flags and len(openai_server.requests) == 1
    assert result.tokens_used == 120 + 45


def test_no_room_for_a_reask_fails_closed_with_what_came_back(openai_server):
    request = req(history(0))
    budget = request_estimate(request) + 60  # the first call fits; the re-ask quoting it will not
    openai_server.script(wire.openai_reply("Plain prose " * 40, tokens=(10, 10)))
    result = run(openai_server, request, turn_token_budget=budget)
    assert len(openai_server.requests) == 1
    assert result.parsed.outcome == "invalid" and result.parsed.raw.startswith("Plain prose")
    assert {"turn_budget_exceeded", "needs_review"} <= set(result.flags)
    assert [r.outcome for r in result.attempts] == ["invalid", "skipped"]


roles = st.sampled_from(["user", "assistant"])
messages_st = st.lists(st.builds(ChatMessage, roles, st.text(max_size=300)), max_size=12)


@given(messages_st, st.integers(min_value=0, max_value=800))
def test_trim_keeps_system_and_last_turn_and_starts_with_user(body, limit):
    messages = [SYSTEM, *body, ChatMessage("user", "last")]
    trimmed = trim_history(messages, limit)
    assert trimmed[0] == SYSTEM and trimmed[-1] == messages[-1]
    if len(trimmed) < len(messages):  # whatever was cut, the kept part opens with the learner
        assert trimmed[1].role == "user"
    tail = messages[len(messages) - len(trimmed) + 1 :]
    assert trimmed[1:] == tail  # a suffix: order kept, only the oldest dropped
    if estimate_tokens(trimmed) > limit:
        assert len(trimmed) == 2  # only gives up when nothing more can go
