"""One stored message as a plain row (StoredMessage): a turn's hot paths read messages
with statements built once on a Core connection (tutor.turns.conversations), and building
ORM objects for them cost more CPU than the database itself (benchmarks/load_bench.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tutor.storage.store import Message

__all__ = ["StoredMessage"]

_MESSAGE_COLUMNS = tuple(Message.__table__.c.keys())


class StoredMessage:
    """One stored message as a plain row: Message's columns and its JSON readers."""

    __slots__ = _MESSAGE_COLUMNS
    flags, parsed, answers, form_states = Message.flags, Message.parsed, Message.answers, Message.form_states

    def __init__(self, values: Any) -> None:
        for name in _MESSAGE_COLUMNS:
            setattr(self, name, values[name])

    @classmethod
    def from_tuple(cls, row: Iterable[Any]) -> StoredMessage:
        """From a row of a statement selecting the message table (its columns in order)."""
        message = cls.__new__(cls)
        for name, value in zip(_MESSAGE_COLUMNS, row):
            setattr(message, name, value)
        return message
