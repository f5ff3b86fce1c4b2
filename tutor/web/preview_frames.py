"""Reflex glue: a preview update sent to the tab's socket without taking the tab's state lock.

A reply being written updates the page about six times a second (tutor.turns.live). Through
the state (`async with self`), each update takes the tab's lock, marks the variables dirty,
walks the state tree for the delta and cleans it, then emits; profiled under load, that was
a fifth of a busy worker's interpreter time, more than the emit itself. The update's content
is already known here (StreamFeed names each slot and its new value), so after the first
update of a reply (which goes through the state: it shows the preview and checks the tab),
the rest are sent as the same delta the state would have sent.

Only where the tab's state lives in this process (Reflex's memory state manager: one worker,
without Redis) — there the state object is the tab's own, so each update:
- is sent only while the tab still shows the conversation and the preview, for the same
  owner (read from the state object between two awaits, as a handler holding the lock left
  it): a tab that moved on or changed hands gets nothing, and a page that loaded its view
  again (a reconnect) is left to the state path, which sends it the reply so far whole;
- is also written into the state object, without marking anything to send (the page has
  it), so the state knows what the page shows: a view loaded again and the turn's end
  (`StreamFeed.clear`) empty exactly those slots.
With Redis the state lives there between events and another worker may hold the tab, so the
updates go through the state as before. Measured: docs/benchmarks.md, "Preview updates
outside the tab's lock".
"""

from __future__ import annotations

from typing import Any

from reflex.istate.manager.memory import StateManagerMemory
from reflex_base.constants.state import FIELD_MARKER
from reflex_base.event.context import EventContext

from tutor.turns.live import DirectSend


def direct_sender(state: Any, conversation_id: int, owner: str) -> DirectSend | None:
    """A sender of preview updates for the tab of `state` (a background task's state, the
    chat page's), or None where updates must go through the state. It returns False, sending
    nothing, when the tab no longer shows `conversation_id` for `owner` or no longer shows
    the preview (a reconnect loads the page's view again): the caller then goes through the
    state, which decides."""
    context = EventContext.get()
    if not isinstance(context.state_manager, StateManagerMemory):
        return None
    live = state.__wrapped__  # the tab's state object itself (memory manager: one per tab)
    name = type(live).get_full_name()

    async def send(updates: dict[str, Any]) -> bool:
        if live.conversation_id != conversation_id or live._bound != owner or not live.streaming:
            return False  # moved on, changed hands, or the page loaded its view again
        values = live.__dict__
        delta: dict[str, Any] = {}
        for var, value in updates.items():
            values[var] = value
            delta[var + FIELD_MARKER] = value
        await context.emit_delta({name: delta})
        return True

    return send
