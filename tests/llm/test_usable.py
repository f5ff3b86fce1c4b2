"""The content gate after the schema (tutor.llm.usable): a parsed reply whose text is a
placeholder, an echo, a chat-template marker or a loop is not a lesson.

The rules one by one on plain data, then the policy over loopback HTTP: junk is re-asked
once and otherwise fails closed, a template marker inside good text is taken out."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.fakes import wire
from tests.fakes.servers import settings_for
from tutor.content.modules import load_library
from tutor.llm import ChatMessage, CompletionRequest, make_provider, run_turn
from tutor.llm.base import PassageData, TeachingContext, TurnContext
from tutor.llm.replies import APOLOGY_TEXT
from tutor.llm.usable import Sent, check
from tutor.progress import ProgressState
from tutor.turns.prompts import CONTRACT_BLOCK, GLOBAL_RULES, build_messages

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
LEARNER = "Why does my chest get tight when I worry?"
INSTRUCTIONS = ("You are a calm, warm and non-judgmental tutor helping the learner work through "
                "Understanding anxiety, a psychoeducation module for adults.")
SENT = Sent(learner=LEARNER, prompt=f"{GLOBAL_RULES}\n\n## Author instructions\n{INSTRUCTIONS}\n\n{CONTRACT_BLOCK}")
GOOD = "A tight chest is your muscles bracing for danger... it eases as you breathe out slowly."


def reply(*blocks: str, suggestions: list[str] | None = None, prompt: str | None = None,
          label: str | None = None) -> dict:
    content: dict = {"text_blocks": [{"type": "paragraph", "content": b} for b in blocks]}
    if suggestions is not None or prompt is not None:
        content["next_step"] = {k: v for k, v in (("prompt", prompt), ("suggestions", suggestions)) if v is not None}
    if label is not None:
        content["forms"] = [{"id": "f", "fields": [{"id": "feel", "type": "radio", "label": label,
                                                      "options": [{"value": "a", "label": "Calm"}]}]}]
    return {"content": content, "meta": {"response_type": "educational"}}


# ----------------------------------------------------------------------------- the rules


@pytest.mark.parametrize("text", ["...", "…", " . . . ", "string", "<text>", "[your text here]", "TODO",
                                  "Lorem ipsum dolor sit amet.", "**...**", "`string`", "content"])
def test_a_placeholder_as_the_whole_text_is_flagged(text):
    for where in (reply(text), reply(GOOD, suggestions=[text]), reply(GOOD, label=text), reply(GOOD, prompt=text)):
        verdict = check(where, SENT)
        assert not verdict.usable and verdict.flags == ["placeholder_text"], where


def test_real_text_with_an_ellipsis_inside_is_usable():
    verdict = check(reply(GOOD, "Well... what do you notice first?", suggestions=["Tell me more", "Why?"],
                          prompt="Shall we go on?", label="How do you feel?"), SENT)
    assert verdict.usable and verdict.flags == []


def test_a_blank_text_is_flagged_empty():
    assert check(reply(GOOD, suggestions=["  "]), SENT).flags == ["empty_text"]
    assert check(reply(GOOD, "\n"), SENT).flags == ["empty_text"]


def test_the_learners_message_handed_back_is_an_echo():
    assert check(reply(LEARNER), SENT).flags == ["echoed_learner"]
    assert check(reply(f"**{LEARNER.upper()}**"), SENT).flags == ["echoed_learner"]
    # answering it, with its words inside a longer reply, is not
    answer = ("Good question: why does my chest get tight when I worry? Worry tenses the muscles between your "
              "ribs, and slow breathing lets them soften again.")
    assert check(reply(answer), SENT).usable
    # a short message is not echoed by a short greeting
    assert check(reply("Hi there!"), Sent(learner="Hi there!", prompt="")).usable


def test_the_instructions_or_the_contract_handed_back_are_an_echo():
    assert check(reply("You are a calm warm and non judgmental tutor helping the learner"), SENT).flags == [
        "echoed_prompt"]
    contract_line = "array of type content level; type: paragraph|heading|list; content is markdown; level 1-6"
    assert check(reply(GOOD, suggestions=[contract_line]), SENT).flags == ["echoed_prompt"]
    # a few shared words in the tutor's own sentence are not
    assert check(reply("Let's keep this calm and simple: one idea at a time, in plain words."), SENT).usable


def test_the_apps_own_apology_written_by_the_model_is_an_echo():
    assert check(reply(APOLOGY_TEXT), SENT).flags == ["echoed_app_text"]
    assert check(reply(GOOD, APOLOGY_TEXT.split(":")[0]), SENT).flags == ["echoed_app_text"]


def test_a_text_that_loops_or_a_block_written_twice_is_repeated():
    assert check(reply("Breathe in slowly. " * 6), SENT).flags == ["repeated_text"]
    assert check(reply(GOOD, GOOD), SENT).flags == ["repeated_text"]
    assert check(reply(GOOD, suggestions=["Tell me more", "tell me more!"]), SENT).flags == ["repeated_text"]


@pytest.mark.parametrize("marker", ["<|im_end|>", "<end_of_turn>", "</s>", "<|eot_id|>", "<|endoftext|>"])
def test_an_end_of_turn_marker_is_cut_with_what_follows(marker):
    verdict = check(reply(f"{GOOD}{marker}\n<|im_start|>user\nok thanks"), SENT)
    assert verdict.usable and verdict.flags == ["template_token"]
    assert verdict.response["content"]["text_blocks"][0]["content"] == GOOD


def test_a_start_marker_and_its_role_are_taken_out():
    verdict = check(reply(f"<start_of_turn>model\n{GOOD}", suggestions=["<|assistant|>Tell me more"]), SENT)
    assert verdict.usable and verdict.flags == ["template_token"]
    assert verdict.response["content"]["text_blocks"][0]["content"] == GOOD
    assert verdict.response["content"]["next_step"]["suggestions"] == ["Tell me more"]


def test_only_a_start_marker_takes_the_role_word_after_it():
    verdict = check(reply("Breathing slows the nervous<pad> system down, one breath at a time."), SENT)
    assert verdict.usable and verdict.flags == ["template_token"]
    assert verdict.response["content"]["text_blocks"][0]["content"] == (
        "Breathing slows the nervous system down, one breath at a time.")


def test_a_text_that_is_only_a_marker_is_empty():
    verdict = check(reply(GOOD, "<end_of_turn>"), SENT)
    assert not verdict.usable and verdict.flags == ["empty_text", "template_token"]


def test_material_the_reply_may_quote_is_not_the_prompt():
    """Passages, titles and the check's question are in the system text, but a reply may
    repeat them word for word; the instructions around them may not be copied."""
    library = load_library(FIXTURES / "modules" / "good")
    module = library.get("mini")
    passage = ("Anxiety is a normal response to threat: the heart speeds up, breathing quickens and the "
               "muscles tense so that the body is ready to act.")
    teaching = TeachingContext(intent="question", passages=(PassageData("src", "Source", "s1", "Section", None,
                                                                          passage),))
    state = ProgressState((), ())
    messages = build_messages(module, state, [], LEARNER, teaching=teaching)
    context = TurnContext(module=module, progress=state, detected=frozenset(), learner=None, turn_index=1,
                          teaching=teaching)
    sent = Sent.of(CompletionRequest(messages, 0.7, 400, context=context))
    assert sent.learner == LEARNER and passage not in sent.prompt + sent.stable
    assert "Response contract" in sent.stable and "Where the learner is" in sent.prompt
    assert check(reply(passage), sent).usable
    assert check(reply(module.description), sent).usable
    copied = "Reply with exactly ONE JSON object that follows the response contract in this message."
    assert check(reply(copied), sent).flags == ["echoed_prompt"]
    # The turn's own part of the instructions (after the part every turn shares) is the prompt too.
    copied = "One JSON object, exactly as the response contract above says; nothing after it in this message."
    assert check(reply(copied), sent).flags == ["echoed_prompt"]


# ----------------------------------------------------------------- the policy, over HTTP

HISTORY = [
    ChatMessage("system", SENT.prompt),
    ChatMessage("user", LEARNER),
]


def turn(server, **overrides):
    settings = settings_for(server, **overrides)

    async def go():
        provider = make_provider(settings)
        try:
            return await run_turn(provider, CompletionRequest(list(HISTORY), 0.7, 400, "json_schema"), settings,
                                  fallback_suggestion="Tell me more", sleep=lambda s: asyncio.sleep(0))
        finally:
            await provider.aclose()

    return asyncio.run(go())


def test_a_placeholder_reply_is_reasked_with_what_is_wrong(openai_server):
    junk = json.dumps(reply("...", suggestions=["..."]))
    openai_server.script(wire.openai_reply(junk), wire.openai_reply(wire.tutor_json(GOOD)))
    result = turn(openai_server)
    assert result.parsed.response.content.text_blocks[0].content == GOOD
    assert "reasked" in result.flags and "needs_review" not in result.flags
    first, second = result.attempts
    assert (first.outcome, first.error_class) == ("valid", "UnusableReply")  # schema-valid, not usable
    assert "placeholder_text" in first.flags and second.outcome == "valid"
    note = openai_server.requests[1].json["messages"][-1]["content"]
    assert "content.text_blocks[0].content: '...' is a placeholder" in note
    assert "content.next_step.suggestions[0]" in note


def test_junk_twice_fails_closed_with_the_apology_and_every_reason(openai_server):
    openai_server.script(wire.openai_reply(json.dumps(reply("..."))),
                         wire.openai_reply(json.dumps(reply(LEARNER))))
    result = turn(openai_server, stream=True)
    shown = result.parsed.response
    assert shown.content.text_blocks[0].content == APOLOGY_TEXT and shown.meta.response_type == "error"
    assert result.parsed.outcome == "invalid"
    assert {"placeholder_text", "echoed_learner", "needs_review", "fallback_apology", "reasked"} <= set(result.flags)
    assert [a.error_class for a in result.attempts] == ["UnusableReply", "UnusableReply"]


def test_a_marker_in_good_text_is_taken_out_without_a_reask(openai_server):
    openai_server.script(wire.openai_reply(json.dumps(reply(GOOD + "<|im_end|>"))))
    result = turn(openai_server)
    assert result.parsed.response.content.text_blocks[0].content == GOOD
    assert result.parsed.outcome == "repaired" and "template_token" in result.flags
    assert len(result.attempts) == 1 and "<|im_end|>" in result.parsed.raw  # the raw text is kept as sent
