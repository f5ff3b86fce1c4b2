"""Citations and quote verification (seed 001: verbatim, checked after the fact).

A citation (`tutor.contract.Citation`, optional in replies) names a source and quotes it.
The server keeps a quote only if it occurs verbatim inside ONE section of that source,
comparing text with whitespace runs collapsed, case folded, markdown emphasis marks (* _ `)
ignored and typographic quotes read as plain ones. Nothing else is forgiven: a changed word, a paraphrase, or a quote stitched across two
sections does not verify. The verified quote carries the exact original span, so what the
learner sees is the author's text, not the model's copy of it.

The module's own topic content is citable as the source ``module`` (MODULE_SOURCE_ID),
whose sections are the topics.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from tutor.content.material import MODULE_SOURCE_ID, Source, SourceSection
from tutor.contract.models import Citation

if TYPE_CHECKING:  # pragma: no cover
    from tutor.content.modules import Module

__all__ = [
    "MAX_QUOTE_CHARS",
    "MIN_QUOTE_WORDS",
    "Citation",
    "VerifiedQuote",
    "module_sources",
    "normalize_quote",
    "verify_quote",
]

MIN_QUOTE_WORDS = 3  # fewer words quote nothing in particular
MAX_QUOTE_CHARS = 1500  # a citation quotes; it does not copy a section
_IGNORED = frozenset("*_`")
_TYPOGRAPHIC = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u00a0": " "})
_WORDISH = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class VerifiedQuote:
    source_id: str
    source_title: str
    section_id: str
    section_title: str
    quote: str  # the exact original span of the section's text
    start: int  # offsets of that span in the section's text
    end: int


def module_sources(module: Module) -> dict[str, Source]:
    """Every citable source of a module: its declared sources as loaded, then the topics'
    own content as the source ``module`` (one section per topic with content)."""
    sources = dict(module.loaded_sources)
    sections = tuple(
        SourceSection(t.id, t.title, t.content.strip(), 0) for t in module.topics if (t.content or "").strip()
    )
    text = "\n\n".join(s.text for s in sections)
    sources[MODULE_SOURCE_ID] = Source(MODULE_SOURCE_ID, module.title, "", text, sections)
    return sources


def normalize_quote(text: str) -> str:
    return _normalized(text)[0]


@lru_cache(maxsize=1024)
def _normalized(text: str) -> tuple[str, tuple[int, ...]]:
    """(normalised text, offset in `text` of each normalised character)."""
    out: list[str] = []
    where: list[int] = []
    space = True  # drops leading whitespace
    for i, ch in enumerate(text.translate(_TYPOGRAPHIC)):
        if ch in _IGNORED:
            continue
        if ch.isspace():
            if not space:
                out.append(" ")
                where.append(i)
                space = True
            continue
        for folded in ch.casefold():
            out.append(folded)
            where.append(i)
        space = False
    if out and out[-1] == " ":
        out.pop()
        where.pop()
    return "".join(out), tuple(where)


def verify_quote(sources: Mapping[str, Source], citation: Citation) -> VerifiedQuote | None:
    """The quote's exact span in the cited source, or None when it is not verbatim there.

    `location` is a hint: the named section (by id or title) is searched first, then the
    rest of the source. None also for: an unknown source, a quote of fewer than
    MIN_QUOTE_WORDS words (empty, whitespace, punctuation), or longer than MAX_QUOTE_CHARS.
    """
    source = sources.get(citation.source_id) if isinstance(citation.source_id, str) else None
    if source is None or not isinstance(citation.quote, str):
        return None
    needle = normalize_quote(citation.quote)
    if len(needle) > MAX_QUOTE_CHARS or len(_WORDISH.findall(needle)) < MIN_QUOTE_WORDS:
        return None
    for section in _search_order(source, citation.location):
        hay, where = _normalized(section.text)
        at = hay.find(needle)
        if at < 0:
            continue
        start, end = where[at], where[at + len(needle) - 1] + 1
        return VerifiedQuote(source.id, source.title, section.id, section.title,
                             section.text[start:end], start, end)
    return None


def _search_order(source: Source, location: str | None) -> list[SourceSection]:
    sections = list(source.sections)
    if not location:
        return sections
    wanted = normalize_quote(location)
    named = [s for s in sections if wanted in (s.id, normalize_quote(s.title))
             or wanted.endswith(normalize_quote(s.title))]
    return named + [s for s in sections if s not in named]
