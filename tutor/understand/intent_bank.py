"""The exemplar bank of what learners' messages do (tutor/understand/intents.yaml): read by the
intent reader (tutor.teach.understanding), by the topic reader for "not this module"
(tutor.teach.meaning, with the questions about other subjects in elsewhere.yaml), and by the
safety screen as ordinary lesson talk (tutor.content.modules)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml

__all__ = ["ACTS", "BANK", "ELSEWHERE_BANK", "bank", "lesson_talk", "other_subjects"]

BANK = Path(__file__).with_name("intents.yaml")
ELSEWHERE_BANK = Path(__file__).with_name("elsewhere.yaml")
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


@lru_cache(maxsize=1)
def other_subjects() -> tuple[str, ...]:
    """Questions about other subjects (tutor/understand/elsewhere.yaml), beside the bank's
    `chat`: what the topic reader learns "not this module" from."""
    data = yaml.safe_load(ELSEWHERE_BANK.read_text(encoding="utf-8")) or {}
    texts = data.get("elsewhere") if isinstance(data, dict) else None
    if not isinstance(texts, list):
        raise ValueError(f"{ELSEWHERE_BANK}: expected a mapping with an `elsewhere:` list")
    return tuple(str(text) for text in texts)


def lesson_talk() -> list[str]:
    """Every exemplar's text: what learners say in a lesson, none of it a crisis."""
    return [text for _, text in bank()]
