"""Whole-word phrase matching for rubric key points, ignoring case and accents.

A phrase matches its words in order in the answer, with at most one other word between
two of them ("put off" matches "put things off", "not dangerous" matches "not really
dangerous"). A word of a phrase may end in ``*`` to accept any ending ("breath*" matches
breath, breathe, breathing); otherwise a plural "s" is the only ending ignored.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from tutor.text import words

__all__ = ["MAX_GAP", "AnswerText", "Pattern", "compile_phrase"]

MAX_GAP = 1  # other words allowed between two words of a phrase

_TOKEN_END = re.compile(r"[^\w*]+$")


# Number words are their digits: "1", "one" and "một" are the same key point. Vietnamese
# number words that are also other words once accents are folded ("năm" year, "sáu"/"sau"
# after, "bảy"/"bay" fly, "tám"/"tâm" mind, "ba" father) are read only with their accents.
_NUMBERS = {w: str(i) for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve"
                                             .split())}
_NUMBERS |= {"mot": "1", "hai": "2", "chin": "9", "muoi": "10", "hundred": "100", "tram": "100"}
_ACCENTED_NUMBERS = {"bốn": "4", "năm": "5", "sáu": "6", "bảy": "7", "tám": "8"}
_ACCENTED = re.compile(r"(?<!\w)(" + "|".join(_ACCENTED_NUMBERS) + r")(?!\w)", re.IGNORECASE)


def _digits(text: str) -> str:
    """Accented Vietnamese number words as digits, before accents are folded away."""
    return _ACCENTED.sub(lambda m: _ACCENTED_NUMBERS[m.group(1).lower()], text)


def _fold(word: str) -> str:
    """A plural 's' is not a different word ("muscles" = "muscle"); short words keep theirs;
    a number word is its digits."""
    if word in _NUMBERS:
        return _NUMBERS[word]
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


@dataclass(frozen=True)
class Pattern:
    words: tuple[str, ...]
    prefix: tuple[bool, ...]  # the word ended in '*': any word starting with it matches

    def __bool__(self) -> bool:
        return bool(self.words)


@lru_cache(maxsize=4096)
def compile_phrase(phrase: str) -> Pattern:
    out: list[str] = []
    prefix: list[bool] = []
    for token in _digits(phrase).split():
        parts = words(token)
        if not parts:
            continue
        wildcard = _TOKEN_END.sub("", token).endswith("*")
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            out.append(part if wildcard and last else _fold(part))
            prefix.append(wildcard and last)
    return Pattern(tuple(out), tuple(prefix))


class AnswerText:
    """An answer split into folded words, with a position index for fast phrase lookups."""

    def __init__(self, text: str) -> None:
        self.raw = words(_digits(text))
        self.words = tuple(_fold(w) for w in self.raw)
        self.positions: dict[str, list[int]] = {}
        for i, word in enumerate(self.words):
            self.positions.setdefault(word, []).append(i)

    def __len__(self) -> int:
        return len(self.words)

    def _starts(self, first: str, prefix: bool) -> list[int]:
        if not prefix:
            return self.positions.get(first, [])
        return sorted(i for word, at in self.positions.items() if word.startswith(first) for i in at)

    def find(self, pattern: Pattern, gap: int = MAX_GAP) -> list[tuple[int, int]]:
        """(start, end) word spans where the pattern occurs, left to right, with at most
        `gap` other words between two of its words."""
        if not pattern:
            return []
        spans = []
        for start in self._starts(pattern.words[0], pattern.prefix[0]):
            at = start
            for j in range(1, len(pattern.words)):
                # the next word of the phrase, right after the last one or one word later
                at = next((i for i in range(at + 1, at + 2 + gap) if self._is(i, pattern, j)), -1)
                if at < 0:
                    break
            if at >= 0:
                spans.append((start, at + 1))
        return spans

    def _is(self, i: int, pattern: Pattern, j: int) -> bool:
        if i >= len(self.words):
            return False
        word = self.words[i]
        return word.startswith(pattern.words[j]) if pattern.prefix[j] else word == pattern.words[j]

    def contains_any(self, phrases: Sequence[str]) -> bool:
        return any(self.find(compile_phrase(p)) for p in phrases)
