"""What a learner's message is, for teaching: an answer to the open check, a question, a
request to skip, retry or move on, or something they shared.

The rule a tutor follows: free text right after a check question is the learner's answer,
unless it plainly is something else: a question (it has a question mark), a short request
to move on or skip ("Continue", "Next: ...", "Tell me more", "Skip this check"), or to try
again ("Try again"). Short means at most SHORT_WORDS words: "Yes, because it gets you
ready for what might go wrong" is an answer that happens to start with "yes".
"""

from __future__ import annotations

from tutor.text import words

__all__ = ["RETRY_REPLY", "SHORT_WORDS", "SKIP_REPLY", "SUMMARY_REPLY", "classify"]

SHORT_WORDS = 8
SKIP_REPLY = "Skip this check"
RETRY_REPLY = "Try again"
SUMMARY_REPLY = "Show me a summary"

_SKIP_FIRST = frozenset("skip pass later".split())
_SKIP_PHRASES = ("not now", "maybe later", "move on", "no thanks", "bo qua")
_RETRY_PHRASES = ("try again", "another go", "another try", "one more try", "let me try", "retry", "again please",
                  "ask me again", "thu lai")
_MOVING_FIRST = frozenset("""continue next ok okay sure go ready done tell show explain review more teach
keep lets let carry proceed thanks thank tiep ke xem""".split())  # Vietnamese: tiếp, kể, xem (folded)


def classify(text: str | None, *, check_open: bool) -> str:
    """One of: question, skip, retry, summary, navigate, answer (only when `check_open`),
    other."""
    raw = text or ""
    found = words(raw)
    phrase = " ".join(found)
    short = len(found) <= SHORT_WORDS
    if "?" in raw or "\uff1f" in raw:
        return "question"
    if short and (found[:1] and found[0] in _SKIP_FIRST or any(p in phrase for p in _SKIP_PHRASES)):
        return "skip"
    if short and any(f" {p} " in f" {phrase} " for p in _RETRY_PHRASES):
        return "retry"
    if short and ("summary" in found or " tom tat " in f" {phrase} "):  # "tóm tắt"
        return "summary"
    if short and found[:1] and found[0] in _MOVING_FIRST:
        return "navigate"
    if not found:
        return "navigate"
    return "answer" if check_open else "other"
