"""The chat page's history as plain data, for the Reflex state (tutor.web.state) to hold: the
learner's conversation read and its messages rendered in a worker thread, so a long
conversation's markdown never holds up the event loop; and which forms of the latest
reply are still open, for the learner's next turn to close. A new conversation's opening
turn is refused (InputError) once the learner has spent today's tokens."""

from __future__ import annotations

import asyncio

from tutor.access.usage import LimitReached
from tutor.render.display import MessageItem, closed_forms, message_item
from tutor.render.views import ConversationView, MessageView
from tutor.turns.conversations import InputError
from tutor.turns.runtime import get_engine

__all__ = ["message_items", "open_forms", "read_conversation"]


async def read_conversation(key: str, module_id: str, language: str) -> tuple[ConversationView, list[MessageItem]]:
    """The learner's conversation in the module (made if new), its history rendered in a
    worker thread: a long conversation's markdown never holds up the event loop."""
    engine = get_engine()
    view = await engine.open(key, module_id, defer_opening=True)
    if view.awaiting_reply and not view.messages and engine.usage is not None:
        # The opening turn is a model call the learner causes: not once today's tokens are
        # spent (the conversation waits, empty, for tomorrow's allowance).
        try:
            await engine.usage.check_tokens(key)
        except LimitReached as spent:
            raise InputError(spent.message) from None
    return view, await asyncio.to_thread(message_items, view.messages, language)


def message_items(messages: list[MessageView], language: str) -> list[MessageItem]:
    return [message_item(m, language) for m in messages]


def open_forms(view: MessageView) -> dict[str, dict]:
    """The forms of a tutor message that are still open, by form id (as stored)."""
    closed = {key.partition("-")[2] for key in closed_forms(view)}
    forms = ((view.response or {}).get("content") or {}).get("forms") or []
    return {f["id"]: f for f in forms if isinstance(f, dict) and f.get("id") not in closed}
