"""The offline learner-safety screen: deterministic, no model, run on every learner message
before any model call.

    flags = screen(text, load_safety())     # [] when nothing signals risk

Each RiskFlag names a canonical label of the safety file, a deterministic confidence (see
tutor/risk/matcher.py) and the evidence: spans of the ORIGINAL text (Python str offsets)
with the SHA-256 of each span, so a stored flag can be checked against the stored message.
locate_evidence() maps a model's evidence snippet to such a span the same way (seed 003).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from tutor.risk.config import SafetyConfig
from tutor.risk.tokens import APOSTROPHES, IGNORABLE, tokenize

__all__ = ["Evidence", "RiskFlag", "locate_evidence", "screen", "screen_with_idioms", "span_hash"]

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def span_hash(text: str) -> str:
    """SHA-256 hex of text as UTF-8 (lone surrogates, which UTF-8 cannot carry, pass through
    as their 3-byte form instead of failing)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Evidence:
    start: int  # [start, end) in the original learner text
    end: int
    sha256: str  # span_hash(text[start:end])

    @classmethod
    def of(cls, text: str, start: int, end: int) -> Evidence:
        return cls(start, end, span_hash(text[start:end]))

    def snippet(self, text: str) -> str:
        return text[self.start:self.end]

    def matches(self, text: str) -> bool:
        """The span is inside `text` and still hashes the same (the text was not changed)."""
        return 0 <= self.start < self.end <= len(text) and span_hash(self.snippet(text)) == self.sha256

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "sha256": self.sha256}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Evidence:
        start, end, digest = data.get("start"), data.get("end"), data.get("sha256")
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start < end):
            raise ValueError(f"evidence needs integer offsets 0 <= start < end, got {start!r}, {end!r}")
        if not (isinstance(digest, str) and _HEX64.match(digest)):
            raise ValueError("evidence needs a sha256 of 64 lowercase hex digits")
        return cls(start, end, digest)


@dataclass(frozen=True)
class RiskFlag:
    label: str  # a canonical label id of the safety file
    confidence: float
    evidence: tuple[Evidence, ...]
    source: str = "offline"  # the layer that raised it: "offline" (phrases), "semantic", "model"
    language: str = ""  # language of the best-matching phrase ("" when unknown)
    severity: str = ""  # "imminent" or "serious" ("" before the screen has weighed it)

    def to_dict(self) -> dict[str, Any]:
        out = {"label": self.label, "confidence": self.confidence, "source": self.source,
               "evidence": [e.to_dict() for e in self.evidence]}
        if self.language:
            out["language"] = self.language
        if self.severity:
            out["severity"] = self.severity
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RiskFlag:
        label, confidence = data.get("label"), data.get("confidence")
        if not isinstance(label, str) or not label:
            raise ValueError("a risk flag needs a label")
        if not isinstance(confidence, (int, float)) or not 0.0 <= confidence <= 1.0:
            raise ValueError("a risk flag needs a confidence between 0 and 1")
        evidence = tuple(Evidence.from_dict(e) for e in data.get("evidence") or ())
        return cls(label, float(confidence), evidence, str(data.get("source") or "offline"),
                   str(data.get("language") or ""), str(data.get("severity") or ""))


def screen(text: str, config: SafetyConfig) -> list[RiskFlag]:
    """Flags for `text`, highest confidence first; [] when nothing signals risk."""
    return screen_with_idioms(text, config)[0]


def screen_with_idioms(text: str, config: SafetyConfig) -> tuple[list[RiskFlag], list[tuple[int, int]]]:
    """screen(), and the spans of `text` an authored idiom or negation matched ("this lesson
    is killing me", "I would never hurt myself"): the semantic layer asks more before it
    flags words the authors know to be ordinary (tutor.risk.offline)."""
    if not text:
        return [], []
    tokenized = tokenize(text)
    matcher = config.matcher()
    hits = matcher.hits(tokenized)
    decisions = matcher.decide(hits)
    spans_of = tokenized.spans
    flags = []
    for decision in decisions:
        spans = [(spans_of[first][0], spans_of[last][1]) for first, last in decision.spans]
        evidence = tuple(Evidence.of(text, start, end) for start, end in sorted(set(spans)))
        flags.append(RiskFlag(decision.label, decision.confidence, evidence, "offline", decision.language))
    idioms = sorted({(spans_of[h.first][0], spans_of[h.last][1]) for h in hits if h.rule.safe})
    return flags, idioms


# --- a model's evidence snippet -> a span ----------------------------------------------------

_SPACE = re.compile(r"\s+")
_IGNORABLE_RE = re.compile(f"[{IGNORABLE}]")
_QUOTES = str.maketrans({**{c: "'" for c in APOSTROPHES}, "\u201c": '"', "\u201d": '"', "\u201e": '"',
                         "\u00ab": '"', "\u00bb": '"'})


def _fold_char(ch: str) -> str:
    return unicodedata.normalize("NFD", ch.translate(_QUOTES).casefold())


def _normalized(text: str) -> tuple[str, list[int], list[bool]]:
    """Whitespace runs -> one space, case folded, NFD, quote variants unified, invisible
    characters dropped; with the original index of each output character and whether it
    is the first output of its original character."""
    out: list[str] = []
    origin: list[int] = []
    first: list[bool] = []
    in_space = False
    for i, ch in enumerate(text):
        if ch.isspace():
            if not in_space and out:
                out.append(" ")
                origin.append(i)
                first.append(True)
            in_space = True
            continue
        if _IGNORABLE_RE.match(ch):
            continue
        in_space = False
        for j, c in enumerate(_fold_char(ch)):
            out.append(c)
            origin.append(i)
            first.append(j == 0)
    return "".join(out), origin, first


def _whole_characters(text: str, start: int, end: int) -> bool:
    """The span neither starts nor stops inside a letter and its combining marks."""
    return not unicodedata.combining(text[start]) and (end == len(text) or not unicodedata.combining(text[end]))


def locate_evidence(text: str, snippet: str) -> Evidence | None:
    """Where a model's evidence snippet is in `text`, deterministically: the first verbatim
    occurrence; else the first occurrence ignoring case, runs of whitespace, quote
    variants, Unicode composition (NFC/NFD) and invisible characters, mapped back to the
    original offsets (never splitting a letter from its marks); None when it is not there."""
    if not text or not snippet or not snippet.strip():
        return None
    for candidate in (snippet, snippet.strip()):
        at = text.find(candidate)
        while at >= 0:
            if _whole_characters(text, at, at + len(candidate)):
                return Evidence.of(text, at, at + len(candidate))
            at = text.find(candidate, at + 1)
    wanted = _SPACE.sub(" ", "".join(_fold_char(c) for c in _IGNORABLE_RE.sub("", snippet))).strip()
    if not wanted:
        return None
    haystack, origin, first = _normalized(text)
    at = haystack.find(wanted)
    while at >= 0:
        end = at + len(wanted)
        if first[at] and (end == len(haystack) or first[end]) and _whole_characters(haystack, at, end):
            start, stop = origin[at], origin[end - 1] + 1
            return Evidence.of(text, start, stop)
        at = haystack.find(wanted, at + 1)
    return None
