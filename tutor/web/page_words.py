"""The pages' own words: msgids of the catalogues' `page` context (tutor/locales). A msgid
is checked when the page is compiled, so a word missing from the catalogues fails the
build instead of showing the learner a blank."""

from __future__ import annotations

from tutor import settings
from tutor.i18n import translator

__all__ = ["PAGE_WORDS", "page_word", "start_page_words"]

PAGE_WORDS = frozenset(translator("en").page_strings())


def page_word(msgid: str) -> str:
    """`msgid`, if the catalogues have it as a page string; else KeyError."""
    if msgid not in PAGE_WORDS:
        raise KeyError(f"{msgid!r} is not a page string: add it with msgctxt \"page\" to tutor/locales/*/LC_MESSAGES/tutor.po")
    return msgid


def start_page_words(msgid: str) -> str:
    """The start page's word for `msgid`, in TUTOR_LANGUAGE (fixed when the page is compiled)."""
    return translator(settings.LANGUAGE).page(page_word(msgid))
