"""An evaluation suite as its YAML file gives it (tutor.turns.evals plays it): a module and
conversations of learner turns — text, or a form's answers with the text to send instead
when the form is not open — each with its tags. A file that cannot be played raises
SuiteError, saying where."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml


class SuiteError(ValueError):
    """A suite file that cannot be played; the message says where."""


@dataclass(frozen=True)
class SuiteTurn:
    text: str | None = None
    form_id: str | None = None
    answers: dict[str, Any] | None = None
    else_text: str | None = None  # sent instead when the form is not open at that point
    tags: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        return "form" if self.form_id else "text"


@dataclass(frozen=True)
class SuiteConversation:
    name: str
    turns: tuple[SuiteTurn, ...]
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Suite:
    name: str
    module_id: str
    conversations: tuple[SuiteConversation, ...]
    description: str = ""

    @property
    def turn_count(self) -> int:
        """Turns per run, the tutor's opening turn of each conversation included."""
        return sum(len(c.turns) + 1 for c in self.conversations)

    @classmethod
    def load(cls, path: str | Path) -> Suite:
        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise SuiteError(f"{path}: cannot read the suite: {exc}") from None
        return cls.from_dict(data, source=str(path))

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "suite") -> Suite:
        if not isinstance(data, dict):
            raise SuiteError(f"{source}: a suite is a mapping with module and conversations")
        module_id = data.get("module")
        if not isinstance(module_id, str) or not module_id:
            raise SuiteError(f"{source}: set `module:` to a module id")
        raw_convs = data.get("conversations")
        if not isinstance(raw_convs, list) or not raw_convs:
            raise SuiteError(f"{source}: `conversations:` needs at least one conversation")
        convs = []
        for i, conv in enumerate(raw_convs):
            where = f"{source}: conversations[{i}]"
            if not isinstance(conv, dict) or not isinstance(conv.get("turns"), list) or not conv["turns"]:
                raise SuiteError(f"{where}: needs `name:` and a non-empty `turns:` list")
            turns = tuple(_turn(t, f"{where}.turns[{j}]") for j, t in enumerate(conv["turns"]))
            convs.append(SuiteConversation(str(conv.get("name") or f"conversation_{i + 1}"), turns,
                                           tuple(conv.get("tags") or ())))
        return cls(str(data.get("name") or Path(source).stem), module_id, tuple(convs),
                   str(data.get("description") or ""))


def _turn(raw: Any, where: str) -> SuiteTurn:
    if isinstance(raw, str):
        raw = {"text": raw}
    if not isinstance(raw, dict):
        raise SuiteError(f"{where}: a turn is a string, {{text: ...}} or {{form: ..., answers: ...}}")
    tags = tuple(raw.get("tags") or ())
    if raw.get("form"):
        answers = raw.get("answers")
        if not isinstance(answers, dict):
            raise SuiteError(f"{where}: a form turn needs `answers:` (field id -> value)")
        return SuiteTurn(form_id=str(raw["form"]), answers=answers, else_text=raw.get("else_text"), tags=tags)
    text = raw.get("text")
    if not isinstance(text, str) or not text.strip():
        raise SuiteError(f"{where}: a text turn needs non-empty `text:`")
    return SuiteTurn(text=text, tags=tags)
