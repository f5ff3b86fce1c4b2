"""A question read in the module's language through the module's authored glossary.

The embedding model reads Vietnamese typed with diacritics fairly well and typed without
them poorly, and BM25 shares no word between "tim đập nhanh" and "heart racing". A module's
`glossary:` names its terms (in the module's language) with how learners say them in other
languages or in everyday words; `terms(module, question)` gives the terms a question uses,
matched as whole words with case and accents folded (so "tim dap nhanh" counts too), the
longest phrasing first; a phrasing of one word written with diacritics ("sợ") counts only
when the learner wrote them too (typed plain, "so" is as likely another word). tutor.teach.meaning adds them to the question's words and reads the
question again with them.
"""

from __future__ import annotations

import re
import unicodedata
from typing import TYPE_CHECKING

from tutor.teach.retrieval import PerModule
from tutor.text import normalize

if TYPE_CHECKING:  # pragma: no cover
    from tutor.content.modules import Module

__all__ = ["Glossary", "glossed", "terms"]

_RAW_WORD = re.compile(r"[^\W_]+")


class Glossary:
    """Phrasings (folded words) -> the module's term, looked up from each word of a text."""

    def __init__(self, entries: dict[str, list[str]]) -> None:
        self._starting: dict[str, list[tuple[tuple[str, ...], str]]] = {}
        self._marked: dict[str, str] = {}  # one word written with its diacritics: matched only so
        for term, phrasings in entries.items():
            for phrasing in phrasings:
                raw = tuple(_RAW_WORD.findall(unicodedata.normalize("NFC", phrasing).casefold()))
                folded = tuple(normalize(w) for w in raw)
                if len(raw) == 1 and folded[0] != raw[0]:
                    self._marked.setdefault(raw[0], term)  # "sợ" is fear; "so" is not
                elif folded:
                    self._starting.setdefault(folded[0], []).append((folded, term))
        for found in self._starting.values():
            found.sort(key=lambda pair: -len(pair[0]))  # the longest phrasing wins

    def terms(self, text: str) -> list[str]:
        """The module's terms `text` uses, once each, in the order it uses them."""
        raw = _RAW_WORD.findall(unicodedata.normalize("NFC", text).casefold())
        said = tuple(normalize(w) for w in raw)
        out: dict[str, None] = {}
        i = 0
        while i < len(said):
            for phrasing, term in self._starting.get(said[i], ()):
                if said[i:i + len(phrasing)] == phrasing:
                    out[term] = None
                    i += len(phrasing)
                    break
            else:
                if raw[i] in self._marked:
                    out[self._marked[raw[i]]] = None
                i += 1
        return list(out)


_PER_MODULE: PerModule[Glossary] = PerModule()


def terms(module: Module, text: str) -> list[str]:
    """The module's glossary terms that `text` uses (none when the module has no glossary)."""
    if not module.glossary:
        return []
    return _PER_MODULE.get(module, lambda m: Glossary(m.glossary)).terms(text)


def glossed(module: Module, text: str) -> str:
    """`text` with the module's terms it uses after it, or "" when it uses none."""
    found = terms(module, text)
    return f"{text} ({', '.join(found)})" if found else ""
