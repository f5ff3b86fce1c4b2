"""Risk told in emoji alone: "🔪🩸", "💊🙋‍♂️➡️⚰️", "🙋‍♂️💀".

A message with no letters or digits gives the phrase and semantic layers nothing to read
(the embedding model reads emoji weakly, and a window of no words is left to the phrases).
So a message made only of symbols is read here, by what its symbols are:

- a means (pills, a blade, a gun, a rope, a razor) beside death, blood or the writer
  ("🙋", "🧍") is self-harm, imminent: a means is at hand;
- death beside the writer, or a coffin, a headstone or "the end" beside sadness, is
  self-harm, serious.

A skull alone or beside laughter or tears ("💀", "😭💀": "I'm dead", as in laughing) is
ordinary, as are the means alone ("💊💊", "🪒🪥": a pharmacy run, a shave). Variation
selectors, skin tones and joiners do not change what a symbol is.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Collection

from tutor.risk.screen import Evidence, RiskFlag

__all__ = ["emoji_flags"]

LABEL = "self_harm"
MEANS = frozenset("💊🔪🗡🔫🪢🪒")
BLOOD = frozenset("🩸")
DEATH = frozenset("💀☠⚰🪦🔚")
ENDING = frozenset("⚰🪦🔚")  # death without the skull's everyday sense of laughing
SELF = frozenset("🙋🧍")
SAD = frozenset("😔😞😢😭💔😩😣😖😟🥀")
CONFIDENCE = 0.8


def _symbols(text: str) -> set[str] | None:
    """The message's symbols, or None when it has a letter or a digit (then the other
    layers read it) or no symbol at all."""
    found: set[str] = set()
    for ch in text:
        category = unicodedata.category(ch)
        if category[0] in "LN":
            return None
        if category == "So":
            found.add(ch)
    return found or None


def emoji_flags(text: str, labels: Collection[str]) -> list[RiskFlag]:
    """A self-harm flag for a message of symbols only that tells of it (see above); [] for
    any other text, or when the safety file has no self_harm label."""
    if LABEL not in labels or not text.strip():
        return []
    symbols = _symbols(text)
    if symbols is None:
        return []
    severity = ""
    if symbols & MEANS and symbols & (DEATH | BLOOD | SELF):
        severity = "imminent"
    elif (symbols & DEATH and symbols & SELF) or (symbols & ENDING and symbols & SAD):
        severity = "serious"
    if not severity:
        return []
    start = len(text) - len(text.lstrip())
    end = len(text.rstrip())
    return [RiskFlag(LABEL, CONFIDENCE, (Evidence.of(text, start, end),), "offline", "", severity)]
