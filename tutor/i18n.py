"""Learner-facing words in the module's language, from gettext message catalogues.

The catalogues are `tutor/locales/<language>/LC_MESSAGES/tutor.po`, read with Babel and
served by the standard library's `gettext` (plural rules from each catalogue's
`Plural-Forms` header). Nothing is compiled at install: the .po files are the source and
are read once per process.

- A msgid is the English text, with `{name}` placeholders filled by `str.format`.
- `msgctxt "page"` marks the chat page's own words (buttons, labels, hints), so the page
  can be sent one small dict of them (`Translator.page_strings`): Reflex 0.10 has no
  catalogue mechanism of its own, so the chat page reads its words from a state var
  (`ChatState.ui`, set from the module's language); the start page, which lists modules
  in any language, is compiled in TUTOR_LANGUAGE.
- A missing or empty translation falls back to the English catalogue, then to the msgid;
  a translation whose placeholders do not format falls back to English too, so a
  translator's slip never breaks a learner's page. `catalogue_problems` finds such slips
  before they ship (the tests run it on every catalogue).

Where the language is not known yet (an input error raised deep in the core), the text is
made as a `Phrase`: a str whose value is the English text, which `localize` later renders
in the conversation's language.
"""

from __future__ import annotations

import gettext
import io
import string
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import babel
import babel.numbers
from babel.messages.catalog import Catalog
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

__all__ = ["DEFAULT_LANGUAGE", "DOMAIN", "LOCALES_DIR", "PAGE", "N_", "Phrase", "Translator", "available_languages",
           "catalogue_problems", "language_name", "localize", "placeholders", "preferred_language", "read_catalogue",
           "supported", "translator"]

DOMAIN = "tutor"
DEFAULT_LANGUAGE = "en"
PAGE = "page"  # msgctxt of the chat page's own words
LOCALES_DIR = Path(__file__).resolve().parent / "locales"
_FORMATTER = string.Formatter()


def N_(message: str) -> str:
    """Marks a constant for the catalogue; it is translated where it is shown."""
    return message


class Phrase(str):
    """Text for a learner made before their language is known: the English rendering,
    remembering its msgid and values so `localize` can render it in another language."""

    msgid: str
    params: dict[str, Any]

    def __new__(cls, msgid: str, /, **params: Any) -> Phrase:
        self = super().__new__(cls, _format(msgid, params, msgid))
        self.msgid, self.params = msgid, params
        return self

    def __reduce__(self) -> tuple[Any, ...]:  # pickles (Redis state) as the English text
        return (str, (str(self),))


@dataclass(frozen=True)
class Translator:
    """gettext for one language: `t("Hello, {name}", name=...)`, `t.plural(one, many, n)`,
    `t.page("Send")`."""

    language: str
    _catalogue: gettext.NullTranslations

    def __call__(self, message: str, /, **params: Any) -> str:
        if isinstance(message, Phrase):
            message, params = message.msgid, {**message.params, **params}
        if not message:  # gettext's "" is the catalogue's header, never a message
            return ""
        params = {k: self(v) if isinstance(v, Phrase) else v for k, v in params.items()}  # "in {wait}": "3 h"
        return _format(self._catalogue.gettext(message), self._numbers(params), message)

    def plural(self, singular: str, plural: str, n: int, /, **params: Any) -> str:
        """The form for `n` by the language's plural rule; `{n}` is filled in too."""
        params = self._numbers({"n": n, **params})
        return _format(self._catalogue.ngettext(singular, plural, n), params, singular if n == 1 else plural)

    def _numbers(self, params: dict[str, Any]) -> dict[str, Any]:
        """Whole numbers written the language's way: "4.100" in Vietnamese, where English
        writes "4,100" ({n:,}) or "4100" (a bare {length}, as English messages always have)."""
        if self.language == "en":
            return params
        group = _group_symbol(self.language)
        return {k: _Grouped(v, group) if isinstance(v, int) and not isinstance(v, bool) else v
                for k, v in params.items()}

    def page(self, message: str) -> str:
        return self._catalogue.pgettext(PAGE, message)

    def page_strings(self) -> dict[str, str]:
        """Every `page` string of the English catalogue, in this language (msgid -> text)."""
        return {msgid: self.page(msgid) for msgid in _page_msgids()}


class _Grouped(int):
    """A whole number whose thousands are grouped with `group`, bare or with ","."""

    group: str

    def __new__(cls, value: int, group: str) -> _Grouped:
        self = super().__new__(cls, value)
        self.group = group
        return self

    def __format__(self, spec: str) -> str:
        if spec in ("", ","):
            return format(int(self), ",").replace(",", self.group)
        return format(int(self), spec)


@lru_cache(maxsize=16)
def _group_symbol(language: str) -> str:
    try:
        return babel.numbers.get_group_symbol(language)
    except (ValueError, babel.UnknownLocaleError):
        return ","


def localize(text: str, language: str | None) -> str:
    """`text` (a Phrase or a catalogue msgid) in `language`; other text is returned as is."""
    return translator(language)(text)


@lru_cache(maxsize=None)
def translator(language: str | None) -> Translator:
    """The translator for a BCP-47 tag ("vi", "vi-VN"); English for unknown languages."""
    found = supported(language)
    english = _load(DEFAULT_LANGUAGE)
    if found == DEFAULT_LANGUAGE:
        return Translator(DEFAULT_LANGUAGE, english)
    catalogue = _load(found)
    catalogue.add_fallback(english)
    return Translator(found, catalogue)


def language_name(language: str, in_language: str) -> str:
    """`language`'s name as a sentence in `in_language` writes it mid-sentence ("English" in
    English, "tiếng Anh" in Vietnamese); the tag itself when Babel does not know it."""
    try:
        name = babel.Locale.parse(language.replace("-", "_")).get_display_name(in_language.replace("-", "_"))
    except (ValueError, babel.UnknownLocaleError):
        return language
    if not name:
        return language
    return name[:1].lower() + name[1:] if in_language.split("-")[0] == "vi" else name


def supported(language: str | None) -> str:
    """The shipped catalogue for a tag: "vi-VN" -> "vi" (or "vi_VN" if shipped); else "en"."""
    return _shipped(language or "") or DEFAULT_LANGUAGE


def _shipped(tag: str) -> str | None:
    """The shipped catalogue a language tag names ("vi-VN" -> "vi"), or None."""
    tag = tag.strip().replace("-", "_")
    shipped = available_languages()
    for candidate in (tag, tag.split("_")[0].lower(), tag.lower()):
        if candidate in shipped:
            return candidate
    return None


def preferred_language(accept_language: str | None, default: str = DEFAULT_LANGUAGE) -> str:
    """The shipped language a browser's Accept-Language asks for first ("vi-VN,vi;q=0.9,en;q=0.8"
    -> "vi"), by its q-values; `default` when it names none of them (or is missing)."""
    wanted = []
    for position, part in enumerate((accept_language or "")[:1000].split(",")):
        tag, _, params = part.strip().partition(";")
        quality = 1.0
        for param in params.split(";"):
            name, _, value = param.strip().partition("=")
            if name.strip() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        if tag and tag != "*" and quality > 0:
            wanted.append((-quality, position, tag))
    for _, _, tag in sorted(wanted):
        found = _shipped(tag)
        if found is not None:
            return found
    return supported(default)


@lru_cache(maxsize=1)
def available_languages() -> tuple[str, ...]:
    return tuple(sorted(p.parent.parent.name for p in LOCALES_DIR.glob(f"*/LC_MESSAGES/{DOMAIN}.po")))


def read_catalogue(source: Path | str, language: str | None = None) -> Catalog:
    """A catalogue from a .po file, or from .po text."""
    if isinstance(source, Path):
        with source.open("rb") as fh:
            return read_po(fh, locale=language or source.parent.parent.name, domain=DOMAIN)
    return read_po(io.BytesIO(source.encode("utf-8")), locale=language, domain=DOMAIN)


def _po_path(language: str) -> Path:
    return LOCALES_DIR / language / "LC_MESSAGES" / f"{DOMAIN}.po"


@lru_cache(maxsize=None)
def _catalogue(language: str) -> Catalog:
    return read_catalogue(_po_path(language), language)


def _load(language: str) -> gettext.GNUTranslations:
    buffer = io.BytesIO()
    write_mo(buffer, _catalogue(language))  # untranslated and fuzzy entries are left out
    buffer.seek(0)
    return gettext.GNUTranslations(buffer)


@lru_cache(maxsize=1)
def _page_msgids() -> tuple[str, ...]:
    return tuple(m.id for m in _catalogue(DEFAULT_LANGUAGE) if m.id and m.context == PAGE and isinstance(m.id, str))


def _format(text: str, params: dict[str, Any], english: str) -> str:
    if not params:
        return text
    try:
        return text.format(**params)
    except (KeyError, IndexError, ValueError, AttributeError):
        return english.format(**params)  # a broken translation: English rather than a broken page


# ------------------------------------------------------------------ checking catalogues


def placeholders(text: str) -> set[str]:
    """The `{name}` placeholders of a message; raises ValueError for unbalanced braces."""
    return {field.split(".")[0].split("[")[0] for _, field, _, _ in _FORMATTER.parse(text) if field is not None}


def catalogue_problems(reference: Catalog, translated: Catalog) -> list[str]:
    """What a translated catalogue gets wrong against the English one: a message with no
    translation, a placeholder dropped, renamed or added, broken braces, a message the
    English catalogue does not have."""
    problems: list[str] = []
    ours = {(m.context, _key(m.id)): m for m in translated if m.id}
    for ref in reference:
        if not ref.id:
            continue
        where = _where(ref)
        msg = ours.pop((ref.context, _key(ref.id)), None)
        forms = _forms(msg.string) if msg is not None else []
        if msg is None or not forms or not all(forms) or msg.fuzzy:
            problems.append(f"{where}: no translation")
            continue
        ids = _forms(ref.id)
        try:
            wanted = [placeholders(i) for i in ids]
            got = [placeholders(f) for f in forms]
        except ValueError as exc:
            problems.append(f"{where}: broken braces ({exc})")
            continue
        if len(ids) == 1:
            if got[0] != wanted[0]:
                problems.append(f"{where}: placeholders {_names(got[0])} instead of {_names(wanted[0])}")
            continue
        every = set().union(*wanted)
        if got[-1] != wanted[-1] or any(not g <= every for g in got):
            problems.append(f"{where}: placeholders {' / '.join(_names(g) for g in got)} "
                            f"instead of {_names(wanted[-1])}")
    problems += [f"{_where(m)}: not in the English catalogue" for m in ours.values()]
    return problems


def _forms(value: Any) -> list[str]:
    if value is None:
        return []
    return [str(v or "") for v in value] if isinstance(value, (tuple, list)) else [str(value)]


def _key(msgid: Any) -> str:
    return msgid[0] if isinstance(msgid, (tuple, list)) else msgid


def _where(message: Any) -> str:
    context = f"[{message.context}] " if message.context else ""
    return f"{context}{_key(message.id)!r}"


def _names(names: Iterable[str]) -> str:
    return "{" + ", ".join(sorted(names)) + "}"
