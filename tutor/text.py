"""Text rules shared by modules, progress and prompts: folding case and diacritics, whole
words, and `{{variable}}` placeholders. A leaf module: it imports nothing of ours, so the
modules that use it never import each other for it."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping

__all__ = ["PLACEHOLDER", "normalize", "unresolved_variables", "words"]

# Letters that NFKD does not decompose but that learners routinely type without the mark.
_FOLD = str.maketrans({"đ": "d", "Đ": "d", "ð": "d", "Ð": "d", "ø": "o", "Ø": "o", "ł": "l",
                       "Ł": "l", "æ": "ae", "Æ": "ae", "œ": "oe", "Œ": "oe", "ı": "i"})
# Letters and digits; underscores and punctuation separate words ("fight-or-flight").
_WORD = re.compile(r"[^\W_]+")
PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def normalize(text: str) -> str:
    """Fold case and diacritics: NFKD, drop combining marks, casefold."""
    if text.isascii():  # nothing to decompose or fold (most English text: 10x faster)
        return text.casefold()
    decomposed = unicodedata.normalize("NFKD", text.translate(_FOLD))
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()


def words(text: str) -> tuple[str, ...]:
    return tuple(_WORD.findall(normalize(text)))


def unresolved_variables(text: str, variables: Mapping[str, object]) -> list[tuple[str, int]]:
    """Each `{{name}}` in `text` with no value, as (name, 0-based line within text)."""
    missing = []
    for match in PLACEHOLDER.finditer(text):
        name = match.group(1)
        if variables.get(name) is None:
            missing.append((name, text.count("\n", 0, match.start())))
    return missing
