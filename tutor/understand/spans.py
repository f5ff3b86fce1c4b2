"""How a message is read by the semantic layer: in windows of whole sentences, short
enough for the model to weigh every word, each with its offsets in the original text (a
flag's evidence points at the window that raised it)."""

from __future__ import annotations

import re
import unicodedata

__all__ = ["fold_accents", "windows"]

# A sentence ends at . ! ? … or a line break (runs of them, with closing quotes/brackets).
_SENTENCE_END = re.compile(r"[.!?…。]+[\"')\]]*(?=\s|$)|\n+")
_WORD = re.compile(r"\S+")
WINDOW_WORDS = 40
_FOLD = str.maketrans({"đ": "d", "Đ": "D"})


def fold_accents(text: str) -> str:
    """Text as typed without diacritics ("Mình muốn chết" -> "Minh muon chet")."""
    if text.isascii():
        return text
    decomposed = unicodedata.normalize("NFKD", text.translate(_FOLD))
    return unicodedata.normalize("NFC", "".join(ch for ch in decomposed if not unicodedata.combining(ch)))


def _sentences(text: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        spans.append((start, match.end()))
        start = match.end()
    spans.append((start, len(text)))
    out = []
    for a, b in spans:
        piece = text[a:b]
        if piece.strip():
            lead = len(piece) - len(piece.lstrip())
            out.append((a + lead, a + len(piece.rstrip())))
    return out


def _split_long(text: str, start: int, end: int, limit: int) -> list[tuple[int, int]]:
    words = [(start + m.start(), start + m.end()) for m in _WORD.finditer(text[start:end])]
    return [(words[i][0], words[min(i + limit, len(words)) - 1][1]) for i in range(0, len(words), limit)]


def windows(text: str, max_words: int = WINDOW_WORDS) -> list[tuple[int, int]]:
    """[start, end) spans of `text` covering all its words: consecutive sentences joined
    while they fit in `max_words` words (a short message is one window, so a sentence is
    read with the one before it: "I've saved my pills. I think I have enough."); a
    sentence longer than that is cut into pieces of `max_words` words."""
    out: list[tuple[int, int]] = []
    current: tuple[int, int] | None = None
    count = 0
    for start, end in _sentences(text):
        n = len(_WORD.findall(text[start:end]))
        if n > max_words:
            if current:
                out.append(current)
                current, count = None, 0
            out += _split_long(text, start, end, max_words)
            continue
        if current and count + n <= max_words:
            current, count = (current[0], end), count + n
        else:
            if current:
                out.append(current)
            current, count = (start, end), n
    if current:
        out.append(current)
    return out
