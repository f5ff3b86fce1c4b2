"""The honesty guard: an accepted reply shows only text the model actually wrote.

Repair tools guess. A guess that produces a string the raw reply never contained (two
fragments glued together, a quote turned into a key, a default sentence) must not reach a
learner. Every string value of a repaired reply is therefore looked up in the raw text,
after the same normalisation on both sides: JSON escapes decoded (up to twice, for
double-encoded replies), invisible characters dropped, whitespace runs collapsed.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

__all__ = ["Haystack", "dishonest_strings", "fix_surrogates", "normalize"]

# Values of these keys are vocabulary checked by the schema (enums), not learner-facing
# prose; coercion may set them (a defaulted response_type, "50" -> "50%").
VOCABULARY_KEYS = frozenset({"type", "response_type", "emotion", "milestone"})

_WS = re.compile(r"\s+")
_INVISIBLE = re.compile("[\ufeff\u200b\u2060\u180e]")
_ESCAPES = re.compile(r"\\(u[0-9a-fA-F]{4}|[\"\\/bfnrt'])")
_SURROGATE = re.compile("[\ud800-\udfff]")
_SIMPLE = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "'": "'"}


def normalize(text: str) -> str:
    return _WS.sub(" ", _INVISIBLE.sub("", text)).strip()


def unescape(text: str) -> str:
    """Decode JSON string escapes leniently (unknown escapes stay as written)."""
    if "\\" not in text:
        return text

    def one(m: re.Match[str]) -> str:
        esc = m.group(1)
        return chr(int(esc[1:], 16)) if len(esc) == 5 else _SIMPLE[esc]

    return fix_surrogates(_ESCAPES.sub(one, text))


def fix_surrogates(text: str) -> str:
    """Join surrogate pairs (``\\ud83c\\udf89`` decoded one by one) into the real
    character; a lone half, which no UTF-8 text can hold, becomes U+FFFD."""
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


class Haystack:
    """The raw reply in its normalised forms, built lazily (most lookups hit the first)."""

    def __init__(self, raw: str) -> None:
        self._raw = raw
        self._forms: list[str] = []

    def _form(self, level: int) -> str | None:
        while len(self._forms) <= level:
            if not self._forms:
                self._forms.append(normalize(self._raw))
                self._last = self._raw
            else:
                nxt = unescape(self._last)
                if nxt == self._last:
                    return None
                self._last = nxt
                self._forms.append(normalize(nxt))
        return self._forms[level]

    def __contains__(self, needle: str) -> bool:
        if needle in self._raw:  # most strings appear verbatim; skip normalising
            return True
        needle = normalize(needle)
        if not needle:
            return True
        for level in range(3):
            form = self._form(level)
            if form is None:
                return False
            if needle in form:
                return True
        return False


def _strings(value: object, path: tuple) -> Iterator[tuple[tuple, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key in VOCABULARY_KEYS and isinstance(item, str):
                continue
            yield from _strings(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, (*path, i))


def dishonest_strings(data: dict, raw: str | Haystack, synthesized: set[tuple] = frozenset()) -> list[str]:
    """Paths of string values in ``data`` that do not occur in the raw text."""
    hay = raw if isinstance(raw, Haystack) else Haystack(raw)
    bad: list[str] = []
    for path, text in _strings(data, ()):
        if path in synthesized:
            continue
        if text not in hay:
            bad.append(".".join(str(p) for p in path))
    return bad
