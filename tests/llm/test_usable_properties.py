"""Property: a reply with junk in any shown text is never shown as a lesson.

Replies are generated with real text everywhere, then one text (a block, the next-step
prompt, a suggestion, a form's title, a field's label or an option's label) is replaced by
junk of one kind: a placeholder, a blank, the learner's message, a line of the instructions,
the app's own apology, a loop, or a chat-template marker alone. The model (a loopback
OpenAI-compatible server) sends it, and on the re-ask sends either junk again or a good
reply. Whatever the policy ends with, the learner never sees the junk as a lesson: either the
app's own fail-closed reply (or, for a reply that did not even parse, its raw text as
markdown), flagged for review, or a reply whose texts hold none of it.
A marker inside otherwise good text is taken out and the rest shown.

Mutation check (done by hand when the gate changes): make any one rule of tutor.llm.usable
miss its kind (e.g. `tutor.llm.placeholders.is_placeholder` returning False, `_loops`
returning False) and this test finds a counterexample of that kind.
"""

from __future__ import annotations

import asyncio
import json
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fakes import wire
from tests.fakes.servers import FakeLLMServer, settings_for
from tutor.llm import ChatMessage, CompletionRequest, make_provider, run_turn
from tutor.llm.replies import APOLOGY_TEXT, DEADLINE_TEXT
from tutor.llm.usable import Sent, check
from tutor.text import words
from tutor.turns.prompts import CONTRACT_BLOCK, GLOBAL_RULES

LEARNER = "Why does my chest get tight when I worry about work?"
INSTRUCTIONS = ("You are a calm, warm and non-judgmental tutor helping the learner work through "
                "Understanding anxiety, a psychoeducation module for adults.")
SYSTEM = f"{GLOBAL_RULES}\n\n## Author instructions\n{INSTRUCTIONS}\n\n{CONTRACT_BLOCK}"
SENT = Sent(learner=LEARNER, prompt=SYSTEM)

SENTENCES = [
    "A tight chest often comes from muscles bracing when the mind expects trouble.",
    "Slow breathing out tells the nervous system that the danger has passed.",
    "Worry about work keeps the alarm switched on even when nothing is happening.",
    "Noticing the feeling without fighting it usually lets it fade sooner.",
    "Try resting a hand on your chest and feeling it rise and fall.",
    "Many people feel this before meetings; it is common and not a sign of illness.",
]
SHORT = ["Tell me more", "Show me an exercise", "Why does that help?", "Let's go on"]
OPTIONS = ["Often", "Sometimes", "Rarely"]
PLACEHOLDERS = ["...", "…", "string", "<text>", "Lorem ipsum dolor sit amet", "TODO", "[your text here]", "content"]
MARKERS = ["<|im_end|>", "<end_of_turn>", "</s>", "<|eot_id|>", "<|im_start|>", "<start_of_turn>"]
INSTRUCTION_LINES = [line.strip("- ") for line in SYSTEM.splitlines() if len(words(line)) >= 10]
MARKER = re.compile(r"<\|[a-z_]+\|>|</?s>|<(?:start|end)_of_turn>")


@st.composite
def good_reply(draw) -> dict:
    texts = draw(st.permutations(SENTENCES))
    n = draw(st.integers(1, 3))
    content: dict = {"text_blocks": [{"type": "paragraph", "content": t} for t in texts[:n]]}
    if draw(st.booleans()):
        suggestions = draw(st.permutations(SHORT))[: draw(st.integers(1, 3))]
        content["next_step"] = {"prompt": "Shall we go on?", "suggestions": suggestions}
    if draw(st.booleans()):
        content["forms"] = [{"id": "how_often", "title": "How often do you feel it?", "fields": [
            {"id": "often", "type": "radio", "label": "How often does your chest feel tight?",
             "options": [{"value": o.lower(), "label": o} for o in OPTIONS]}]}]
    return {"content": content, "meta": {"response_type": "educational", "emotion": "supportive"}}


def slots(reply: dict) -> list[tuple[dict | list, str | int]]:
    content = reply["content"]
    found: list[tuple[dict | list, str | int]] = [(b, "content") for b in content["text_blocks"]]
    step = content.get("next_step")
    if step:
        found += [(step, "prompt"), *((step["suggestions"], i) for i in range(len(step["suggestions"])))]
    for form in content.get("forms") or ():
        found.append((form, "title"))
        for fld in form["fields"]:
            found += [(fld, "label"), *((o, "label") for o in fld["options"])]
    return found


junk_text = st.one_of(
    st.tuples(st.just("placeholder"), st.sampled_from(PLACEHOLDERS)),
    st.tuples(st.just("empty"), st.sampled_from(["", "   ", "\n"])),
    st.tuples(st.just("learner"), st.sampled_from([LEARNER, LEARNER.upper(), f"**{LEARNER}**"])),
    st.tuples(st.just("prompt"), st.sampled_from(INSTRUCTION_LINES + [INSTRUCTIONS])),
    st.tuples(st.just("app"), st.sampled_from([APOLOGY_TEXT, DEADLINE_TEXT])),
    st.tuples(st.just("loop"), st.integers(4, 9).map(lambda n: "Breathe in slowly and hold it. " * n)),
    st.tuples(st.just("marker"), st.sampled_from(MARKERS)),
)


@st.composite
def junk_reply(draw) -> tuple[dict, str, str]:
    """(a reply with junk in one text, the kind, the junk)."""
    reply = draw(good_reply())
    kind, junk = draw(junk_text)
    container, key = draw(st.sampled_from(slots(reply)))
    container[key] = junk  # type: ignore[index]
    return reply, kind, junk


def shown_texts(data: dict) -> list[str]:
    content = data["content"]
    texts = [b["content"] for b in content["text_blocks"]]
    step = content.get("next_step") or {}
    texts += [step["prompt"]] if "prompt" in step else []
    texts += step.get("suggestions") or []
    for form in content.get("forms") or ():
        texts += [form[key] for key in ("title", "description", "submit_label") if key in form]
        for fld in form["fields"]:
            texts += [fld["label"], *(o["label"] for o in fld.get("options") or ())]
    return texts


def play(server: FakeLLMServer, first: str, second: str, stream: bool):
    server.reset()
    answer = wire.openai_stream if stream else wire.openai_reply
    server.script(answer(first), answer(second))
    llm = settings_for(server, stream=stream, strategy="json_schema")

    async def go():
        provider = make_provider(llm)
        try:
            request = CompletionRequest([ChatMessage("system", SYSTEM), ChatMessage("user", LEARNER)], 0.7, 400,
                                        "json_schema")
            return await run_turn(provider, request, llm, sleep=lambda s: asyncio.sleep(0))
        finally:
            await provider.aclose()

    return asyncio.run(go())


def assert_not_shown_as_lesson(result, junk_kinds: list[tuple[str, str]]) -> None:
    response = result.parsed.response
    if response is None:  # failed closed to the raw text as markdown, as any reply that did not parse
        assert result.parsed.outcome == "invalid" and "needs_review" in result.flags
        assert "invalid_json" in result.flags  # a blank-only reply has nothing to show: the parser's call
        return
    data = response.to_json_dict()
    if data["meta"].get("response_type") == "error":  # the app's own fail-closed reply
        assert "needs_review" in result.flags and result.parsed.outcome == "invalid"
        return
    texts = shown_texts(data)
    assert not any(MARKER.search(t) for t in texts), texts
    for kind, junk in junk_kinds:
        if kind == "marker":
            continue
        junk_words = words(junk)
        for text in texts:
            assert words(text) != junk_words or not junk_words, (kind, junk, texts)
            if kind in ("empty", "placeholder"):
                assert text.strip() and words(text) != junk_words, (kind, junk, texts)
    assert check(data, SENT).usable, (texts, check(data, SENT).problems)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=junk_reply(), second=st.one_of(junk_reply(), good_reply().map(lambda r: (r, "good", ""))),
       stream=st.booleans())
def test_junk_in_any_text_is_never_shown_as_a_lesson(first, second, stream):
    with FakeLLMServer("openai") as server:
        result = play(server, json.dumps(first[0]), json.dumps(second[0]), stream)
    kinds = [(first[1], first[2])] + ([(second[1], second[2])] if second[1] != "good" else [])
    assert_not_shown_as_lesson(result, kinds)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(reply=good_reply(), marker=st.sampled_from(MARKERS), where=st.integers(0, 20), stream=st.booleans())
def test_a_marker_inside_good_text_is_taken_out_and_the_rest_shown(reply, marker, where, stream):
    container, key = slots(reply)[where % len(slots(reply))]
    good = container[key]  # type: ignore[index]
    container[key] = f"{good}{marker}"  # type: ignore[index]
    with FakeLLMServer("openai") as server:
        result = play(server, json.dumps(reply), wire.tutor_json("Never asked for."), stream)
    assert len(result.attempts) == 1 and "template_token" in result.flags
    shown = shown_texts(result.parsed.response.to_json_dict())
    assert good in shown and not any(MARKER.search(t) for t in shown)


# --------------------------------------------- the word-level rules against their definitions
#
# The gate finds loops and copied runs with set operations and substring searches, not word
# by word. Each rule is checked here against its definition written the plain way: a small
# vocabulary makes repeats and shared runs common, so a search that misses or invents one
# (a run off by one word, a loop of the longest unit, a copied run at the text's end) is found.

VOCAB = ["calm", "breath", "slow", "chest", "tight", "worry", "fear", "rest"]


def loops_by_definition(w: list[str]) -> bool:
    """A unit of 1-12 words said three or more times in a row, 12 words or more in all."""
    for unit in range(1, 13):
        times = max(3, -(-12 // unit))
        for start in range(len(w) - unit * times + 1):
            if all(w[start + k] == w[start + k % unit] for k in range(unit * times)):
                return True
    return False


def copied_by_definition(w: list[str], *sources: list[str], n: int = 8) -> bool:
    """Runs of `n` words found in any source cover half the text, or one covers 16 words."""
    grams = {tuple(source[i:i + n]) for source in sources for i in range(len(source) - n + 1)}
    covered = [False] * len(w)
    for i in range(len(w) - n + 1):
        if tuple(w[i:i + n]) in grams:
            covered[i:i + n] = [True] * n
    longest = run = 0
    for c in covered:
        run = run + 1 if c else 0
        longest = max(longest, run)
    return len(w) >= n and (sum(covered) >= 0.5 * len(w) or longest >= 16)


@st.composite
def word_lists(draw, low: int = 0, high: int = 60) -> list[str]:
    """Words, with a stretch of them often said again a few times in a row."""
    w = draw(st.lists(st.sampled_from(VOCAB), min_size=low, max_size=high))
    if draw(st.booleans()):
        unit = draw(st.lists(st.sampled_from(VOCAB), min_size=1, max_size=13))
        at = draw(st.integers(0, len(w)))
        w[at:at] = unit * draw(st.integers(2, 4))
    return w


def one_block(text: str) -> dict:
    return {"content": {"text_blocks": [{"type": "paragraph", "content": text}]},
            "meta": {"response_type": "educational"}}


@settings(max_examples=400, deadline=None)
@given(w=word_lists())
def test_a_text_is_called_looping_exactly_when_it_loops(w):
    flagged = "repeated_text" in check(one_block(" ".join(w) or "Calm."), Sent()).flags
    assert flagged == loops_by_definition(w), w


@settings(max_examples=400, deadline=None)
@given(w=word_lists(8, 40), shared=word_lists(0, 30), rest=word_lists(0, 30), take=st.integers(0, 40),
       into_shared=st.booleans())
def test_a_text_is_called_copied_from_the_instructions_exactly_when_it_is(w, shared, rest, take, into_shared):
    """The instructions come in two parts (the part every turn shares, this turn's part): runs
    found in either count, together."""
    (shared if into_shared else rest).extend(w[:take])  # often a stretch of the text itself
    sent = Sent(prompt=" ".join(rest), stable=" ".join(shared))
    flagged = "echoed_prompt" in check(one_block(" ".join(w)), sent).flags
    assert flagged == copied_by_definition(w, shared, rest), (w, shared, rest)
