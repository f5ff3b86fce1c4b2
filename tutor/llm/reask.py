"""Judging what one model call produced, and asking again when it is unusable.

`classify` says whether a completion is usable and, if not, why (refusal, empty, invalid,
truncated — a reply our repetition watcher cut counts as truncated, unless dropping its
repeated blocks leaves an honest reply — or unusable: parsed, but its text is placeholders,
an echo or a loop, by the content gate in tutor.llm.usable). `build_reask` writes attempt 2: temperature 0, the
system text and the last exchange, and the problems, riding on the learner's last message
so that roles keep alternating.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from tutor.contract import ParsedReply, parse
from tutor.llm.base import ChatMessage, Completion, CompletionRequest
from tutor.llm.config import LLMSettings
from tutor.llm.errors import LLMError
from tutor.llm.replies import looks_like_refusal
from tutor.llm.usable import Sent, gate
from tutor.llm.watch import RepetitionWatcher

__all__ = ["MAX_REASK_ERRORS", "Tried", "build_reask", "classify", "errors_of", "shorten_history"]

MAX_REASK_ERRORS = 8


@dataclass
class Tried:
    """What one policy attempt (with its transport retries) produced."""

    completion: Completion | None = None
    parsed: ParsedReply | None = None
    error: LLMError | None = None
    problem: str | None = None  # why the reply is unusable: refusal | empty | invalid | truncated | unusable
    junk: list[str] = field(default_factory=list)  # the content gate's reasons (problem "unusable")
    junk_errors: list[str] = field(default_factory=list)  # and what is wrong where, for the re-ask

    @property
    def usable(self) -> bool:
        return self.problem is None and self.parsed is not None

    @property
    def showable(self) -> bool:
        """Has text worth showing as markdown (not empty, not a refusal)."""
        return self.problem in ("invalid", "truncated") and bool(self.completion and self.completion.text.strip())


def build_reask(request: CompletionRequest, failed: Tried | Completion, settings: LLMSettings,
                errors: list[str] | None = None) -> CompletionRequest:
    """Attempt 2: temperature 0, system + last exchange, and a note on what went wrong."""
    if isinstance(failed, Completion):
        failed = classify(failed, Sent.of(request))
    errors = list(errors if errors is not None else errors_of(failed))
    raw = failed.completion.text if failed.completion else ""
    # A looping reply is quoted only as far as needed to show the start of the loop.
    limit = settings.reask_output_chars
    if failed.completion is not None and failed.completion.finish_reason == "repetition":
        limit = min(limit, 400)
    quoted = raw[:limit]
    cut = " (cut short here)" if len(raw) > len(quoted) else ""
    lines = ["Your previous reply could not be shown to the learner. Problems:"]
    lines += [f"- {e[:200]}" for e in errors[:MAX_REASK_ERRORS]]
    if quoted.strip():
        lines += ["", f"Your previous reply{cut}:", "<<<", quoted, ">>>"]
    lines += [
        "",
        "Write your reply again as exactly ONE JSON object that follows the response format in "
        "the system message: no text before or after it, no code fences.",
    ]
    return replace(request, messages=_with_note(shorten_history(request.messages), "\n".join(lines)),
                   temperature=0.0)


def _with_note(messages: list[ChatMessage], note: str) -> list[ChatMessage]:
    """Add the re-ask note to the last user message, so roles keep alternating (chat
    templates such as Mistral's refuse two user messages in a row)."""
    if messages and messages[-1].role == "user":
        last = messages[-1]
        return [*messages[:-1], ChatMessage("user", f"{last.content}\n\n---\n{note}")]
    return [*messages, ChatMessage("user", note)]


def shorten_history(messages: list[ChatMessage]) -> list[ChatMessage]:
    """System messages, then the last user turn with the exchange before it (if any)."""
    system = [m for m in messages if m.role == "system"]
    rest = [m for m in messages if m.role != "system"]
    last_user = max((i for i, m in enumerate(rest) if m.role == "user"), default=None)
    if last_user is None:
        return system
    start = last_user
    if last_user >= 2 and rest[last_user - 1].role == "assistant" and rest[last_user - 2].role == "user":
        start = last_user - 2
    return system + rest[start : last_user + 1]


def errors_of(t: Tried) -> list[str]:
    if t.problem == "refusal":
        return ["the reply was a refusal, not the JSON object the learner needs"]
    if t.problem == "empty":
        return ["the reply was empty"]
    if t.problem == "unusable":
        return list(t.junk_errors) or ["the reply has no real text for the learner"]
    errors = list(t.parsed.errors) if t.parsed else []
    if t.completion and t.completion.finish_reason == "repetition":
        errors.insert(0, "the reply started repeating itself and was cut off: write each text block "
                         "once, keep it short, and close the JSON object")
    elif t.completion and t.completion.finish_reason == "length":
        errors.insert(0, "the reply was cut off at the length limit: write a shorter reply "
                         "(fewer, shorter text blocks; a form only if needed)")
    return errors or ["the reply is not one JSON object matching the response format"]


def classify(completion: Completion, sent: Sent | None = None) -> Tried:
    """`sent`: what the model was sent (its instructions, the learner's message), which a
    usable reply does not hand back."""
    text = completion.text
    # A reply cut by the watcher is as unfinished as one cut at the token limit.
    cut = "length" if completion.finish_reason in ("repetition", "stopped") else completion.finish_reason
    parsed = parse(text, finish_reason=cut)
    if completion.refusal or completion.finish_reason in ("refusal", "content_filter"):
        return Tried(completion, parsed, problem="refusal")
    if not text.strip():
        return Tried(completion, parsed, problem="empty")
    if parsed.outcome in ("valid", "repaired") and parsed.response is not None:
        tried = _after_repetition(completion, parsed) if completion.finish_reason == "repetition" \
            else Tried(completion, parsed)
        return _gated(tried, sent)
    if looks_like_refusal(text):
        return Tried(completion, parsed, problem="refusal")
    cut = completion.finish_reason in ("length", "repetition")
    return Tried(completion, parsed, problem="truncated" if cut else "invalid")


def _after_repetition(completion: Completion, parsed: ParsedReply) -> Tried:
    """A reply cut for looping: its repeated blocks are dropped (nothing is invented, each
    block is kept once); if what is left still loops, it is unusable and re-asked."""
    response = parsed.response
    assert response is not None
    seen: set[tuple[str, str]] = set()
    blocks = []
    for block in response.content.text_blocks:
        key = (block.type, " ".join(block.content.split()))
        if key not in seen:
            seen.add(key)
            blocks.append(block)
    kept = response.model_copy(deep=True)
    kept.content.text_blocks = blocks
    if any(RepetitionWatcher().feed(block.content) for block in blocks):  # a loop inside a text
        return Tried(completion, parsed, problem="truncated")
    return Tried(completion, replace(parsed, response=kept, outcome="repaired"))


def _gated(tried: Tried, sent: Sent | None) -> Tried:
    """A parsed reply through the content gate: unusable when its text is junk."""
    if tried.parsed is None or tried.problem is not None:
        return tried
    parsed, verdict = gate(tried.parsed, sent)
    if verdict is None or verdict.usable:
        return replace(tried, parsed=parsed)
    return replace(tried, parsed=parsed, problem="unusable", junk=[f for f in verdict.flags if f != "template_token"],
                   junk_errors=verdict.problems)
