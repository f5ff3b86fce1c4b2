"""Learner text as words the screen can match, each tied to its span in the original text.

The screen never matches the original string: it matches a folded copy, one word per token,
separated by single spaces (" i dont want to live | "). Every token keeps the [start, end)
of the characters it came from, so evidence always points into the text the learner wrote.

Folding, per word: zero-width and other invisible characters are dropped, apostrophe
variants inside a word are dropped (don't, don’t, don´t -> dont), then tutor.text.normalize
(NFKD, combining marks dropped, case folded: "Ｋｉｌｌ", "KILL", "k̸i̸l̸l̸" -> kill).
Sentence punctuation (. ! ? ; : , and line breaks) becomes a boundary token "|" that no
phrase matches across; "..." typed as a pause is not a boundary.

Each word also keeps its "marked" form (NFKC, case folded, diacritics kept) when folding
removed diacritics, so that a Vietnamese phrase written with marks ("tự tử") matches a
word typed without them ("tu tu") but not a word typed with other marks ("từ từ").
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate
from typing import NamedTuple

from tutor.text import words

__all__ = ["BOUNDARY", "IGNORABLE", "Token", "TokenizedText", "fold_word", "marked_form", "tokenize"]

BOUNDARY = "|"
# Invisible characters that people (and attackers) put inside words: soft hyphen, zero-width
# space/joiners, word joiner, bidi controls, variation selectors, byte-order mark.
IGNORABLE = ("\u00ad\u034f\u061c\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u2064"
             "\u2066-\u206f\ufe00-\ufe0f\ufeff")
_IGNORABLE_RE = re.compile(f"[{IGNORABLE}]")
# Combining marks that may follow a letter (NFD text, zalgo); NFKD folding drops them.
_MARKS = "\u0300-\u036f\u0483-\u0489\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f"
APOSTROPHES = "'\u2019\u2018\u02bc`\u00b4\u2032\u02b9\uff07"
_APOSTROPHE_RE = re.compile(f"[{APOSTROPHES}]")
_TOKEN = re.compile(
    rf"(?P<w>[^\W_](?:[^\W_]|[{_MARKS}{IGNORABLE}]|[{APOSTROPHES}](?=[^\W_]))*)"
    r"|(?P<b>[.!?;:,\n\r\u2026\u3002\uff01\uff1f\uff0c]+)"
)


class Token(NamedTuple):
    fold: str  # folded word, or BOUNDARY
    start: int  # [start, end) in the original text
    end: int
    marked: str | None = None  # the word with its diacritics, when folding removed some


@dataclass(frozen=True, slots=True)
class TokenizedText:
    """Parallel tuples (a 4000-character message has ~900 tokens: no object per token)."""

    folds: tuple[str, ...]
    spans: tuple[tuple[int, int], ...]  # [start, end) of each token in the original text
    marked: tuple[str | None, ...]
    joined: str  # " " + folds joined by " " + " "
    starts: tuple[int, ...]  # offset of each token in `joined`

    @property
    def tokens(self) -> list[Token]:
        return [Token(f, s, e, m) for f, (s, e), m in zip(self.folds, self.spans, self.marked)]

    def token_at(self, offset: int) -> int:
        """Index of the token that starts at or covers `offset` in `joined`."""
        return bisect_right(self.starts, offset) - 1


def _clean(word: str) -> str:
    if not word.isascii():
        word = _IGNORABLE_RE.sub("", word)
    return _APOSTROPHE_RE.sub("", word)


def fold_word(word: str) -> tuple[str, ...]:
    """One written word -> its folded word(s); usually one, none for a lone mark."""
    cleaned = _clean(word)
    if cleaned.isascii():
        return (cleaned.lower(),) if cleaned.isalnum() else words(cleaned)
    return words(cleaned)


def marked_form(word: str) -> str:
    """The word with its diacritics, comparable however it was typed (NFC or NFD, any case,
    full-width letters)."""
    return unicodedata.normalize("NFKC", _clean(word)).casefold()


@lru_cache(maxsize=16384)
def _fold_token(word: str) -> tuple[tuple[str, ...], str | None]:
    folds = fold_word(word)
    marked = None
    if len(folds) == 1 and not word.isascii():
        form = marked_form(word)
        marked = form if form != folds[0] else None
    return folds, marked


def tokenize(text: str) -> TokenizedText:
    folds: list[str] = []
    spans: list[tuple[int, int]] = []
    marks: list[str | None] = []
    for match in _TOKEN.finditer(text):
        word = match.group("w")
        if word is None:
            run = match.group()
            if run.strip(".\u2026") == "" and (len(run) > 1 or run == "\u2026"):
                continue  # "I just want to... stop": a pause, not the end of a sentence
            if folds and folds[-1] == BOUNDARY:
                continue
            folds.append(BOUNDARY)
            spans.append(match.span())
            marks.append(None)
        elif word.isascii() and word.isalnum():  # the common case, kept cheap
            folds.append(word.lower())
            spans.append(match.span())
            marks.append(None)
        else:
            found, marked = _fold_token(word)
            for fold in found:
                folds.append(fold)
                spans.append(match.span())
                marks.append(marked)
    starts = [0, *accumulate(len(f) + 1 for f in folds)]
    starts.pop()
    joined = " " + " ".join(folds) + " " if folds else " "
    return TokenizedText(tuple(folds), tuple(spans), tuple(marks), joined, tuple(s + 1 for s in starts))
