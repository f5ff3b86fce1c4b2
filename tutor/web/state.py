"""Reflex state: turns UI events into engine calls. Thin on purpose.

How new content reaches the page without re-sending history is one mechanism, described
in `tutor.turns.live`: the history once at load, one small bucket per turn since (the learner's
message and the reply to it, and the forms the turn closed), and the reply being written
in slots of its own (`StreamFeed`). After LIVE_BUCKETS turns without a reload, the buckets
join the history (`fold_buckets`: no database read, nothing rendered again). What the page
shows of the conversation, bucket by bucket, is ChatLive's (tutor/web/chat_live.py).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any
from urllib.parse import parse_qs, urlsplit

import reflex as rx

from tutor.content.modules import ModuleNotServable, public_problem
from tutor.i18n import N_, supported, translator
from tutor.render.display import FormState, MessageItem, ProgressItem, progress_item
from tutor.render.progress_display import CompletionItem, completion_item
from tutor.render.views import ConversationView, ProgressView
from tutor.storage import dbfaults
from tutor.turns.claims import current_holder
from tutor.turns.engine import InputError
from tutor.turns.live import PagePreview, empty_slots, stream_vars
from tutor.turns.runtime import get_engine
from tutor.web.auth_state import TutorState
from tutor.web.chat_history import message_items, read_conversation
from tutor.web.chat_live import HISTORY, LIVE_BUCKETS, ChatLive
from tutor.web.chat_sending import ChatSending
from tutor.web.page_words import page_word
from tutor.web.preview_frames import direct_sender

log = logging.getLogger(__name__)

_bucket_annotations: dict[str, Any] = {}
for _i in range(LIVE_BUCKETS):
    _bucket_annotations[f"live_{_i}"] = list[MessageItem]
    _bucket_annotations[f"live_forms_{_i}"] = dict[str, FormState]
_STREAM_VARS = stream_vars()


class ChatState(ChatLive, ChatSending, TutorState):
    module_id: str = ""
    module_title: str = ""
    conversation_id: int = 0
    load_error: str = ""
    loaded: bool = False

    history: list[MessageItem] = []
    history_forms: dict[str, FormState] = {}
    __annotations__.update(_bucket_annotations)
    vars().update({name: {} if "forms" in name else [] for name in _bucket_annotations})
    # The reply being written (tutor.turns.live.StreamFeed): one variable per slot.
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

    thinking: bool = False
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
    _opening_key: str = ""  # the learner whose conversation the page is opening

    # ------------------------------------------------------------------ loading

    @rx.event
    async def load(self):
        """The page's load holds the tab's lock only for what is quick: who asks, for which
        module. The conversation is read and its history rendered by open_conversation,
        off the lock (a long conversation no longer holds up the tab's other events)."""
        away = await self._start_loading()
        return away if away is not None or self.loaded else ChatState.open_conversation

    async def _start_loading(self):
        module_id = _query_param(str(self.router.url), "module")
        # A reload of the conversation on show keeps its messages until they are read again
        # (no blank page in between); anything else starts from an empty page.
        shown = (self.module_id, self._opening_key) if self.conversation_id and not self.load_error else None
        try:
            engine = get_engine()
            key, away = await self.signed_in_learner()
            self._reset_view(keep_messages=away is None and shown == (module_id, key))
            self.module_id = module_id
            if away is not None:
                return away
            module = engine.library.get(module_id)
        except ModuleNotServable as exc:
            self._reset_view()
            self.load_error = public_problem(str(exc), engine.library.directory) or \
                self._t("There is no module called {module!r}.", module=module_id)
            self.loaded = True
            return None
        except dbfaults.DatabaseUnavailable as fault:
            self._reset_view()
            self.module_id = module_id
            self._unavailable(fault, module_id)
            return None
        self._set_language(module.language)
        self.module_title = module.title
        self._opening_key = key
        return None

    @rx.event(background=True)
    async def open_conversation(self):
        async with self:
            if not await self._may_write():
                return None
            key, module_id, language = self._opening_key, self.module_id, self.language
        try:
            view, items = await read_conversation(key, module_id, language)
        except (dbfaults.DatabaseUnavailable, InputError) as fault:
            async with self:
                if (self.module_id, self._opening_key, self.loaded) == (module_id, key, False):
                    self._unavailable(fault, module_id)
            return None
        async with self:
            if (self.module_id, self._opening_key, self.loaded) != (module_id, key, False):
                # The tab moved on meanwhile, or a send opened the conversation first
                # (_open_now): what was read here is older than what the page shows.
                return None
            return self._show_conversation(view, items)

    async def _open_now(self):
        """The page's load within this event, not in the background: for a send that reaches
        a tab whose state is new (the server restarted while the page waited)."""
        away = await self._start_loading()
        if away is None and not self.loaded:
            try:
                away = self._show_conversation(*await read_conversation(self._opening_key, self.module_id,
                                                                        self.language))
            except (dbfaults.DatabaseUnavailable, InputError) as fault:
                self._unavailable(fault, self.module_id)
        return away

    def _show_conversation(self, view: ConversationView, items: list[MessageItem]):
        self.conversation_id = view.id
        self._show_history(view.messages, items)
        self._set_progress(view.progress, celebrate=False)
        self.loaded = True
        if view.awaiting_reply:
            # A new conversation, or a turn a restart cut short: the tutor answers now.
            self.thinking = True
            self._requested += 1
            return ChatState.respond
        return None

    def _unavailable(self, fault: dbfaults.DatabaseUnavailable | InputError, module_id: str) -> None:
        if isinstance(fault, InputError):  # today's tokens spent: no opening turn until tomorrow
            self.load_error = self._t(fault.message)
        else:
            dbfaults.report(fault, log, f"chat page for {module_id}")
            self.load_error = self._t(dbfaults.UNAVAILABLE)  # sending loads the page again (see _accept)
        self.loaded = True

    def _t(self, message: str, /, **params: Any) -> str:
        """Words for this page in the module's language (a msgid, or a Phrase from the core)."""
        return translator(self.language)(message, **params)

    def _set_language(self, language: str) -> None:
        found = supported(language)
        if found != self.language:
            self.language, self.ui = found, translator(found).page_strings()

    def _reset_view(self, keep_messages: bool = False) -> None:
        self.load_error = ""
        self.loaded = False
        if not keep_messages:
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

    @rx.event(background=True)
    async def respond(self):
        async with self:
            if not await self._may_write():
                return
            if self._responding and self._responding_by == current_holder():
                return
            self._responding, self._responding_by = True, current_holder()
            owner = self._bound  # a tab that changes hands meanwhile is not answered into
            seen, conversation_id, language = self._requested, self.conversation_id, self.language
        engine = get_engine()
        while True:
            preview = PagePreview(self, conversation_id, direct_sender(self, conversation_id, owner))
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
            caught_up, items = None, None
            if result is None:  # nothing owed: another tab or worker may have answered meanwhile
                caught_up = await engine.view_if_newer(conversation_id, self._latest_id)
            # Rendered here, off the tab's lock and the event loop (markdown, tables).
            if result is not None:
                items = await asyncio.to_thread(message_items, [result.reply], language)
            elif caught_up is not None:
                items = await asyncio.to_thread(message_items, caught_up.messages, language)
            async with self:
                self._end_preview(preview)
                if conversation_id != self.conversation_id or self._bound != owner:
                    pass
                elif result is not None:
                    if result.reply.id > self._latest_id:  # a reload meanwhile may show it already
                        self._add_reply(result, items[0] if language == self.language else None)
                elif caught_up is not None:
                    self._show_history(caught_up.messages, items if language == self.language else None)
                    self._set_progress(caught_up.progress, celebrate=False)
                if result is None and self._requested == seen:
                    self._responding = self.thinking = False
                    return
                if self._bound != owner:
                    return
                # Once more: another message may be owed (one sent meanwhile, here or in
                # another tab whose own turn found this one under way).
                seen, conversation_id, language = self._requested, self.conversation_id, self.language

    @rx.event
    async def stop_reply(self):
        """The learner's Stop: the reply being written ends now; what arrived is kept."""
        if self.conversation_id and await self._may_write():
            get_engine().stop(self.conversation_id)
        return rx.set_focus("message")

    # ------------------------------------------------------------------ helpers

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
        except InputError as exc:  # new conversations per day (tutor.access.usage)
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


def _query_param(url: str, name: str) -> str:
    values = parse_qs(urlsplit(url).query).get(name) or [""]
    return values[0].strip()


def live_buckets() -> list[tuple[rx.Var, rx.Var]]:
    """Each live bucket with the dict of form changes for its messages."""
    return [
        (getattr(ChatState, f"live_{i}"), getattr(ChatState, f"live_forms_{i}"))
        for i in range(LIVE_BUCKETS)
    ]


def ui(msgid: str, words: rx.Var | None = None) -> rx.Var[str]:
    """The chat page's word for `msgid` in the module's language (a `page` msgid of the
    catalogues, tutor/locales); an unknown msgid fails when the page is compiled. A memoised
    component passes `words` (ChatState.ui as a prop), so it reads no state itself."""
    return (ChatState.ui if words is None else words)[page_word(msgid)]
