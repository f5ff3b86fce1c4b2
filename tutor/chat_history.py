"""The chat page's history as plain data, for the Reflex state (tutor.state) to hold: the
learner's conversation read and its messages rendered in a worker thread, so a long
conversation's markdown never holds up the event loop; and which forms of the latest
reply are still open, for the learner's next turn to close."""

from __future__ import annotations

import asyncio

from tutor.display import MessageItem, closed_forms, message_item
from tutor.runtime import get_engine
from tutor.views import ConversationView, MessageView

__all__ = ["message_items", "open_forms", "read_conversation"]


async def read_conversation(key: str, module_id: str, language: str) -> tuple[ConversationView, list[MessageItem]]:
    """The learner's conversation in the module (made if new), its history rendered in a
    worker thread: a long conversation's markdown never holds up the event loop."""
    view = await get_engine().open(key, module_id, defer_opening=True)
    return view, await asyncio.to_thread(message_items, view.messages, language)


def message_items(messages: list[MessageView], language: str) -> list[MessageItem]:
    return [message_item(m, language) for m in messages]


def open_forms(view: MessageView) -> dict[str, dict]:
    """The forms of a tutor message that are still open, by form id (as stored)."""
    closed = {key.partition("-")[2] for key in closed_forms(view)}
    forms = ((view.response or {}).get("content") or {}).get("forms") or []
    return {f["id"]: f for f in forms if isinstance(f, dict) and f.get("id") not in closed}
