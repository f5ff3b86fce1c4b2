"""How a turn ends without a usable reply (tutor.llm.policy): what a reply cut short by
Stop, the deadline or a broken stream keeps of its text, and failing closed (the raw text
worth showing, else a calm apology), with the flags that say why: `cut` keeps what a reply
cut short had, `fallback` fails closed, `cut_short` says which replies are never re-asked."""

from __future__ import annotations

from dataclasses import replace

from tutor.contract import ParsedReply, TutorResponse, parse
from tutor.contract.partial import preview
from tutor.llm.errors import DeadlineExceeded
from tutor.llm.reask import Tried
from tutor.llm.replies import APOLOGY_TEXT, DEADLINE_TEXT, STOPPED_TEXT, apology_response
from tutor.llm.usable import Sent, gate


def with_flags(parsed: ParsedReply, *extra: str) -> ParsedReply:
    flags = list(parsed.flags)
    flags += [f for f in extra if f and f not in flags]
    return replace(parsed, flags=flags)


def truncated(t: Tried) -> list[str]:
    """A reply cut at the token limit (or for repeating itself) keeps saying so, even when
    its repair was accepted."""
    reason = t.completion.finish_reason if t.completion is not None else None
    return {"length": ["truncated"], "repetition": ["repetition"]}.get(reason or "", [])


def repeated(t: Tried) -> list[str]:
    return ["repetition"] if t.completion is not None and t.completion.finish_reason == "repetition" else []


def cut_short(t: Tried) -> bool:
    """Ended by the learner's Stop, the deadline or a broken stream: never re-asked."""
    return t.completion is not None and t.completion.finish_reason in ("stopped", "deadline", "interrupted")

def cut(t: Tried, tries: list[Tried], suggestion: str | None, *extra: str, sent: Sent | None = None) -> ParsedReply:
    """A reply cut short (Stop, the deadline) keeps what was honestly recovered of the text
    so far: the contract's ladder, else the text blocks a preview could read. With nothing
    to keep, Stop says so calmly and the deadline fails closed (`tries`, newest first)."""
    assert t.completion is not None
    reason, raw = t.completion.finish_reason or "stopped", t.completion.text
    # What is kept passes the content gate too (tutor.llm.usable): junk is never kept.
    parsed, verdict = gate(parse(raw, finish_reason="length"), sent)  # as unfinished as a reply cut at the limit
    if parsed.response is not None and parsed.outcome != "invalid" and verdict is not None and verdict.usable:
        return with_flags(parsed, *extra, reason)
    junk = list(verdict.flags) if verdict is not None else []
    blocks = [{"type": b.type, "content": b.content, **({"level": b.level} if b.level else {})}
              for b in preview(raw).blocks if b.content.strip()]
    if blocks:
        response = TutorResponse.model_validate(
            {"content": {"text_blocks": blocks}, "meta": {"response_type": "conversational"}})
        kept, verdict = gate(ParsedReply("repaired", response, [*extra, "partial", reason], [], raw), sent)
        if verdict is not None and verdict.usable:
            return kept
        junk += verdict.flags if verdict is not None else []
    extra = (*extra, *dict.fromkeys(f for f in junk if f != "template_token"))
    if reason == "deadline":
        return fallback(tries, suggestion, *extra, "deadline")
    if reason == "interrupted":
        return fallback(tries, suggestion, *extra, "interrupted", "transport_error")
    response = apology_response(STOPPED_TEXT)
    response.meta.response_type = "conversational"
    return ParsedReply("invalid", response, [*extra, "stopped"], ["stopped before any text"], raw)


def _went_wrong(t: Tried) -> str | None:
    if cut_short(t):
        return "transport_error" if t.completion.finish_reason == "interrupted" else "deadline"  # type: ignore[union-attr]
    if isinstance(t.error, DeadlineExceeded):
        return "deadline"
    return t.problem or (t.error and "transport_error")


def fallback(tries: list[Tried], suggestion: str | None, *extra: str) -> ParsedReply:
    """Fail closed: raw text as markdown when there is some worth showing (never a reply
    the deadline cut: its readable part was already kept), else an apology."""
    for t in tries:  # newest first
        if t.showable and t.parsed is not None and not cut_short(t):
            return with_flags(t.parsed, *truncated(t), *extra, "needs_review")
    raw = next((t.completion.text for t in tries if t.completion and t.completion.text.strip()), "")
    late = "deadline" in extra
    reasons = [p for t in tries if (p := _went_wrong(t))]
    errors = [f"no usable reply: {', '.join(dict.fromkeys(reasons)) or 'transport error'}"]
    flags = ["refusal"] if "refusal" in reasons else []
    flags += [f for t in tries for f in t.junk]  # the content gate's reasons (tutor.llm.usable)
    apology = ParsedReply("invalid", apology_response(DEADLINE_TEXT if late else APOLOGY_TEXT, suggestion),
                          [], errors, raw)
    return with_flags(apology, *flags, *extra, "needs_review", "fallback_apology")
