"""The pages' own words: msgids of the catalogues' `page` context (tutor/locales). A msgid
is checked when the page is compiled, so a word missing from the catalogues fails the
build instead of showing the learner a blank."""

from __future__ import annotations

import reflex as rx

from tutor import settings
from tutor.i18n import preferred_language, translator

__all__ = ["PAGE_WORDS", "StartWords", "page_word"]

PAGE_WORDS = frozenset(translator("en").page_strings())


def page_word(msgid: str) -> str:
    """`msgid`, if the catalogues have it as a page string; else KeyError."""
    if msgid not in PAGE_WORDS:
        raise KeyError(f"{msgid!r} is not a page string: add it with msgctxt \"page\" to tutor/locales/*/LC_MESSAGES/tutor.po")
    return msgid


class StartWords(rx.State, mixin=True):
    """The words of the pages without a module (start, sign-in, sign-up): in the language the
    browser asks for first (Accept-Language), when Tutor ships it, else TUTOR_LANGUAGE. The
    page is compiled in TUTOR_LANGUAGE and speaks the learner's as soon as it has loaded.
    Picked after the tab's identity check, which may reset the tab's state."""

    page_language: str = settings.LANGUAGE
    words: dict[str, str] = translator(settings.LANGUAGE).page_strings()

    def _pick_language(self) -> str:
        found = preferred_language(self.router.headers.accept_language, settings.LANGUAGE)
        if found != self.page_language:
            self.page_language, self.words = found, translator(found).page_strings()
        return found
