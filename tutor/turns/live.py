"""Getting new message content to the browser without re-sending what it already has.

The chat page receives a conversation in three kinds of pieces, and each piece is its own
state variable, because Reflex re-sends a variable whole whenever it changes (reflex#4156):

1. the **history**, once, when the page loads;
2. one **turn bucket** per turn since then: the learner's message and the reply to it
   (`tutor.web.state` fills `live_<n>`; a new turn touches only its own bucket);
3. the **reply being written**, while a model streams it: `StreamFeed` below.

The reply being written is split further, so that each update carries only what is new:

- `stream_block_<i>`: text block *i* once it is complete, rendered by the one markdown
  renderer — sent once;
- `stream_tail_<j>`: the next piece of the block still being written, as plain text —
  each piece sent once, appended by the page after the pieces before it;
- `stream_tail_from` / `stream_type`: where the growing block's pieces start and what
  kind of block it is;
- `stream_media`, `stream_forms` (an outline: title and field labels), `stream_suggestions`
  and `stream_prompt`: once complete and valid, each sent when it changes.

Updates are throttled: at most one every `min_interval` seconds, carrying whatever is new.
The reply so far is read at most once every `min_look` seconds: a model streaming a token
per event would otherwise have it scrubbed and parsed again for every token. The defaults
read and send about six times a second (the text grows visibly at least five times a
second while the model writes; socket_bench: 12 frames a turn instead of 14, and less CPU),
and every event is read until the first update, so the first text comes at once.
When the reply is final, `clear()` empties exactly the slots that were used and the stored
reply joins its turn bucket; the preview never outlives the reply that replaces it.
"""

from __future__ import annotations

import copy
import dataclasses
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

from tutor.contract.partial import Preview, preview
from tutor.i18n import N_
from tutor.llm.redact import scrub
from tutor.llm.gate import queue_line
from tutor.render.display import BlockItem, MediaItem, block_item, media_item
from tutor.render.markdown import render_inline

__all__ = ["STREAM_BLOCKS", "STREAM_TAILS", "FormOutline", "StreamFeed", "fold_buckets", "stream_vars"]

STREAM_BLOCKS = 12  # blocks previewed; a longer reply shows the rest when it is final
STREAM_TAILS = 48  # pieces of one growing block; past that it shows when complete

# Inline markup shown bare while a block grows would flash as "**" and "`"; it is dropped
# from the growing text only (the complete block is rendered properly).
_GROWING_NOISE = re.compile(r"\*\*|__|`")


@dataclasses.dataclass
class FormOutline:
    """A form in a reply still being written: shown, not yet answerable."""

    title: str
    fields: list[str] = dataclasses.field(default_factory=list)


def fold_buckets(page: Any, buckets: int) -> None:
    """The turn buckets join the history as they are shown: their items (already rendered)
    appended in order, their form changes merged into the history's. Nothing is read from
    the database and nothing rendered again, so this is cheap under the tab's lock; only
    buckets that hold something are emptied (an assignment re-sends a variable).
    `page`: the chat page's state (history, history_forms, live_<i>, live_forms_<i>)."""
    history, forms = list(page.history), dict(page.history_forms)
    for i in range(buckets):
        if items := getattr(page, f"live_{i}"):
            history.extend(items)
            setattr(page, f"live_{i}", [])
        if changed := getattr(page, f"live_forms_{i}"):
            forms.update(changed)
            setattr(page, f"live_forms_{i}", {})
    page.history = history
    if forms != page.history_forms:
        page.history_forms = forms


def stream_vars() -> dict[str, tuple[type, Any]]:
    """Every state variable of the reply being written: name -> (type, empty value)."""
    out: dict[str, tuple[type, Any]] = {
        f"stream_block_{i}": (BlockItem, BlockItem("", "")) for i in range(STREAM_BLOCKS)
    }
    out.update({f"stream_tail_{j}": (str, "") for j in range(STREAM_TAILS)})
    out["stream_tail_from"] = (int, 0)
    out["stream_type"] = (str, "")
    out["stream_media"] = (list[MediaItem], [])
    out["stream_forms"] = (list[FormOutline], [])
    out["stream_suggestions"] = (list[str], [])
    out["stream_prompt"] = (str, "")
    return out


def empty_slots() -> dict[str, Any]:
    """Every slot's empty value (fresh objects, safe to hand to the page state)."""
    return {name: empty for name, (_, empty) in stream_vars().items()}


def _empty(name: str) -> Any:
    """One slot's empty value, fresh (a turn's end empties a dozen slots of ~60; building
    all of them each time was ~2% of a busy worker's CPU)."""
    return copy.copy(_EMPTIES[name])


_EMPTIES = empty_slots()  # copied (_empty), never handed out
# Compared against, never handed out: what an extras slot holds before anything is sent.
_UNSENT = {name: value for name, value in _EMPTIES.items() if name in
           ("stream_media", "stream_forms", "stream_suggestions", "stream_prompt")}


class StreamFeed:
    """Turns the growing raw text of one reply into the few variable updates that are new.

    `push(raw)` returns {variable name: new value}, empty when there is nothing worth
    sending yet; `clear()` returns the updates that empty every slot used so far.
    """

    def __init__(
        self,
        *,
        min_interval: float = 0.15,
        min_look: float = 0.15,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.min_interval = min_interval
        self.min_look = min_look
        self.clock = clock
        self._last = self._looked = float("-inf")  # last update sent; last read of the reply
        self._reset_counters()

    def _reset_counters(self) -> None:
        self._done = 0  # complete blocks sent
        self._tails = 0  # tail slots used
        self._tail_from = 0
        self._type = ""  # the growing block's type, as sent
        self._text = ""  # the growing block's text, as sent
        self._extras: dict[str, Any] = {}  # extras sent, by variable name
        self._models: dict = {}  # complete media and forms read so far (contract.partial.preview)

    def push(self, raw: str, *, force: bool = False) -> dict[str, Any]:
        now = self.clock()
        started = self._last != float("-inf")  # until the first update, every event is read
        if not force and started and (now - self._last < self.min_interval
                                      or now - self._looked < self.min_look):
            return {}
        self._looked = now
        # A key the model echoes is never shown, not even for a moment (tutor.llm.redact.scrub).
        updates = self._diff(preview(scrub(raw), self._models))
        if updates:
            self._last = now
        return updates

    def clear(self) -> dict[str, Any]:
        """The updates that empty exactly the slots used so far."""
        used = [f"stream_block_{i}" for i in range(self._done)] + [f"stream_tail_{j}" for j in range(self._tails)]
        used += [name for name, sent in (("stream_tail_from", self._tail_from), ("stream_type", self._type)) if sent]
        updates = {name: _empty(name) for name in [*used, *self._extras]}
        self._reset_counters()
        return updates

    def _diff(self, p: Preview) -> dict[str, Any]:
        updates: dict[str, Any] = {}
        blocks = p.blocks[:STREAM_BLOCKS]
        while self._done < len(blocks) and blocks[self._done].complete:
            done = blocks[self._done]
            updates[f"stream_block_{self._done}"] = block_item(done.type, done.content, done.level)
            self._done += 1
            self._start_growing(updates)  # the growing block (if any) moved into its slot
        growing = blocks[self._done] if self._done < len(blocks) else None
        if growing is not None:
            if growing.type != self._type:
                self._type = updates["stream_type"] = growing.type
            text = _GROWING_NOISE.sub("", growing.content)
            if not text.startswith(self._text):  # rewritten (rare): start its pieces over
                self._start_growing(updates, keep_type=True)
            new = text[len(self._text):]
            if new and self._tails < STREAM_TAILS:
                updates[f"stream_tail_{self._tails}"] = new
                self._tails += 1
                self._text = text
        for name, value in _extras(p).items():
            if value != self._extras.get(name, _UNSENT[name]):
                self._extras[name] = updates[name] = value
        return updates

    def _start_growing(self, updates: dict[str, Any], *, keep_type: bool = False) -> None:
        self._text = ""
        if self._tail_from != self._tails:
            self._tail_from = updates["stream_tail_from"] = self._tails
        if not keep_type and self._type:
            self._type = updates["stream_type"] = ""


def _extras(p: Preview) -> dict[str, Any]:
    return {
        "stream_media": [media_item(m.model_dump(mode="json")) for m in p.media],
        "stream_forms": [FormOutline(f.title or "", [field.label for field in f.fields]) for f in p.forms],
        "stream_suggestions": list(dict.fromkeys(p.suggestions)),
        "stream_prompt": render_inline(p.prompt) if p.prompt else "",
    }


REASK_STATUS = N_("Let me put that more clearly…")  # shown in the module's language

# Sends a preview update without entering the page's state; False when it did not (PagePreview).
DirectSend = Callable[[dict[str, Any]], Awaitable[bool]]


class PagePreview:
    """Shows a reply while it is written (a TurnListener for the page's state): the feed
    decides what is new and worth sending; each update changes only the slots it names.
    `state` is the chat page's Reflex state (entered with `async with`, `_apply(updates)`).
    `direct`, where the web side has one (tutor.web.preview_frames), sends an update without
    entering the state, and says False when the tab no longer shows this conversation or the
    preview; the first update of a reply goes through the state, which shows the preview, and
    so does an update `direct` declined (the state then decides: drop it, or send everything
    so far again to a page that loaded its view again)."""

    def __init__(self, state: Any, conversation_id: int, direct: DirectSend | None = None) -> None:
        self.state = state
        self.conversation_id = conversation_id
        self.feed = StreamFeed()
        self.direct = direct
        self._shown = False  # the state says the preview is on the page

    async def text(self, raw: str) -> None:
        updates = self.feed.push(raw)
        if not updates:
            return
        if self._shown and self.direct is not None and await self.direct(updates):
            return
        async with self.state:
            if self.state.conversation_id != self.conversation_id:
                return  # the tab moved on to another conversation
            if self._shown and not self.state.streaming:
                # The page loaded its view again (a reconnect), which emptied the preview:
                # everything so far is sent again.
                self.feed.clear()
                updates = self.feed.push(raw, force=True)
            self.state._apply(updates)
            if not self.state.streaming:
                self.state.streaming = True
            if self.state.stream_status:
                self.state.stream_status = ""
            self._shown = True

    async def queued(self, position: int) -> None:
        """The turn waits for a model slot (position 1: next), or has one (0)."""
        async with self.state:
            if self.state.conversation_id == self.conversation_id:
                line = self.state._t(queue_line(position)) if position else ""  # in the module's language
                if self.state.stream_status != line:
                    self.state.stream_status = line

    async def status(self, status: str) -> None:
        if status != "reasking":
            return
        async with self.state:
            if self.state.conversation_id == self.conversation_id:
                self.state._apply(self.feed.clear())
                self.state.streaming = self._shown = False
                self.state.stream_status = self.state._t(REASK_STATUS)
