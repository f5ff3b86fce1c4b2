"""Reflex state: the learner's sends — typed messages, suggestions, form answers, skips —
as a mixin of ChatState (tutor/web/state.py). Each send carries an id the page made
(components/sending): the engine stores it once however often it arrives, and the page is
told, by id, what became of it (stored, or refused with the reason: its text goes back
into the box, a form keeps its answers)."""

from __future__ import annotations

import logging
from typing import Any

import reflex as rx
from reflex_base.utils.form import FormData

from tutor.contract import Form
from tutor.i18n import N_
from tutor.llm.base import LearnerInput
from tutor.render.display import FormState, form_values, message_item
from tutor.storage import dbfaults
from tutor.turns.engine import InputError
from tutor.turns.runtime import get_engine

log = logging.getLogger(__name__)

SIGNED_OUT = N_("Your session has ended. Sign in again to go on — your message is still in the box.")
RECEIPTS = 8  # send ids the page is told about at a time (components/sending)


class ChatSending(rx.State, mixin=True):
    input_error: str = ""
    sent_ids: str = ""  # the latest sends stored (or stored before), by the page's ids
    refused_ids: str = ""  # the latest sends refused: their text goes back into the box
    form_error_key: str = ""  # the form the server refused, its field and why
    form_error_field: str = ""
    form_error: str = ""

    @rx.event
    async def send_text(self, form_data: dict[str, Any]):
        # The page's script (components/sending) names each send with an id it made; a
        # suggestion or a resend comes as `queued` text, a typed message as the box's text.
        text = str(form_data.get("queued") or form_data.get("message") or "")
        return await self._accept(LearnerInput(text=text), None, str(form_data.get("client_id") or ""))

    @rx.event
    async def send_suggestion(self, text: str):
        events = await self._accept(LearnerInput(text=text), None)
        if events is None and self.input_error == self._t(dbfaults.MESSAGE_NOT_SAVED):
            return rx.set_value("message", text)  # "it's still in the box": put it there
        return events

    @rx.event
    async def submit_form(self, form_data: FormData):
        entries = [(str(k), v) for k, v in form_data.multi_items()]
        key = next((str(v) for k, v in reversed(entries) if k == "__form"), "")
        client_id = next((str(v) for k, v in reversed(entries) if k == "__client_id"), "")
        entries = [(k, v) for k, v in entries if k not in ("__form", "__client_id")]
        message_id, _, form_id = key.partition("-")
        raw_form = self._latest_forms.get(form_id) if message_id == str(self.latest_tutor_id) else None
        if raw_form is None:
            if client_id and self.conversation_id:  # a second click on Submit: the same send, stored once
                return await self._accept(LearnerInput(form_id=form_id, answers={}), key, client_id)
            self._set_form_error(key, "", self._t(N_("This form is no longer open: type your answer instead.")))
            return None
        values = form_values(Form.model_validate(raw_form), entries)
        return await self._accept(LearnerInput(form_id=form_id, answers=values), key, client_id)

    @rx.event
    async def skip_form(self, key: str):
        message_id, _, form_id = key.partition("-")
        if not await self._may_write():
            return None
        if message_id != str(self.latest_tutor_id) or form_id not in self._latest_forms:
            return rx.set_focus("message")
        try:
            skipped = await get_engine().skip_form(self.conversation_id, form_id)
        except dbfaults.DatabaseUnavailable as fault:
            dbfaults.report(fault, log, f"conversation {self.conversation_id}: skip not saved")
            self._set_form_error(key, "", self._t(dbfaults.FORM_NOT_SAVED))
            return None
        if skipped:
            self._latest_forms = {k: v for k, v in self._latest_forms.items() if k != form_id}
            self._note_forms({key: FormState("skipped")})
            if self.form_error_key == key:
                self._clear_form_error()
        return rx.set_focus("message")

    async def _accept(self, learner_input: LearnerInput, form_key: str | None, client_id: str = ""):
        # Who sends it, checked now (expired, signed out anywhere, disabled: refused at once);
        # a tab whose state was someone else's has been reset by the check.
        try:
            who = await self.checked_identity()
        except dbfaults.DatabaseUnavailable as fault:
            dbfaults.report(fault, log, "send: who is signed in")
            return self._refuse(form_key, client_id, dbfaults.MESSAGE_NOT_SAVED if form_key is None
                                else dbfaults.FORM_NOT_SAVED)
        if who is None:
            return self._refuse(form_key, client_id, SIGNED_OUT)
        if not self.loaded and (self.conversation_id or (client_id and form_key is None)):
            # The page is still being read (a reconnect or reload: the messages shown are
            # kept from before), or this tab's state is new (the server restarted while the
            # page waited to reconnect): read the conversation now, then take the message —
            # a read already under way is then older than the page and is dropped.
            away = await self._open_now()
            if away is not None and away is not type(self).respond:
                self._receipt("refused", client_id)
                return away
        if not self.conversation_id:
            # The page loaded while the database was down: try loading it again (the
            # learner's text stays in the box for the next send).
            self._receipt("refused", client_id)
            return type(self).load if self.load_error == self._t(dbfaults.UNAVAILABLE) else None
        if self.auth_mode == "anonymous":  # limits per address too, counted by this process
            self.note_place(self.learner_key)
        try:
            pending = await get_engine().accept(self.conversation_id, learner_input, client_id or None, self.language)
        except InputError as exc:
            field = self._known_field(form_key, exc.field_id) if form_key is not None else ""
            return self._refuse(form_key, client_id, exc.message, field)
        except dbfaults.DatabaseUnavailable as fault:
            # Nothing was stored; the text stays in the box (the form keeps its answers).
            dbfaults.report(fault, log, f"conversation {self.conversation_id}: learner message not saved")
            return self._refuse(form_key, client_id, dbfaults.MESSAGE_NOT_SAVED if form_key is None
                                else dbfaults.FORM_NOT_SAVED)
        self._receipt("sent", client_id)
        self.input_error = ""
        if pending.duplicate:
            # Sent twice (a double click, a resend after a reconnect, another tab): stored
            # once. A tab that does not show it yet catches up; nothing else happens.
            if pending.learner.id <= self._latest_id:
                return None
            self.thinking = True
            self._requested += 1
            return type(self).respond
        self._clear_form_error()
        self._close_forms(pending.learner)
        self._append(message_item(pending.learner, self.language))
        self.thinking = True
        self.milestone = ""
        self._requested += 1
        events: list[Any] = [type(self).respond, rx.set_focus("message")]
        if not client_id and form_key is None and learner_input.text is not None:
            events.insert(0, rx.set_value("message", ""))  # the page's script clears it, at once
        return events

    async def _may_write(self) -> bool:
        """Is someone signed in, whose this tab's state is (reset first when it was not)?"""
        try:
            return await self.checked_identity() is not None
        except dbfaults.DatabaseUnavailable as fault:
            dbfaults.report(fault, log, "who is signed in")
            return False

    def _refuse(self, form_key: str | None, client_id: str, message: str, field: str = "") -> None:
        """A send not stored: the reason, by the form (at `field`) or under the box, and the
        page told by id, so it puts the text back into the box."""
        if form_key is not None:
            self._set_form_error(form_key, field, self._t(message))
        else:
            self.input_error = self._t(message)
        self._receipt("refused", client_id)

    def _receipt(self, kind: str, client_id: str) -> None:
        """Tell the page's script (components/sending) what became of a send: the latest
        few ids, in a variable the page watches (no script is sent: the page's policy
        allows no eval)."""
        if client_id:
            name = "sent_ids" if kind == "sent" else "refused_ids"
            setattr(self, name, " ".join([*getattr(self, name).split()[-(RECEIPTS - 1):], client_id]))

    def _known_field(self, form_key: str, field_id: str | None) -> str:
        """The field to show the message at; "" for the whole form (an unknown field)."""
        form = self._latest_forms.get(form_key.partition("-")[2]) or {}
        ids = {f.get("id") for f in form.get("fields") or [] if isinstance(f, dict)}
        return field_id if field_id in ids else ""

    def _set_form_error(self, key: str, field_id: str, message: str) -> None:
        self.form_error_key, self.form_error_field, self.form_error = key, field_id, message

    def _clear_form_error(self) -> None:
        if self.form_error_key or self.form_error:
            self._set_form_error("", "", "")
