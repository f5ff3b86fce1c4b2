"""Reflex state: the conversation as the chat page shows it since it loaded, as a mixin of
ChatState (tutor/web/state.py): the history once, then one small bucket per turn (the
learner's message and the reply to it) and the forms each turn closed; after LIVE_BUCKETS
turns without a reload the buckets join the history (tutor.turns.live.fold_buckets). The
reply being written is tutor.turns.live's StreamFeed, cleared here once the turn ends."""

from __future__ import annotations

from typing import Any

import reflex as rx

from tutor.contract import Form
from tutor.i18n import translator
from tutor.render.display import FormState, MessageItem, answer_lines, answered_in_chat, message_item
from tutor.render.views import MessageView, TurnResult
from tutor.turns.live import PagePreview, fold_buckets
from tutor.web.chat_history import message_items, open_forms

LIVE_BUCKETS = 128  # turns since the page loaded before the buckets join the history
HISTORY = -1  # "bucket" index of the history loaded with the page


class ChatLive(rx.State, mixin=True):
    def _show_history(self, messages: list[MessageView], items: list[MessageItem] | None = None) -> None:
        """Everything stored, with each form's status as stored; live buckets emptied.
        `items`: the messages already rendered (off the event loop, message_items)."""
        self.history = items if items is not None else message_items(messages, self.language)
        self.history_forms = {}
        # Only the buckets up to the current one can hold anything (each read of a variable
        # through a background task's state proxy costs: all 256 were ~8% of a busy worker).
        for i in range(self._bucket + 1):
            if getattr(self, f"live_{i}"):
                setattr(self, f"live_{i}", [])
            if getattr(self, f"live_forms_{i}"):
                setattr(self, f"live_forms_{i}", {})
        self._bucket = self._latest_bucket = HISTORY
        self._latest_id = max((m.id for m in messages), default=0)
        latest = next((m for m in reversed(messages) if m.role == "tutor"), None)
        self.latest_tutor_id = latest.id if latest else 0
        self._latest_forms = open_forms(latest) if latest else {}

    def _apply(self, updates: dict[str, Any]) -> None:
        for name, value in updates.items():
            setattr(self, name, value)

    def _end_preview(self, preview: PagePreview) -> None:
        if preview.conversation_id == self.conversation_id:
            self._apply(preview.feed.clear())
        if self.streaming:  # an assignment is sent to the page, changed or not
            self.streaming = False
        if self.stream_status:
            self.stream_status = ""

    def _add_reply(self, result: TurnResult, item: MessageItem | None = None) -> None:
        reply = result.reply
        item = item or message_item(reply, self.language)
        if result.answered is not None:  # a check answered in the message box reads answered where it was asked
            self._note_forms({f"{self.latest_tutor_id}-{result.answered[0]}": FormState(
                "answered", answered_in_chat(result.answered[1], translator(self.language)))})
        self._append(item)
        self.latest_tutor_id = reply.id
        self._latest_bucket = self._bucket
        self._latest_forms = open_forms(reply)
        self._set_progress(result.progress, celebrate=True)
        # result.operator_message (addresses, variables, upstream errors) is the operator's:
        # the engine logged it; the learner's reply already says, calmly, what happened.
        self.operator_notice = ""
        self.announcement = self._t("Tutor: {text}", text=item.plain) if item.plain else self._t("Tutor replied.")

    def _append(self, item: MessageItem) -> None:
        if item.role == "learner" or self._bucket == HISTORY:
            if self._bucket + 1 >= LIVE_BUCKETS:  # a very long session: the buckets join the history
                fold_buckets(self, LIVE_BUCKETS)
                self._bucket = self._latest_bucket = HISTORY
            self._bucket += 1
        name = f"live_{self._bucket}"
        setattr(self, name, [*getattr(self, name), item])
        self._latest_id = max(self._latest_id, item.id)

    def _close_forms(self, learner: MessageView) -> None:
        """The learner's turn closed the latest message's open forms (the engine stored
        that): the one answered shows the answers, the others show as skipped."""
        if not self._latest_forms:
            return
        changed: dict[str, FormState] = {}
        for form_id, raw in self._latest_forms.items():
            key = f"{self.latest_tutor_id}-{form_id}"
            if form_id == learner.form_id:
                lines = answer_lines(Form.model_validate(raw), learner.answers or {})
                changed[key] = FormState("submitted", lines)
            else:
                changed[key] = FormState("skipped")
        self._latest_forms = {}
        self._note_forms(changed)

    def _note_forms(self, changed: dict[str, FormState]) -> None:
        name = "history_forms" if self._latest_bucket == HISTORY else f"live_forms_{self._latest_bucket}"
        setattr(self, name, {**getattr(self, name), **changed})
