"""Is a parsed reply worth showing as a lesson? The content gate after the schema.

A reply can be schema-valid and still say nothing: a small model under a grammar copies the
prompt's example ("..."), hands back the learner's message or the system prompt, leaks its
chat template's markers, or repeats itself. Such a reply is not usable: the policy re-asks
once and otherwise fails closed, as for an invalid reply. Each reason has its own flag:

- ``placeholder_text``: a text (block, prompt, suggestion, form label…) that is only a
  placeholder: "...", "…", "string", "<text>", "lorem ipsum", "TODO" and the like, as the
  whole text (an ellipsis inside a sentence is fine; tutor.llm.placeholders);
- ``empty_text``: a shown text that is blank (after the markers below are taken out);
- ``echoed_learner``: a text that is the learner's own message handed back;
- ``echoed_prompt``: a text copied from the instructions the model was sent (the system
  prompt, the response contract), a long run of the same words. The module's material the
  reply may quote (passages, titles, check questions) is not counted as the prompt;
- ``echoed_app_text``: the app's own stand-in words (its apologies) written by the model;
- ``repeated_text``: a text that loops, or the same text block or suggestion twice;
- ``template_token``: a chat-template or special token (``<|im_end|>``, ``<end_of_turn>``,
  ``</s>``…). Taken out, and the text after an end-of-turn marker with it (the model went
  on writing the next turn); the rest is shown. The only reason that leaves a reply usable.

`Sent.of(request)` takes what must not come back from the request the model answered;
`check(response, sent)` judges a reply as plain JSON data (what is stored and shown), and
`gate(parsed, sent)` applies the verdict to a ParsedReply.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any

from tutor.contract import ParsedReply, TutorResponse
from tutor.llm.markers import END_MARKERS, START_MARKERS
from tutor.llm.placeholders import is_placeholder
from tutor.text import words

__all__ = ["JUNK_FLAGS", "Sent", "Verdict", "check", "gate"]

# Every reason the gate names; all but template_token make a reply unusable.
JUNK_FLAGS = ("placeholder_text", "empty_text", "echoed_learner", "echoed_prompt", "echoed_app_text",
              "repeated_text", "template_token")

# A text copied from the prompt: a run of at least ECHO_RUN words the prompt has, and such
# runs make at least half of the text, or one run of LONG_ECHO_RUN words anywhere in it.
ECHO_RUN = 8
LONG_ECHO_RUN = 16
# The learner's message handed back: it has at least LEARNER_MIN_WORDS words, and runs of
# LEARNER_RUN of them make most of the text and most of the message (a heading "The 5-4-3-2-1
# exercise" answering "What's grounding? Something like 5-4-3-2-1?" is no echo).
LEARNER_MIN_WORDS = 4
LEARNER_RUN = 4
ECHO_SHARE = 0.5
LEARNER_SHARE = 0.7

# ------------------------------------------------------------------------------ markers

# The end-of-turn markers: one list, shared with the stop sequences (tutor.llm.markers).
_END_MARKERS = END_MARKERS
_TOKEN = re.compile(
    r"<\|[A-Za-z0-9_]{1,40}\|>|</?s>|<(?:start|end)_of_turn>|<(?:eos|bos|pad|unk)>|\[/?INST\]|<</?SYS>>"
)
# A start-of-turn marker is usually followed by the role's name on its own line (only there is
# a role word taken out: "the nervous<pad> system" keeps its word).
_ROLE_AFTER = re.compile(r"\s*(?:user|model|assistant|system)\b[ \t]*(?:<\|end_header_id\|>)?[ \t]*\n?",
                         re.IGNORECASE)


def _strip_tokens(text: str) -> str:
    """`text` without chat-template markers, cut at the first end-of-turn marker."""
    cut = min((i for i in (text.find(m) for m in _END_MARKERS) if i >= 0), default=-1)
    if cut >= 0:
        text = text[:cut]
    out, pos = [], 0
    for match in _TOKEN.finditer(text):
        out.append(text[pos:match.start()])
        pos = match.end()
        role = _ROLE_AFTER.match(text, pos) if match.group() in START_MARKERS else None
        if role is not None:
            pos = role.end()
    out.append(text[pos:])
    return "".join(out).strip()


# ------------------------------------------------------------------------------ repetition

_MAX_UNIT = 12  # words in a repeated unit
_MIN_REPEATS = 3
_MIN_REPEATED_WORDS = 12


def _loops(w: tuple[str, ...]) -> bool:
    """A unit of 1-12 words said three or more times in a row, 12 words or more in all (`w`:
    the text's words)."""
    n = len(w)
    if n < _MIN_REPEATED_WORDS:
        return False
    for unit in range(1, _MAX_UNIT + 1):
        needed = max(_MIN_REPEATS, -(-_MIN_REPEATED_WORDS // unit))
        # Position i (from `unit` on) is 1 where word i equals word i - unit; a loop is a run of
        # unit * (needed - 1) such positions in a row, found as a substring (in C, not word by word).
        same = bytes(map(operator.eq, w[unit:], w))
        if b"\x01" * (unit * (needed - 1)) in same:
            return True
    return False


# ------------------------------------------------------------------------------ echoes


def _grams(text: str, n: int) -> frozenset[tuple[str, ...]]:
    w = words(text)
    return frozenset(w[i:i + n] for i in range(len(w) - n + 1))


@functools.lru_cache(maxsize=64)
def _prompt_grams(prompt: str) -> frozenset[tuple[str, ...]]:
    return _grams(prompt, ECHO_RUN)


# Word runs of one or more texts (the prompt's shared part and this turn's), looked up in each.
Grams = tuple[frozenset[tuple[str, ...]], ...]


def _covered(text_words: tuple[str, ...], grams: Grams, n: int) -> tuple[int, int]:
    """(words of the text inside runs of `n` or more words found in `grams`, the longest run)."""
    runs = [text_words[i:i + n] for i in range(len(text_words) - n + 1)]
    found = set().union(*(s.intersection(runs) for s in grams))  # set operations in C: most texts find none
    if not found:
        return 0, 0
    covered = [False] * len(text_words)
    for i, run_words in enumerate(runs):
        if run_words in found:
            covered[i:i + n] = [True] * n
    longest = run = 0
    for c in covered:
        run = run + 1 if c else 0
        longest = max(longest, run)
    return sum(covered), longest


def _copied(w: tuple[str, ...], grams: Grams, n: int, share: float, long_run: int | None) -> bool:
    if len(w) < n or not any(grams):
        return False
    covered, longest = _covered(w, grams, n)
    return covered >= share * len(w) or (long_run is not None and longest >= long_run)


def _echoes_learner(w: tuple[str, ...], learner: str, grams: frozenset[tuple[str, ...]]) -> bool:
    if len(w) < LEARNER_RUN:
        return False
    covered, _ = _covered(w, (grams,), LEARNER_RUN)
    return covered >= LEARNER_SHARE * len(w) and covered >= LEARNER_SHARE * len(words(learner))


@functools.lru_cache(maxsize=1)
def _app_grams() -> frozenset[tuple[str, ...]]:
    """The app's own stand-in texts, in every language it speaks."""
    from tutor.i18n import available_languages, translator
    from tutor.llm import replies

    own = [replies.APOLOGY_TEXT, replies.DEADLINE_TEXT, replies.STOPPED_TEXT, replies.BUDGET_TEXT,
           replies.ENGINE_ERROR_TEXT]
    grams: set[tuple[str, ...]] = set()
    for language in available_languages():
        t = translator(language)
        for text in own:
            grams |= _grams(t(text), ECHO_RUN)
    return frozenset(grams)


# ------------------------------------------------------------------------------ the gate


@dataclass(frozen=True)
class Sent:
    """What the model was sent that it must not hand back as its reply."""

    learner: str = ""  # the learner's message (or the opening-turn note)
    prompt: str = ""  # the instructions, without the material a reply may quote
    # The instructions' part that every turn of a module shares (the system message's
    # `cached_prefix`), kept apart so its word runs are found once, not on every turn.
    stable: str = ""

    @classmethod
    def of(cls, request: Any) -> Sent:
        """From a CompletionRequest: its system text without the module's material (passages,
        titles, check questions, the judge's feedback, from its TurnContext) and its last
        user message."""
        messages = list(getattr(request, "messages", None) or ())
        stable, rest = [], []
        for m in messages:
            if m.role == "system":
                cut = m.cached_prefix
                if cut:
                    stable.append(m.content[:cut])
                rest.append(m.content[cut:])
        learner = next((m.content for m in reversed(messages) if m.role == "user"), "")
        shared, system = "\n\n".join(stable), "\n\n".join(rest)
        for quotable in sorted(_quotable(getattr(request, "context", None)), key=len, reverse=True):
            shared, system = shared.replace(quotable, "\n"), system.replace(quotable, "\n")
        return cls(learner=learner, prompt=system, stable=shared)


def _quotable(context: Any) -> set[str]:
    """Texts of the module a reply may repeat word for word (duck-typed: no content import)."""
    if context is None:
        return set()
    found: set[str] = set()
    module = getattr(context, "module", None)
    if module is not None:
        found |= {getattr(module, "title", ""), (getattr(module, "description", "") or "").strip()}
        for phase in getattr(module, "phases", ()):
            found.add(phase.title)
            for section in phase.sections:
                found.add(section.title)
                found |= {topic.title for topic in section.topics}
    teaching = getattr(context, "teaching", None)
    if teaching is not None:
        found |= {p.text.strip() for p in teaching.passages}
        for item in (teaching.judged, teaching.ask):
            if item is not None:
                found |= {item.question, item.topic_title, getattr(item, "feedback", "")}
    return {text for text in found if text and len(text) > 3}


@dataclass(frozen=True)
class Verdict:
    response: dict[str, Any]  # the reply as JSON data, template tokens taken out (a copy then; else the one given)
    flags: list[str] = field(default_factory=list)  # one per reason, JUNK_FLAGS order
    problems: list[str] = field(default_factory=list)  # "path: what is wrong", for the re-ask

    @property
    def usable(self) -> bool:
        return not self.problems


def _texts(data: dict[str, Any]) -> Iterator[tuple[str, dict | list, str | int, bool]]:
    """(path, container, key, is a free-form hint) of every text the learner sees."""
    content = data.get("content") or {}
    for i, block in enumerate(content.get("text_blocks") or ()):
        yield f"content.text_blocks[{i}].content", block, "content", False
    step = content.get("next_step") or {}
    if isinstance(step.get("prompt"), str):
        yield "content.next_step.prompt", step, "prompt", False
    for i, _ in enumerate(step.get("suggestions") or ()):
        yield f"content.next_step.suggestions[{i}]", step["suggestions"], i, False
    for f, form in enumerate(content.get("forms") or ()):
        where = f"content.forms[{f}]"
        for key in ("title", "description", "submit_label"):
            if isinstance(form.get(key), str):
                yield f"{where}.{key}", form, key, False
        for j, fld in enumerate(form.get("fields") or ()):
            yield f"{where}.fields[{j}].label", fld, "label", False
            for key in ("placeholder", "help_text"):
                if isinstance(fld.get(key), str):
                    yield f"{where}.fields[{j}].{key}", fld, key, key == "placeholder"
            for k, option in enumerate(fld.get("options") or ()):
                yield f"{where}.fields[{j}].options[{k}].label", option, "label", False
    for m, media in enumerate(content.get("media") or ()):
        for key in ("alt", "caption"):
            if isinstance(media.get(key), str):
                yield f"content.media[{m}].{key}", media, key, True
    for c, citation in enumerate(content.get("citations") or ()):
        yield f"content.citations[{c}].quote", citation, "quote", False


def check(response: dict[str, Any], sent: Sent | None = None) -> Verdict:
    """Judge a reply given as JSON data (`TutorResponse.to_json_dict()`, or a stored one)."""
    import copy

    sent = sent or Sent()
    # Copied only when a template token is to be taken out: copying every reply was ~4% of a
    # busy worker's interpreter time, and most replies hold none.
    tokened = any(isinstance(c[k], str) and _TOKEN.search(c[k]) for _, c, k, _ in _texts(response))  # type: ignore[index]
    data = copy.deepcopy(response) if tokened else response
    found: dict[str, list[str]] = {}

    def flag(name: str, path: str, why: str) -> None:
        found.setdefault(name, []).append(f"{path}: {why}")

    prompt_grams = (_prompt_grams(sent.stable), _grams(sent.prompt, ECHO_RUN))
    learner_grams = _grams(sent.learner, LEARNER_RUN) if len(words(sent.learner)) >= LEARNER_MIN_WORDS \
        else frozenset()
    app_grams = (_app_grams(),)
    seen_blocks: set[tuple[str, ...]] = set()
    seen_suggestions: set[tuple[str, ...]] = set()
    for path, container, key, hint in _texts(data):
        text = container[key]  # type: ignore[index]
        if not isinstance(text, str):
            continue
        clean = _strip_tokens(text) if _TOKEN.search(text) else text
        if clean != text:
            container[key] = clean  # type: ignore[index]
            found.setdefault("template_token", [])  # stripped, not a problem by itself
        if not clean.strip():
            if not hint:
                flag("empty_text", path, "this text is empty; write what the learner should read")
            continue
        if hint:
            continue  # an input's placeholder or a media caption may be brief or a pattern
        if is_placeholder(clean):
            flag("placeholder_text", path, f"{clean[:40]!r} is a placeholder, not text for the learner: "
                                           "write the real words")
            continue
        key_words = words(clean)
        if learner_grams and _echoes_learner(key_words, sent.learner, learner_grams):
            flag("echoed_learner", path, "this repeats the learner's message; answer it instead")
        elif _copied(key_words, app_grams, ECHO_RUN, ECHO_SHARE, LONG_ECHO_RUN):
            flag("echoed_app_text", path, "this copies the app's own apology; write your own reply")
        elif _copied(key_words, prompt_grams, ECHO_RUN, ECHO_SHARE, LONG_ECHO_RUN):
            flag("echoed_prompt", path, "this copies your instructions; write to the learner in your own words")
        if _loops(key_words):
            flag("repeated_text", path, "this text repeats itself; say each thing once")
        if path.startswith("content.text_blocks"):
            if key_words in seen_blocks:
                flag("repeated_text", path, "the same text block is written twice")
            seen_blocks.add(key_words)
        elif ".suggestions[" in path:
            if key_words in seen_suggestions:
                flag("repeated_text", path, "the same suggestion is written twice")
            seen_suggestions.add(key_words)
    flags = [name for name in JUNK_FLAGS if name in found]
    problems = [p for name in JUNK_FLAGS for p in found.get(name, ())]
    return Verdict(data, flags, problems)


def gate(parsed: ParsedReply, sent: Sent | None = None) -> tuple[ParsedReply, Verdict | None]:
    """`parsed` with template tokens taken out (flagged, ``repaired``) when that is all; the
    verdict says whether it is usable. A reply with nothing parsed is left as it is."""
    if parsed.response is None:
        return parsed, None
    verdict = check(parsed.response.to_json_dict(), sent)
    if not verdict.flags:
        return parsed, verdict
    flags = [*parsed.flags, *(f for f in verdict.flags if f not in parsed.flags)]
    if "template_token" not in verdict.flags:
        return replace(parsed, flags=flags), verdict
    response = TutorResponse.model_validate(verdict.response)
    outcome = "repaired" if parsed.outcome == "valid" else parsed.outcome
    return replace(parsed, outcome=outcome, response=response, flags=flags), verdict
