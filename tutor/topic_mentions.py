"""Which of a module's topics a text or a form answer mentions: the topics' titles, keywords
and aliases found as whole words and phrases (anywhere, in scripts written without spaces),
and the topics a module form `covers`. Evidence for tutor.progress, which decides what is
seen; pure functions."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tutor.derived import per_module
from tutor.text import words

if TYPE_CHECKING:  # pragma: no cover
    from tutor.content.modules import Module

__all__ = ["detect_form", "detect_text", "form_covers", "topic_phrases"]

# Scripts written without spaces between words: whole-word matching cannot work there,
# so phrases in them match anywhere in the text.
_UNSPACED = re.compile(r"[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3040-\u30ff\u3400-\u4dbf"
                       r"\u4e00-\u9fff\uf900-\ufaff]")


def _phrase(text: str) -> str:
    return " ".join(words(text))


# Folding every phrase on every turn cost ~1.6 ms of CPU per turn (benchmarks/load_bench):
# what is derived from a module's topics is computed once per loaded module and topic list.
def topic_phrases(module: Module) -> dict[str, tuple[str, ...]]:
    """topic id -> normalized phrases (title, keywords, aliases) that show engagement."""
    return per_module("phrases", module, _topic_phrases)


def _topic_phrases(module: Module) -> dict[str, tuple[str, ...]]:
    phrases = {}
    for topic in module.topics:
        found = (_phrase(p) for p in (topic.title, *topic.keywords, *topic.aliases))
        phrases[topic.id] = tuple(dict.fromkeys(p for p in found if p))
    return phrases


def detect_text(module: Module, text: str | None) -> set[str]:
    """Topic ids whose title, keywords or aliases appear in `text` as whole words/phrases."""
    if not text:
        return set()
    found = words(text)
    haystack, present = f" {' '.join(found)} ", set(found)
    by_word, unspaced = _needles(module)
    hits = set()
    # A phrase of one word is in the text when that word is; a longer one only if its first
    # word is (looked up first: only the phrases starting with a word of the text are tried).
    for word in present & by_word.keys():
        for topic_id, needle in by_word[word]:
            if needle is None or needle in haystack:
                hits.add(topic_id)
    for topic_id, needle in unspaced:  # scripts written without spaces
        if needle in haystack:
            hits.add(topic_id)
    return hits


_Needles = tuple[dict[str, list[tuple[str, str | None]]], list[tuple[str, str]]]


def _needles(module: Module) -> _Needles:
    """(first word -> (topic id, text to find or None for a one-word phrase) for each phrase
    starting with it; (topic id, phrase) for phrases in a script without spaces). Once per
    module object."""
    return per_module("needles", module, _find_needles)


def _find_needles(module: Module) -> _Needles:
    by_word: dict[str, list[tuple[str, str | None]]] = {}
    unspaced: list[tuple[str, str]] = []
    for topic_id, phrases in topic_phrases(module).items():
        for phrase in phrases:
            if _UNSPACED.search(phrase):
                unspaced.append((topic_id, phrase))
            elif " " in phrase:
                by_word.setdefault(phrase.split(" ", 1)[0], []).append((topic_id, f" {phrase} "))
            else:
                by_word.setdefault(phrase, []).append((topic_id, None))
    return by_word, unspaced


def _filled(answers: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (answers or {}).items() if v not in (None, "", [], ())}


def form_covers(module: Module, form_id: str | None, answers: Mapping[str, Any] | None) -> set[str]:
    """The topics a submitted module form `covers` (evidence for seen); nothing for an
    empty submission or a form the module does not define."""
    entry = module.find_form(form_id) if form_id else None
    if entry is None or not _filled(answers):
        return set()
    return set(entry.covers or ()) & set(module.topic_ids)


def detect_form(module: Module, form_id: str | None, answers: Mapping[str, Any] | None) -> set[str]:
    """Topics a form submission is about: its `covers`, plus topics mentioned in free-text
    answers. A submission with every answer empty is about nothing."""
    hits = form_covers(module, form_id, answers)
    entry = module.find_form(form_id) if form_id else None
    if not hits or entry is None:
        return hits
    filled = _filled(answers)
    for field in entry.fields:
        value = filled.get(field.id)
        if field.type in ("text", "textarea") and isinstance(value, str):
            hits |= detect_text(module, value)
    return hits & set(module.topic_ids)
