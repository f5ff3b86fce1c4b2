"""The exemplar bank of what learners' messages do (tutor/understand/intents.yaml): read by the
intent reader (tutor.teach.understanding), by the topic reader for "not this module"
(tutor.teach.meaning, with the questions about other subjects in elsewhere.yaml), and by the
safety screen as ordinary lesson talk (tutor.content.modules)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import yaml

__all__ = ["ACTS", "BANK", "ELSEWHERE_BANK", "SHARE_BANK", "SHARE_KINDS", "bank", "lesson_talk", "other_subjects",
           "share_bank"]

BANK = Path(__file__).with_name("intents.yaml")
ELSEWHERE_BANK = Path(__file__).with_name("elsewhere.yaml")
SHARE_BANK = Path(__file__).with_name("shares.yaml")
SHARE_KINDS = ("struggle", "progress", "help", "plain")
ACTS = ("statement", "question", "more", "next", "skip", "retry", "summary", "exercise", "share", "chat", "medical")


def _by_kind(path: Path, kinds: tuple[str, ...], what: str) -> tuple[tuple[str, str], ...]:
    """(kind, text) for every line of a bank file whose top-level keys are kinds, in file
    order; ValueError for a key not in `kinds`."""
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    out = []
    for kind, texts in data.items():
        if kind not in kinds:
            raise ValueError(f"{path}: unknown {what} {kind!r}; expected one of {', '.join(kinds)}")
        out += [(kind, str(text)) for text in texts or ()]
    return tuple(out)


@lru_cache(maxsize=1)
def bank() -> tuple[tuple[str, str], ...]:
    """(act, text) for every exemplar, in file order; ValueError for an unknown act."""
    return _by_kind(BANK, ACTS, "act")


@lru_cache(maxsize=1)
def other_subjects() -> tuple[str, ...]:
    """Questions about other subjects (tutor/understand/elsewhere.yaml), beside the bank's
    `chat`: what the topic reader learns "not this module" from."""
    return tuple(text for _, text in _by_kind(ELSEWHERE_BANK, ("elsewhere",), "list"))


@lru_cache(maxsize=1)
def share_bank() -> tuple[tuple[str, str], ...]:
    """(kind, text) for every personal share in tutor/understand/shares.yaml: what it is
    about (SHARE_KINDS); ValueError for an unknown kind."""
    return _by_kind(SHARE_BANK, SHARE_KINDS, "kind")


def lesson_talk() -> list[str]:
    """Every exemplar's text: what learners say in a lesson, none of it a crisis."""
    return [text for _, text in bank()]
