"""The offline screen, both layers: listed phrases (tutor.risk.screen) and meaning
(tutor.risk.semantic), and a message of emoji alone read by its symbols (tutor.risk.emoji).
It needs no model server and runs on every learner message.

    flags = offline_screen(text, config, semantic)            # in a thread or a CLI
    flags = await offline_screen_async(text, config, semantic) # embeds off the event loop

A listed phrase matched where the semantic layer reads the words as plainly ordinary (risk
under semantic.ORDINARY_BELOW: "the soldier writes goodbye letters in the movie", "no, I've
never self-harmed") is dropped: on the development set the phrases alone flagged 14% of
ordinary look-alikes. A window too short to read by meaning keeps its phrases' verdict.
Every flag leaves with a severity: a phrase flag takes the one the semantic layer reads in
the window it matched in ("imminent" when there is no semantic layer: a missed emergency is
worse than an unneeded one). A label raised by both layers is one flag whose source names
both ("offline+semantic"), with both layers' evidence: one row in the review list that
still says which layers saw it.
"""

from __future__ import annotations

import dataclasses

from tutor.risk.config import SafetyConfig
from tutor.risk.emoji import emoji_flags
from tutor.risk.screen import RiskFlag, screen_with_idioms
from tutor.risk.semantic import Reading, SemanticScreen
from tutor.understand import embed_async, embedder

__all__ = ["listed", "offline_screen", "offline_screen_async", "read_by_meaning"]


BOTH = "offline+semantic"


def _combine(phrase_flags: list[RiskFlag], reading: Reading) -> list[RiskFlag]:
    by_label: dict[str, RiskFlag] = {}
    for flag in phrase_flags:
        start = flag.evidence[0].start if flag.evidence else 0
        if reading.reads_ordinary_at(start):
            continue
        by_label[flag.label] = dataclasses.replace(
            flag, severity=flag.severity or reading.severity_at(flag.label, start))
    for flag in reading.flags:
        seen = by_label.get(flag.label)
        if seen is None:
            by_label[flag.label] = flag
            continue
        evidence = tuple(sorted(set(seen.evidence) | set(flag.evidence), key=lambda e: (e.start, e.end)))
        severity = "imminent" if "imminent" in (seen.severity, flag.severity) else flag.severity
        by_label[flag.label] = dataclasses.replace(seen, confidence=max(seen.confidence, flag.confidence),
                                                   evidence=evidence, source=BOTH, severity=severity)
    return sorted(by_label.values(), key=lambda f: (f.severity != "imminent", -f.confidence))


def read_by_meaning(text: str, semantic: SemanticScreen, idioms=()) -> Reading:
    """The semantic layer's reading of `text`, its windows embedded in this thread."""
    spans = semantic.windows(text)
    if not spans:
        return Reading([])
    return semantic.read(text, embedder().embed([text[a:b] for a, b in spans]), spans, idioms)


def listed(text: str, config: SafetyConfig) -> tuple[list[RiskFlag], list[tuple[int, int]]]:
    """The phrase layer's flags (with a message of emoji alone read by its symbols) and the
    spans its authored idioms and negations matched."""
    flags, idioms = screen_with_idioms(text, config)
    return flags + emoji_flags(text, config.labels), idioms


def offline_screen(text: str, config: SafetyConfig, semantic: SemanticScreen | None) -> list[RiskFlag]:
    phrase_flags, idioms = listed(text, config)
    reading = Reading([]) if semantic is None else read_by_meaning(text, semantic, idioms)
    return _combine(phrase_flags, reading)


async def offline_screen_async(text: str, config: SafetyConfig,
                               semantic: SemanticScreen | None) -> list[RiskFlag]:
    phrase_flags, idioms = listed(text, config)
    if semantic is None or not text.strip():
        return _combine(phrase_flags, Reading([]))
    spans = semantic.windows(text)
    vectors = await embed_async([text[a:b] for a, b in spans])
    return _combine(phrase_flags, semantic.read(text, vectors, spans, idioms))
