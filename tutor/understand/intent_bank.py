"""The exemplar bank of what learners' messages do (tutor/understand/intents.yaml): read by the
intent reader (tutor.teach.understanding), by the topic reader for "not this module"
(tutor.teach.meaning), and by the safety screen as ordinary lesson talk (tutor.content.modules)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml

__all__ = ["ACTS", "BANK", "bank", "lesson_talk"]

BANK = Path(__file__).with_name("intents.yaml")
ACTS = ("statement", "question", "more", "next", "skip", "retry", "summary", "exercise", "share", "chat", "medical")


@lru_cache(maxsize=1)
def bank() -> tuple[tuple[str, str], ...]:
    """(act, text) for every exemplar, in file order; ValueError for an unknown act."""
    data = yaml.safe_load(BANK.read_text(encoding="utf-8")) or {}
    out = []
    for act, texts in data.items():
        if act not in ACTS:
            raise ValueError(f"{BANK}: unknown act {act!r}; expected one of {', '.join(ACTS)}")
        out += [(act, str(text)) for text in texts or ()]
    return tuple(out)


def lesson_talk() -> list[str]:
    """Every exemplar's text: what learners say in a lesson, none of it a crisis."""
    return [text for _, text in bank()]
