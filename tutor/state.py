"""Reflex state: turns UI events into engine calls. Thin on purpose.

How new content reaches the page without re-sending history is one mechanism, described
in `tutor.live`: the history once at load, one small bucket per turn since (the learner's
message and the reply to it, and the forms the turn closed), and the reply being written
in slots of its own (`StreamFeed`). After LIVE_BUCKETS turns without a reload, the page
re-syncs once from the database.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import parse_qs, urlsplit

import reflex as rx
from reflex_base.utils.form import FormData

from tutor import dbfaults, settings
from tutor.auth_state import TutorState
from tutor.contract import Form
from tutor.display import (
    FormState,
    MessageItem,
    ProgressItem,
    answer_lines,
    closed_forms,
    form_values,
    message_item,
    progress_item,
)
from tutor.claims import current_holder
from tutor.engine import InputError
from tutor.i18n import N_, supported, translator
from tutor.live import PagePreview, empty_slots, stream_vars
from tutor.llm.base import LearnerInput
from tutor.modules import ModuleNotServable, public_problem
from tutor.progress_display import CompletionItem, completion_item
from tutor.runtime import get_engine
from tutor.views import MessageView, ProgressView, TurnResult

log = logging.getLogger(__name__)

SIGNED_OUT = "Your session has ended. Sign in again to go on — your message is still in the box."

LIVE_BUCKETS = 128  # turns since the page loaded before one re-sync from the database
HISTORY = -1  # "bucket" index of the history loaded with the page
RECEIPTS = 8  # send ids the page is told about at a time (components/sending)


_bucket_annotations: dict[str, Any] = {}
for _i in range(LIVE_BUCKETS):
    _bucket_annotations[f"live_{_i}"] = list[MessageItem]
    _bucket_annotations[f"live_forms_{_i}"] = dict[str, FormState]
_STREAM_VARS = stream_vars()


class ChatState(TutorState):
    module_id: str = ""
    module_title: str = ""
    conversation_id: int = 0
    load_error: str = ""
    loaded: bool = False

    history: list[MessageItem] = []
    history_forms: dict[str, FormState] = {}
    __annotations__.update(_bucket_annotations)
    vars().update({name: {} if "forms" in name else [] for name in _bucket_annotations})
    # The reply being written (tutor.live.StreamFeed): one variable per slot.
    __annotations__.update({name: kind for name, (kind, _) in _STREAM_VARS.items()})
    vars().update({name: empty for name, (_, empty) in _STREAM_VARS.items()})
    streaming: bool = False  # some of the reply being written is on the page
    stream_status: str = ""  # a calm line while the reply is written again
    _bucket: int = HISTORY  # the bucket the next reply joins
    _latest_bucket: int = HISTORY  # where the latest tutor message is
    _latest_forms: dict[str, dict] = {}  # its forms that are still open, by form id

    # The module's language (tutor.i18n): the page's own words (`ui`, msgid -> text) and
    # every message the page shows come in it. English until a module is loaded.
    language: str = "en"
    ui: dict[str, str] = translator("en").page_strings()

    latest_tutor_id: int = 0
    form_error_key: str = ""  # the form the server refused, its field and why
    form_error_field: str = ""
    form_error: str = ""

    thinking: bool = False
    input_error: str = ""
    sent_ids: str = ""  # the latest sends stored (or stored before), by the page's ids
    refused_ids: str = ""  # the latest sends refused: their text goes back into the box
    operator_notice: str = ""
    announcement: str = ""

    progress: ProgressItem = ProgressItem()
    milestone: str = ""  # the celebration to show, if a milestone was reached this turn
    completion: CompletionItem = CompletionItem()  # the ending, once every topic is done
    confirm_restart: bool = False  # "Start over" (chat menu) waits for a confirmation

    _responding: bool = False
    _latest_id: int = 0  # the newest stored message this tab shows
    # The process whose task is answering for this tab. Tab state outlives a worker (it is
    # in Redis with several workers): a tab that reconnects to another worker after a crash
    # must not wait on a task that died with the old one.
    _responding_by: str = ""
    _requested: int = 0

    # ------------------------------------------------------------------ loading

    @rx.event
    async def load(self):
        module_id = _query_param(str(self.router.url), "module")
        self._reset_view()
        self.module_id = module_id
        try:
            engine = get_engine()
            key, away = await self.signed_in_learner()
            if away is not None:
                return away
            module = engine.library.get(module_id)
            self._set_language(module.language)
            view = await engine.open(key, module_id, defer_opening=True)
        except ModuleNotServable as exc:
            self.load_error = public_problem(str(exc), engine.library.directory) or \
                self._t("There is no module called {module!r}.", module=module_id)
            self.loaded = True
            return None
        except dbfaults.DatabaseUnavailable as fault:
            dbfaults.report(fault, log, f"chat page for {module_id}")
            self.load_error = self._t(dbfaults.UNAVAILABLE)  # sending loads the page again (see _accept)
            self.loaded = True
            return None
        self.module_title = module.title
        self.conversation_id = view.id
        self._show_history(view.messages)
        self._set_progress(view.progress, celebrate=False)
        self.loaded = True
        if view.awaiting_reply:
            # A new conversation, or a turn a restart cut short: the tutor answers now.
            self.thinking = True
            self._requested += 1
            return ChatState.respond
        return None

    def _t(self, message: str, /, **params: Any) -> str:
        """Words for this page in the module's language (a msgid, or a Phrase from the core)."""
        return translator(self.language)(message, **params)

    def _set_language(self, language: str) -> None:
        found = supported(language)
        if found != self.language:
            self.language, self.ui = found, translator(found).page_strings()

    def _reset_view(self) -> None:
        self.load_error = ""
        self.loaded = False
        self.module_title = ""
        self.conversation_id = 0
        self.progress = ProgressItem()
        self._show_history([])
        self.thinking = False
        self.input_error = self.operator_notice = self.announcement = self.milestone = ""
        self.completion, self.confirm_restart = CompletionItem(), False
        self._clear_form_error()
        self._apply({k: v for k, v in empty_slots().items() if getattr(self, k) != v})
        self.streaming, self.stream_status = False, ""

    def _show_history(self, messages: list[MessageView]) -> None:
        """Everything stored, with each form's status as stored; live buckets emptied."""
        self.history = [message_item(m, self.language) for m in messages]
        self.history_forms = {}
        for i in range(LIVE_BUCKETS):
            if getattr(self, f"live_{i}"):
                setattr(self, f"live_{i}", [])
            if getattr(self, f"live_forms_{i}"):
                setattr(self, f"live_forms_{i}", {})
        self._bucket = self._latest_bucket = HISTORY
        self._latest_id = max((m.id for m in messages), default=0)
        latest = next((m for m in reversed(messages) if m.role == "tutor"), None)
        self.latest_tutor_id = latest.id if latest else 0
        self._latest_forms = _open_forms(latest) if latest else {}

    # ------------------------------------------------------------------ sending

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
        if not self.conversation_id and not self.loaded and client_id and form_key is None:
            # This tab's state is new (the server restarted while the page waited to
            # reconnect): open the conversation again, then take the waiting message.
            away = await self.load()
            if away is not None and away is not ChatState.respond:
                self._receipt("refused", client_id)
                return away
        if not self.conversation_id:
            # The page loaded while the database was down: try loading it again (the
            # learner's text stays in the box for the next send).
            self._receipt("refused", client_id)
            return ChatState.load if self.load_error == self._t(dbfaults.UNAVAILABLE) else None
        if not await self.still_signed_in():  # expired, signed out elsewhere, or disabled
            message = self._t(SIGNED_OUT)
            if form_key is not None:
                self._set_form_error(form_key, "", message)
            else:
                self.input_error = message
            self._receipt("refused", client_id)
            return None
        try:
            pending = await get_engine().accept(self.conversation_id, learner_input, client_id or None)
        except InputError as exc:
            if form_key is not None:
                self._set_form_error(form_key, self._known_field(form_key, exc.field_id), self._t(exc.message))
            else:
                self.input_error = self._t(exc.message)
            self._receipt("refused", client_id)  # the page puts the text back into the box
            return None
        except dbfaults.DatabaseUnavailable as fault:
            # Nothing was stored; the text stays in the box (the form keeps its answers).
            dbfaults.report(fault, log, f"conversation {self.conversation_id}: learner message not saved")
            if form_key is not None:
                self._set_form_error(form_key, "", self._t(dbfaults.FORM_NOT_SAVED))
            else:
                self.input_error = self._t(dbfaults.MESSAGE_NOT_SAVED)
            self._receipt("refused", client_id)
            return None
        self._receipt("sent", client_id)
        self.input_error = ""
        if pending.duplicate:
            # Sent twice (a double click, a resend after a reconnect, another tab): stored
            # once. A tab that does not show it yet catches up; nothing else happens.
            if pending.learner.id <= self._latest_id:
                return None
            self.thinking = True
            self._requested += 1
            return ChatState.respond
        self._clear_form_error()
        self._close_forms(pending.learner)
        self._append(message_item(pending.learner, self.language))
        self.thinking = True
        self.milestone = ""
        self._requested += 1
        events: list[Any] = [ChatState.respond, rx.set_focus("message")]
        if not client_id and form_key is None and learner_input.text is not None:
            events.insert(0, rx.set_value("message", ""))  # the page's script clears it, at once
        return events

    def _receipt(self, kind: str, client_id: str) -> None:
        """Tell the page's script (components/sending) what became of a send: the latest
        few ids, in a variable the page watches (no script is sent: the page's policy
        allows no eval)."""
        if client_id:
            name = "sent_ids" if kind == "sent" else "refused_ids"
            setattr(self, name, " ".join([*getattr(self, name).split()[-(RECEIPTS - 1):], client_id]))

    @rx.event(background=True)
    async def respond(self):
        async with self:
            if self._responding and self._responding_by == current_holder():
                return
            self._responding, self._responding_by = True, current_holder()
        engine = get_engine()
        while True:
            async with self:
                seen, conversation_id = self._requested, self.conversation_id
            preview = PagePreview(self, conversation_id)
            try:
                result = await engine.respond_pending(conversation_id, preview)
            except Exception as exc:  # the page must never hang on "thinking"
                if isinstance(exc, dbfaults.DatabaseUnavailable):  # one line; the engine retried the store
                    dbfaults.report(exc, log, f"conversation {conversation_id}: tutor reply not saved")
                    notice = dbfaults.REPLY_NOT_SAVED
                else:
                    log.exception("respond failed")
                    notice = N_("The tutor could not answer just now. Your message is saved — send another message "
                                "to try again.")
                async with self:
                    self._end_preview(preview)
                    self.operator_notice = self._t(notice)
                    self._responding = self.thinking = False
                return
            caught_up = None
            if result is None:  # nothing owed: another tab or worker may have answered meanwhile
                caught_up = await engine.view_if_newer(conversation_id, self._latest_id)
            async with self:
                self._end_preview(preview)
                if conversation_id != self.conversation_id:
                    pass
                elif result is not None:
                    if result.reply.id > self._latest_id:  # a reload meanwhile may show it already
                        self._add_reply(result)
                elif caught_up is not None:
                    self._show_history(caught_up.messages)
                    self._set_progress(caught_up.progress, celebrate=False)
                if result is None and self._requested == seen:
                    self._responding = self.thinking = False
                    return

    @rx.event
    def stop_reply(self):
        """The learner's Stop: the reply being written ends now; what arrived is kept."""
        if self.conversation_id:
            get_engine().stop(self.conversation_id)
        return rx.set_focus("message")

    def _apply(self, updates: dict[str, Any]) -> None:
        for name, value in updates.items():
            setattr(self, name, value)

    def _end_preview(self, preview: PagePreview) -> None:
        if preview.conversation_id == self.conversation_id:
            self._apply(preview.feed.clear())
        self.streaming = False
        self.stream_status = ""

    # ------------------------------------------------------------------ helpers

    def _add_reply(self, result: TurnResult) -> None:
        reply = result.reply
        item = message_item(reply, self.language)
        self._append(item)
        self.latest_tutor_id = reply.id
        self._latest_bucket = self._bucket
        self._latest_forms = _open_forms(reply)
        self._set_progress(result.progress, celebrate=True)
        # result.operator_message (addresses, variables, upstream errors) is the operator's:
        # the engine logged it; the learner's reply already says, calmly, what happened.
        self.operator_notice = ""
        self.announcement = self._t("Tutor: {text}", text=item.plain) if item.plain else self._t("Tutor replied.")

    def _append(self, item: MessageItem) -> None:
        if item.role == "learner" or self._bucket == HISTORY:
            if self._bucket + 1 >= LIVE_BUCKETS:
                # A very long session: one re-sync from the database (which already
                # holds this message) empties the buckets.
                self._show_history(get_engine().history(self.conversation_id))
                return
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

    def _set_progress(self, progress: ProgressView, *, celebrate: bool) -> None:
        self.progress = progress_item(progress, self.language)
        if celebrate and progress.milestone:
            self.milestone = progress.milestone
        if progress.complete or self.completion.complete:
            library = get_engine().library
            self.completion = completion_item(library.get(self.module_id), progress, library.modules.values())

    @rx.event
    def ask_restart(self) -> None:
        self.confirm_restart = True

    @rx.event
    def cancel_restart(self):
        self.confirm_restart = False  # the page puts the focus back (data-return-focus)

    @rx.event
    async def start_over(self):
        """A new conversation in this module, its progress back to 0% (as on the start page)."""
        self.confirm_restart = False
        try:
            key, away = await self.signed_in_learner()
            if away is not None:
                return away
            await get_engine().open(key, self.module_id, new=True, defer_opening=True)
        except InputError as exc:  # new conversations per day (tutor.usage)
            self.operator_notice = self._t(exc.message)
            return None
        except (ModuleNotServable, dbfaults.DatabaseUnavailable) as fault:
            if isinstance(fault, dbfaults.DatabaseUnavailable):
                dbfaults.report(fault, log, f"start over in {self.module_id}")
            self.operator_notice = self._t(N_("Starting over didn't work just now. Please try again in a moment."))
            return None
        return ChatState.load

    @rx.event
    def dismiss_milestone(self):
        self.milestone = ""
        return rx.set_focus("message")


def _open_forms(view: MessageView) -> dict[str, dict]:
    closed = {key.partition("-")[2] for key in closed_forms(view)}
    forms = ((view.response or {}).get("content") or {}).get("forms") or []
    return {f["id"]: f for f in forms if isinstance(f, dict) and f.get("id") not in closed}


def _query_param(url: str, name: str) -> str:
    values = parse_qs(urlsplit(url).query).get(name) or [""]
    return values[0].strip()


def live_buckets() -> list[tuple[rx.Var, rx.Var]]:
    """Each live bucket with the dict of form changes for its messages."""
    return [
        (getattr(ChatState, f"live_{i}"), getattr(ChatState, f"live_forms_{i}"))
        for i in range(LIVE_BUCKETS)
    ]


_PAGE_WORDS = frozenset(translator("en").page_strings())


def ui(msgid: str, words: rx.Var | None = None) -> rx.Var[str]:
    """The chat page's word for `msgid` in the module's language (a `page` msgid of the
    catalogues, tutor/locales); an unknown msgid fails when the page is compiled. A memoised
    component passes `words` (ChatState.ui as a prop), so it reads no state itself."""
    if msgid not in _PAGE_WORDS:
        raise KeyError(f"{msgid!r} is not a page string: add it with msgctxt \"page\" to tutor/locales/*/LC_MESSAGES/tutor.po")
    return (ChatState.ui if words is None else words)[msgid]


def start_page_words(msgid: str) -> str:
    """The start page's word for `msgid`, in TUTOR_LANGUAGE (fixed when the page is compiled)."""
    if msgid not in _PAGE_WORDS:
        raise KeyError(f"{msgid!r} is not a page string: add it with msgctxt \"page\" to tutor/locales/*/LC_MESSAGES/tutor.po")
    return translator(settings.LANGUAGE).page(msgid)
