"""What a learner's message is, for teaching: an answer to the open check, a question, a
request to skip, retry or move on, or something they shared.

The rule a tutor follows: free text right after a check question is the learner's answer,
unless it plainly is something else: a question (it has a question mark), a short request
to move on or skip ("Continue", "Next: ...", "Tell me more", "Skip this check"), or to try
again ("Try again"). Short means at most SHORT_WORDS words: "Yes, because it gets you
ready for what might go wrong" is an answer that happens to start with "yes".
"""

from __future__ import annotations

import re

from tutor.text import words

__all__ = ["RETRY_REPLY", "SHORT_WORDS", "SKIP_REPLY", "SUMMARY_REPLY", "asks", "classify"]

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


# What makes a message a question or a request for teaching, besides a question mark, in words
# folded to plain letters: a question word anywhere, an auxiliary that opens it ("is it
# normal"), a request ("tell me", "explain"); in Vietnamese a question word, or a final
# particle ("... có sao không", "... được chưa", "... hả").
_ASKING = frozenset("""what whats why how hows when where who whom whose which wonder explain tell meaning mean
confused understand sao gi nao dau ai bao hieu giai nghia thich""".split())
_OPENING = frozenset("""is are was were do does did can could should would will am isnt arent doesnt dont didnt
cant couldnt shouldnt wouldnt has have hasnt havent may might must co""".split())
_CLOSING = frozenset("khong ko k hong chua ha hả nhi nhe a ak ah vay the".split())


def asks(text: str) -> bool:
    """The message is worded as a question or a request for teaching ("why do I wake at 3am",
    "is it normal to dream every night", "before I answer, does everyone...", "ngủ trưa có sao không", "explain the cycle"); a
    bare claim or phrase is not ("same wake-up time every day", "đi ngủ sớm")."""
    raw = text or ""
    if "?" in raw or "\uff1f" in raw:
        return True
    found = words(raw)
    if not found:
        return False
    opening = {clause[0] for clause in map(words, re.split(r"[,;:.!\n]", raw)) if clause}
    return bool(set(found) & _ASKING or opening & _OPENING) or found[-1] in _CLOSING


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
