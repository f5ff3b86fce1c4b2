"""What a safety configuration must satisfy beyond its pydantic shape, as (path, message)
findings that tutor.risk.config puts on file lines: languages declared, phrases that compile
with their vocabulary, a reply for every language, labels that exist."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import ValidationError

from tutor.contract.models import SNAKE_CASE
from tutor.risk._lines import Loc, dotted
from tutor.risk.phrases import PhraseError, compile_phrase, parse_phrase, references

if TYPE_CHECKING:
    from tutor.contract.models import TextBlock
    from tutor.risk.config import RiskLabel, SafetyConfig

ANY_LANGUAGE = "*"
PHRASE_KINDS = ("phrases", "indirect", "idioms", "negations")


def phrase_problem(phrase: str, config: SafetyConfig, language: str) -> str | None:
    vocabulary = config.vocabulary.get(language)
    try:
        compile_phrase(phrase, vocabulary.groups if vocabulary else {}, vocabulary.equivalents if vocabulary else ())
    except PhraseError as exc:
        return f"phrase {phrase!r}: {exc}"
    return None


def rule_findings(config: SafetyConfig) -> list[tuple[Loc, str]]:
    """What pydantic cannot see: languages declared, phrases that compile with their
    vocabulary, a reply for every language, known labels."""
    found: list[tuple[Loc, str]] = []
    languages = config.languages
    known = set(languages)
    if len(known) != len(languages):
        found.append((("languages",), "a language is listed twice"))
    if ANY_LANGUAGE in known:
        found.append((("languages",), "'*' is not a language"))
    for lang, vocabulary in config.vocabulary.items():
        if lang not in known:
            found.append((("vocabulary", lang), f"language {lang!r} is not in languages {languages}"))
        for i, members in enumerate(vocabulary.equivalents):
            if len(members) < 2:
                found.append((("vocabulary", lang, "equivalents", i), "an equivalence needs two or more spellings"))
        for j, negator in enumerate(vocabulary.negators):
            problem = phrase_problem(negator, config, lang)
            if problem:
                found.append((("vocabulary", lang, "negators", j), problem))
        for name, members in vocabulary.groups.items():
            for j, member in enumerate(members):
                if references(parse_phrase(member)):
                    found.append((("vocabulary", lang, "groups", name, j), "a word group cannot use another group"))
    for label_id, label in config.labels.items():
        found += _label_findings(config, label_id, label)
    found += _reply_findings(("check_in",), config.check_in, languages, set(languages))
    return found


def _label_findings(config: SafetyConfig, label_id: str, label: RiskLabel) -> list[tuple[Loc, str]]:
    found: list[tuple[Loc, str]] = []
    where: Loc = ("labels", label_id)
    if not any(s.signal_count() for s in label.signals.values()):
        found.append(((*where, "signals"), f"label {label_id!r} has no phrases, patterns or indirect phrases"))
    for lang, signals in label.signals.items():
        if lang not in config.languages:
            found.append(((*where, "signals", lang), f"language {lang!r} is not in languages {config.languages}"))
            continue
        for kind in PHRASE_KINDS:
            for i, phrase in enumerate(getattr(signals, kind)):
                problem = phrase_problem(phrase, config, lang)
                if problem:
                    found.append(((*where, "signals", lang, kind, i), problem))
    needed = {lang for lang, s in label.signals.items() if s.signal_count()}
    found += _reply_findings((*where, "reply"), label.reply, config.languages, needed)
    for i, other in enumerate(label.supersedes):
        if other == label_id or other not in config.labels:
            found.append(((*where, "supersedes", i), f"supersedes {other!r}: not another label of this file"))
    return found


def _reply_findings(where: Loc, replies: dict[str, list[TextBlock]], languages: list[str],
                    needed: set[str]) -> list[tuple[Loc, str]]:
    found: list[tuple[Loc, str]] = []
    for lang, blocks in replies.items():
        if lang != ANY_LANGUAGE and lang not in languages:
            found.append(((*where, lang), f"language {lang!r} is not in languages {languages}"))
        if not blocks:
            found.append(((*where, lang), "empty reply: give at least one text block"))
    if ANY_LANGUAGE not in replies:
        for lang in [languages[0], *sorted(needed - {languages[0]})]:
            if lang not in replies:
                found.append((where, f"no reply in {lang!r} (give one, or a plain list for every language)"))
    return found



def pydantic_findings(exc: ValidationError) -> list[tuple[Loc, str]]:
    out = []
    for err in exc.errors():
        loc: Loc = tuple(err.get("loc", ()))
        kind, where = err.get("type"), dotted(loc) or "safety file"
        if kind == "extra_forbidden":
            out.append((loc, f"unknown key {loc[-1]!r} in {dotted(loc[:-1]) or 'the safety file'}"))
        elif kind == "missing":
            out.append((loc[:-1], f"{dotted(loc[:-1]) or 'safety file'}: missing required key {loc[-1]!r}"))
        elif kind == "string_pattern_mismatch" and err.get("ctx", {}).get("pattern") == SNAKE_CASE:
            out.append((loc, f"{where}: {err.get('input')!r} is not a snake_case id (a-z, 0-9, _; starting with a letter)"))
        else:
            message = str(err.get("msg", "invalid")).removeprefix("Value error, ")
            value = err.get("input")
            shown = f" (got {value!r})" if isinstance(value, (str, int, float, bool)) and kind != "value_error" else ""
            out.append((loc, f"{where}: {message}{shown}"))
    return out
