"""A SafetyConfig compiled for speed, and the rules that turn matches into flags.

Compiling (once per configuration): every phrase becomes one regex over tokenized text,
indexed by the words a match can start with, so screening a message tries only the phrases
whose first word is in it (author patterns, which have no such word, are scanned).

Deciding, for one message:
1. Signals match: `phrases` (confidence 0.9), `patterns` (0.8), `indirect` (0.7). A phrase
   written with diacritics that matched words typed without them scores 0.1 less (without
   marks, "tu tu" may also be "từ từ").
2. A signal match lying wholly inside an idiom or negation match of the same label and
   language is dropped ("this lesson is killing me", "I would never hurt myself"). One
   that reaches beyond it stays, so the longer reading wins: "I can't stop thinking about
   killing myself" is not saved by a negation on "not ... killing myself" unless that
   negation covers the whole statement.
3. A label's matches inside a match of a label that `supersedes` it are dropped
   (concern_for_other's "my friend says she wants to die" drops self_harm's "wants to die").
4. A signal match that starts right after one of its language's `negators` (vocabulary) is
   dropped: the learner denies it ("I don't want to die", "I've never self-harmed"). The
   negator must touch the match (only the negator's own optional words between: "never even"),
   and a phrase that holds its denial ("don't want to live") is not touched, since its
   match starts at the denial.
5. One flag per label left: the highest confidence of its matches, the language of that
   match, and the spans of all its matches (a span inside another is left out).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tutor.risk.phrases import compile_pattern, compile_phrase
from tutor.risk.tokens import BOUNDARY, TokenizedText

if TYPE_CHECKING:
    from tutor.risk.config import SafetyConfig

__all__ = ["CONFIDENCE", "UNMARKED_PENALTY", "Decision", "Hit", "Matcher", "Rule"]

CONFIDENCE = {"phrases": 0.9, "patterns": 0.8, "indirect": 0.7, "idioms": 0.0, "negations": 0.0}
UNMARKED_PENALTY = 0.1
SAFE_KINDS = frozenset({"idioms", "negations"})
NEGATOR_WORDS = 4  # the longest negator, in words, with its optional words ("have never even")


@dataclass(frozen=True, slots=True)
class Rule:
    label: str
    language: str
    kind: str  # phrases | patterns | indirect | idioms | negations
    text: str  # as the author wrote it
    regex: re.Pattern[str]
    marks: tuple[tuple[str, str], ...] = ()  # (regex group, the word with its diacritics)

    @property
    def safe(self) -> bool:
        return self.kind in SAFE_KINDS


@dataclass(frozen=True, slots=True)
class Hit:
    rule: Rule
    first: int  # token indexes, inclusive
    last: int
    confidence: float

    def inside(self, other: Hit) -> bool:
        return other.first <= self.first and self.last <= other.last


@dataclass(frozen=True, slots=True)
class Decision:
    label: str
    confidence: float
    language: str
    spans: tuple[tuple[int, int], ...]  # (first token, last token)


class Matcher:
    def __init__(self, config: SafetyConfig) -> None:
        self.order = list(config.labels)
        self.supersedes = {label_id: tuple(label.supersedes) for label_id, label in config.labels.items()}
        self._by_word: dict[str, list[Rule]] = {}
        self._by_prefix: dict[str, list[tuple[str, Rule]]] = {}
        self._scan: list[Rule] = []
        self.rule_count = 0
        self._negators: dict[str, list[re.Pattern[str]]] = {
            lang: [compile_phrase(text, vocabulary.groups, vocabulary.equivalents).regex for text in vocabulary.negators]
            for lang, vocabulary in config.vocabulary.items() if vocabulary.negators}
        for label_id, label in config.labels.items():
            for lang, signals in label.signals.items():
                vocabulary = config.vocabulary.get(lang)
                groups = vocabulary.groups if vocabulary else {}
                same = vocabulary.equivalents if vocabulary else []
                for kind in ("phrases", "indirect", "idioms", "negations"):
                    for text in getattr(signals, kind):
                        compiled = compile_phrase(text, groups, same)
                        rule = Rule(label_id, lang, kind, text, compiled.regex, tuple(compiled.marks.items()))
                        self._index(rule, compiled.first_words, compiled.first_prefixes)
                for text in signals.patterns:
                    self._scan.append(Rule(label_id, lang, "patterns", text, compile_pattern(text)))
                    self.rule_count += 1

    def _index(self, rule: Rule, words: frozenset[str], prefixes: frozenset[str]) -> None:
        self.rule_count += 1
        for word in words:
            self._by_word.setdefault(word, []).append(rule)
        for stem in prefixes:
            self._by_prefix.setdefault(stem[:3], []).append((stem, rule))

    def hits(self, text: TokenizedText) -> list[Hit]:
        out: list[Hit] = []
        joined, starts, by_word, by_prefix = text.joined, text.starts, self._by_word, self._by_prefix
        for i, fold in enumerate(text.folds):
            rules = by_word.get(fold)
            if rules:
                for rule in rules:
                    match = rule.regex.match(joined, starts[i])
                    if match:
                        self._hit(rule, match, text, out)
            candidates = by_prefix.get(fold[:3]) if by_prefix else None
            if candidates:
                for stem, rule in candidates:
                    if fold.startswith(stem):
                        match = rule.regex.match(joined, starts[i])
                        if match:
                            self._hit(rule, match, text, out)
        for rule in self._scan:
            for match in rule.regex.finditer(joined):
                self._hit(rule, match, text, out)
        if self._negators:
            out = [h for h in out if h.rule.safe or not self._denied(h, text)]
        return out

    def _denied(self, hit: Hit, text: TokenizedText) -> bool:
        """A negator of the hit's language ends right where the hit starts."""
        negators = self._negators.get(hit.rule.language)
        if not negators:
            return False
        starts, folds = text.starts, text.folds
        at = starts[hit.first]
        for first in range(max(0, hit.first - NEGATOR_WORDS), hit.first):
            if BOUNDARY in folds[first:hit.first]:
                continue
            if any(regex.fullmatch(text.joined, starts[first], at) for regex in negators):
                return True
        return False

    @staticmethod
    def _hit(rule: Rule, match: re.Match[str], text: TokenizedText, out: list[Hit]) -> None:
        start, end = match.span()
        if end <= start:
            return
        last_char = end - 2 if text.joined[end - 1] == " " else end - 1
        first, last = text.token_at(start), text.token_at(max(start, last_char))
        folds = text.folds
        while first < last and folds[first] == BOUNDARY:
            first += 1
        while last > first and folds[last] == BOUNDARY:
            last -= 1
        if folds[first] == BOUNDARY:
            return
        confidence = CONFIDENCE[rule.kind]
        unmarked = False
        for group, form in rule.marks:
            offset = match.start(group)
            if offset < 0:
                continue
            typed = text.marked[text.token_at(offset)]
            if typed is None:
                unmarked = True
            elif typed != form:
                return  # written with other diacritics: another word ("từ từ" is not "tự tử")
        if unmarked and not rule.safe:
            confidence = round(confidence - UNMARKED_PENALTY, 2)
        out.append(Hit(rule, first, last, confidence))

    def decide(self, hits: list[Hit]) -> list[Decision]:
        signals = [h for h in hits if not h.rule.safe]
        if not signals:
            return []
        safe = [h for h in hits if h.rule.safe]
        kept = [h for h in signals if not any(
            s.rule.label == h.rule.label and s.rule.language == h.rule.language and h.inside(s) for s in safe)]
        for label in self.order:
            dropped = self.supersedes[label]
            winners = [h for h in kept if h.rule.label == label] if dropped else []
            if winners:
                kept = [h for h in kept if not (h.rule.label in dropped and any(h.inside(w) for w in winners))]
        decisions = []
        for label in self.order:
            mine = [h for h in kept if h.rule.label == label]
            if not mine:
                continue
            best = max(mine, key=lambda h: (h.confidence, -h.first))
            spans = sorted({(h.first, h.last) for h in mine})
            spans = [s for s in spans if not any(o != s and o[0] <= s[0] and s[1] <= o[1] for o in spans)]
            decisions.append(Decision(label, best.confidence, best.rule.language, tuple(spans)))
        decisions.sort(key=lambda d: -d.confidence)  # stable: file order among equals
        return decisions
