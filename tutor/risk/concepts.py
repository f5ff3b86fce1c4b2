"""Word classes for the semantic layer: what a crisis message is made of, as features the
classifier weighs beside the sentence's meaning.

A message that names a means ("pills", "dây thừng"), a time ("tonight", "chủ nhật này")
and something final ("for good", "lần cuối") is a plan whatever its wording; a goodbye with
a harmless reason ("last day at my job") is not. The embedding model reads such a sentence
as a whole and the hashed words only know the exact words of the exemplar bank, so a plan
worded with a means or a day the bank never used read as ordinary. The safety folder's
`concepts.yaml` lists, per class, words an author expects in either language (matched as
whole words, case and diacritics folded); a window's features gain one token per class
present and one per pair of classes present ("means&time"), and the classifier learns
from the bank how much each says — no class raises a flag by itself.

    concepts = load_concepts(folder)        # None when the folder has no concepts.yaml
    concepts.tokens("tonight, the pills")   # ["@means", "@time", "@means&time"]
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from tutor.risk._lines import parse_yaml
from tutor.understand import fold_accents

__all__ = ["CONCEPTS_FILE", "ConceptError", "Concepts", "load_concepts"]

CONCEPTS_FILE = "concepts.yaml"
_NOT_WORD = re.compile(r"[^a-z0-9]+")
_CLASS = re.compile(r"[a-z][a-z0-9_]*")


class ConceptError(ValueError):
    """The word-class file cannot be used; the message has ``file:line:`` locations."""


def _plain(text: str) -> str:
    return " " + _NOT_WORD.sub(" ", fold_accents(text).casefold().replace("đ", "d")).strip() + " "


@dataclass(frozen=True)
class Concepts:
    words: dict[str, tuple[str, ...]]  # class -> its words, as written
    weight: float = 1.0  # of each token, against the text's own hashed words
    _patterns: dict[str, re.Pattern[str]] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name, words in self.words.items():
            plain = sorted({_plain(w).strip() for w in words} - {""}, key=len, reverse=True)
            self._patterns[name] = re.compile(r"(?<= )(?:" + "|".join(map(re.escape, plain)) + r")(?= )")

    def present(self, text: str) -> list[str]:
        """The classes with a word in `text`, sorted."""
        plain = _plain(text)
        return sorted(name for name, pattern in self._patterns.items() if pattern.search(plain))

    def tokens(self, text: str) -> list[str]:
        found = self.present(text)
        return ["@" + a for a in found] + [f"@{a}&{b}" for i, a in enumerate(found) for b in found[i + 1:]]

    @property
    def version(self) -> str:
        data = [self.weight, sorted((k, sorted(v)) for k, v in self.words.items())]
        return hashlib.sha256(json.dumps(data, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]


def load_concepts(folder: Path) -> Concepts | None:
    """The word classes in `folder`/concepts.yaml; None without the file. Raises
    ConceptError with file:line problems."""
    path = folder / CONCEPTS_FILE
    if not path.is_file():
        return None
    data, lines, problems = parse_yaml(path.read_text(encoding="utf-8"), str(path))
    if problems:
        raise ConceptError("\n".join(problems))
    classes = data.get("classes") if isinstance(data, dict) else None
    if not isinstance(classes, dict) or not classes:
        raise ConceptError(f"{path}:1: expected a mapping with `classes:` (class name -> list of words)")
    weight = data.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 < weight <= 10:
        raise ConceptError(f"{path}:{lines.get(('weight',), 1)}: `weight` must be a number above 0, at most 10")
    words: dict[str, tuple[str, ...]] = {}
    for name, listed in classes.items():
        line = lines.get(("classes", name), 1)
        if not isinstance(name, str) or not _CLASS.fullmatch(name):
            problems.append(f"{path}:{line}: class names are snake_case, got {name!r}")
        elif not isinstance(listed, list) or not listed:
            problems.append(f"{path}:{line}: class {name!r} needs a non-empty list of words")
        else:
            bad = [w for w in listed if not isinstance(w, str) or not _plain(w).strip()]
            if bad:
                problems.append(f"{path}:{line}: class {name!r} has entries that are not words: {bad[:3]!r}")
            words[name] = tuple(w for w in listed if isinstance(w, str) and _plain(w).strip())
    if problems:
        raise ConceptError("\n".join(problems))
    return Concepts(words, float(weight))
