"""The phrase syntax authors write in a safety file, compiled to regular expressions over
tokenized text (see tokens.py).

A phrase is words, matched whole, in order, case-, diacritics- and apostrophe-insensitively:

    kill myself                 "kill myself", "Kill my self" (with an equivalent, see below)
    kill* myself                kill, kills, killed, killing ... myself  (a prefix: 3+ letters)
    want to ... die             up to 3 words in between: "want to just die"
    (end|take) my (own|) life   alternatives; an empty alternative makes a part optional
    {person}                    a named word group from the file's vocabulary
    tự tử                       written with diacritics: also matches "tu tu" typed without
                                them, but not "từ từ" (other diacritics, another word)

Punctuation inside a phrase is ignored, and a phrase never matches across a sentence break
or a comma in the learner's text. Per language, the vocabulary's `equivalents` say which
word sequences mean the same ("do not" = "dont" = "don't"); every phrase of that language
matches all of them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType

from tutor.risk.tokens import fold_word, marked_form

__all__ = ["CompiledPhrase", "PhraseError", "compile_pattern", "compile_phrase", "parse_phrase"]

GAP_WORDS = 3
MIN_PREFIX = 3
_PIECE = re.compile(
    r"\s+|(?P<gap>\.\.\.|\u2026)|(?P<op>[()|])|(?P<ref>\{[^{}]*\})"
    r"|(?P<word>[^\s()|{}.\u2026*]+\*?)|(?P<other>.)",
    re.S,
)
_REF_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class PhraseError(ValueError):
    """A phrase or pattern an author wrote cannot be compiled; the message says why."""


@dataclass(frozen=True)
class Word:
    fold: str
    marked: str | None = None


@dataclass(frozen=True)
class Prefix:
    stem: str


@dataclass(frozen=True)
class Gap:
    pass


@dataclass(frozen=True)
class Ref:
    name: str


@dataclass(frozen=True)
class Alt:
    options: tuple[tuple, ...]  # each a sequence of elements


@dataclass(frozen=True)
class CompiledPhrase:
    regex: re.Pattern[str]
    marks: dict[str, str] = field(default_factory=dict)  # group name -> marked word
    first_words: frozenset[str] = frozenset()  # the folds a match can start with
    first_prefixes: frozenset[str] = frozenset()


def parse_phrase(text: str) -> tuple:
    """Phrase text -> a sequence of elements; raises PhraseError."""
    stack: list[list[list]] = [[[]]]  # groups -> alternatives -> elements
    for piece in _PIECE.finditer(text):
        kind = piece.lastgroup
        value = piece.group()
        current = stack[-1][-1]
        if kind is None:  # whitespace
            continue
        if kind == "gap":
            current.append(Gap())
        elif kind == "ref":
            name = value[1:-1].strip()
            if not _REF_NAME.match(name):
                raise PhraseError(f"{value!r} is not a word group name (use {{snake_case}})")
            current.append(Ref(name))
        elif kind == "op" and value == "(":
            stack.append([[]])
        elif kind == "op" and value == "|":
            if len(stack) == 1:
                raise PhraseError("'|' separates alternatives inside ( ... ) only")
            stack[-1].append([])
        elif kind == "op":  # ")"
            if len(stack) == 1:
                raise PhraseError("')' without a matching '('")
            options = tuple(tuple(seq) for seq in stack.pop())
            stack[-1][-1].append(Alt(options))
        elif kind == "word":
            current.extend(_words(value))
        elif value in "*{}":
            raise PhraseError(f"unexpected {value!r} (a * ends a word: kill*; groups are {{name}})")
        # any other lone character is punctuation: ignored
    if len(stack) != 1:
        raise PhraseError("'(' without a matching ')'")
    sequence = tuple(stack[0][0])
    _check_shape(sequence)
    return sequence


def _words(chunk: str) -> list:
    if chunk.endswith("*"):
        folds = fold_word(chunk[:-1])
        if len(folds) != 1:
            raise PhraseError(f"{chunk!r}: a * prefix must follow one word")
        if len(folds[0]) < MIN_PREFIX:
            raise PhraseError(f"{chunk!r}: a prefix needs at least {MIN_PREFIX} letters")
        return [Prefix(folds[0])]
    folds = fold_word(chunk)
    if len(folds) == 1 and not chunk.isascii():
        form = marked_form(chunk)
        return [Word(folds[0], form if form != folds[0] else None)]
    return [Word(f) for f in folds]


def _min_words(sequence: Sequence) -> int:
    total = 0
    for element in sequence:
        if isinstance(element, (Word, Prefix, Ref)):
            total += 1
        elif isinstance(element, Alt):
            total += min(_min_words(option) for option in element.options)
    return total


def _check_shape(sequence: tuple) -> None:
    if _min_words(sequence) == 0:
        raise PhraseError("a phrase needs at least one word it always matches")
    if isinstance(sequence[0], Gap) or isinstance(sequence[-1], Gap):
        raise PhraseError("'...' stands between words, not at the start or end of a phrase")


def references(sequence: Sequence) -> set[str]:
    names: set[str] = set()
    for element in sequence:
        if isinstance(element, Ref):
            names.add(element.name)
        elif isinstance(element, Alt):
            for option in element.options:
                names |= references(option)
    return names


# --- compiling ----------------------------------------------------------------------------

Equivalents = Sequence[Sequence[str]]


def _equivalence_map(equivalents: Equivalents) -> dict[tuple[str, ...], tuple[tuple, ...]]:
    """each spelling -> every spelling of its class, as word sequences. Keys keep
    diacritics: "muốn" (want) is not "muộn" (late), though both fold to "muon"."""
    out: dict[tuple[str, ...], tuple[tuple, ...]] = {}
    for members in equivalents:
        forms: dict[tuple[str, ...], tuple] = {}
        for member in members:
            sequence = tuple(w for chunk in member.split() for w in _words(chunk) if isinstance(w, Word))
            if sequence:
                forms.setdefault(_key(sequence), sequence)
        for key in forms:
            out[key] = tuple(forms.values())
    return out


def _key(sequence: Sequence) -> tuple[str, ...]:
    return tuple(w.marked or w.fold for w in sequence)


def _expand(sequence: Sequence, groups: Mapping[str, Sequence[tuple]], same: dict, depth: int = 0) -> tuple:
    """Resolve {refs} and equivalent spellings into alternatives."""
    out: list = []
    longest = max((len(k) for k in same), default=0)
    i = 0
    while i < len(sequence):
        element = sequence[i]
        replaced = False
        for size in range(min(longest, len(sequence) - i), 0, -1):
            run = sequence[i:i + size]
            if all(isinstance(e, Word) for e in run):
                forms = same.get(_key(run))
                if forms:
                    out.append(Alt(forms))
                    i += size
                    replaced = True
                    break
        if replaced:
            continue
        if isinstance(element, Ref):
            if element.name not in groups:
                raise PhraseError(f"unknown word group {{{element.name}}} (declare it under vocabulary)")
            if depth > 0:
                raise PhraseError(f"word group {{{element.name}}} is used inside another group")
            options = tuple(_expand(o, groups, same, depth + 1) for o in groups[element.name])
            out.append(Alt(options))
        elif isinstance(element, Alt):
            out.append(Alt(tuple(_expand(o, groups, same, depth) for o in element.options)))
        else:
            out.append(element)
        i += 1
    return tuple(out)


class _Emitter:
    def __init__(self) -> None:
        self.marks: dict[str, str] = {}

    def sequence(self, sequence: Sequence) -> str:
        return "".join(self.element(e) for e in sequence)

    def element(self, element: object) -> str:
        if isinstance(element, Word):
            if element.marked is None:
                return re.escape(element.fold) + " "
            name = f"m{len(self.marks)}"
            self.marks[name] = element.marked
            return f"(?P<{name}>{re.escape(element.fold)}) "
        if isinstance(element, Prefix):
            return re.escape(element.stem) + "[^ |]* "
        if isinstance(element, Gap):
            return f"(?:[^ |]+ ){{0,{GAP_WORDS}}}"
        assert isinstance(element, Alt)
        return "(?:" + "|".join(self.sequence(o) for o in element.options) + ")"


def _firsts(sequence: Sequence) -> tuple[set[str], set[str], bool]:
    """The folds and prefixes a match can start with, and whether the sequence can be empty."""
    words: set[str] = set()
    prefixes: set[str] = set()
    for element in sequence:
        if isinstance(element, Word):
            return words | {element.fold}, prefixes, False
        if isinstance(element, Prefix):
            return words, prefixes | {element.stem}, False
        if isinstance(element, Alt):
            nullable = False
            for option in element.options:
                w, p, empty = _firsts(option)
                words |= w
                prefixes |= p
                nullable = nullable or empty
            if not nullable:
                return words, prefixes, False
        # a Gap or an optional part: the match may start with what follows
    return words, prefixes, True


def compile_phrase(
    text: str,
    groups: Mapping[str, Sequence[str]] | None = None,
    equivalents: Equivalents = (),
) -> CompiledPhrase:
    """Phrase text -> a regex matching at a token start of TokenizedText.joined. Cached: a
    module's override recompiles only its own phrases."""
    groups_key = tuple(sorted((name, tuple(members)) for name, members in (groups or {}).items()))
    return _compile(text, groups_key, tuple(tuple(members) for members in equivalents))


@lru_cache(maxsize=8192)
def _compile(text: str, groups: tuple[tuple[str, tuple[str, ...]], ...],
             equivalents: tuple[tuple[str, ...], ...]) -> CompiledPhrase:
    sequence = _expand(parse_phrase(text), _parsed_groups(groups), _same(equivalents))
    emitter = _Emitter()
    body = emitter.sequence(sequence)
    words, prefixes, _ = _firsts(sequence)
    return CompiledPhrase(re.compile("(?<= )" + body), emitter.marks, frozenset(words), frozenset(prefixes))


@lru_cache(maxsize=64)
def _parsed_groups(groups: tuple[tuple[str, tuple[str, ...]], ...]) -> Mapping[str, tuple[tuple, ...]]:
    """A vocabulary's word groups parsed once, not once per phrase that is compiled with them
    (a safety file's ~500 phrases share a few thousand group members)."""
    return MappingProxyType({name: tuple(parse_phrase(m) for m in members) for name, members in groups})


@lru_cache(maxsize=64)
def _same(equivalents: tuple[tuple[str, ...], ...]) -> dict:
    return _equivalence_map(equivalents)


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """An author's regular expression over folded text, matched at word boundaries."""
    try:
        plain = re.compile(pattern)
    except re.error as exc:
        raise PhraseError(f"invalid regular expression: {exc}") from None
    if plain.fullmatch("") is not None:
        raise PhraseError("the pattern can match empty text")
    return re.compile(f"(?<= )(?:{pattern})(?= )")
