"""Reflex state of the operator console (/operator). Thin: the reads and writes are in
tutor.console.console_display, tutor.console.reviews and tutor.console.learner_data.

Every handler checks the operator itself, at the moment it runs (`_operator_now`: the
session or the trusted proxy's header, read from the database each event, never anything
the page says or a check made earlier): a learner, a signed-out visitor or a disabled
operator gets no data at all in their state, and what an earlier check loaded is cleared.
Loading runs in a background task (the database work off the tab's lock); it checks again
before it shows what it read.
"""

from __future__ import annotations

import logging
from typing import Any

import reflex as rx

from tutor.access.redirects import auth_page
from tutor.console.console_display import (
    ErrorRow,
    ModuleView,
    ReviewRow,
    ScreenRow,
    TranscriptRow,
    WindowRow,
    load_console,
    transcript_rows,
)
from tutor.console.learner_data import delete_learner, find_learner
from tutor.console.reviews import mark_reviewed, mark_turn_reviewed
from tutor.console.transcript import review_transcript
from tutor.i18n import translator
from tutor.storage import dbfaults
from tutor.turns.runtime import get_engine
from tutor.web.auth_state import TutorState

log = logging.getLogger(__name__)

NOTE_MAX = 2000


class OperatorState(TutorState):
    access: str = ""  # "" while checking | operator | denied | unavailable
    operator_name: str = ""
    loading: bool = False
    load_error: str = ""
    notice: str = ""  # the last action's outcome, announced politely

    show_reviewed: bool = False
    review_page: int = 0
    has_more: bool = False
    reviews: list[ReviewRow] = []
    transcript_key: str = ""  # the review item whose conversation is open ("risk-12"); ""
    transcript: list[TranscriptRow] = []
    transcript_error: str = ""

    windows: list[WindowRow] = []
    errors: list[ErrorRow] = []
    screens: list[ScreenRow] = []  # the model safety screen's failures, per model

    module_ids: list[str] = []
    module_titles: dict[str, str] = {}
    module_id: str = ""
    module: ModuleView = ModuleView()

    delete_found: str = ""  # what the lookup found, shown with the confirmation
    delete_name: str = ""  # the name the operator must type to confirm
    delete_error: str = ""
    _delete_learner_id: int = 0
    _operator: str = ""  # the username, once on_load checked the session

    # ------------------------------------------------------------------ access

    async def _check_operator(self, *, fresh: bool = False) -> bool:
        """Is an operator asking, now? Otherwise their data leaves the state (access denied)."""
        try:
            who = await self.checked_identity("operator", fresh=fresh)
        except dbfaults.DatabaseUnavailable as fault:
            dbfaults.report(fault, log, "operator console")
            self._forget()
            self.access, self.load_error = "unavailable", dbfaults.UNAVAILABLE
            return False
        if who is None:
            self._forget()
            self.access = "denied"
            return False
        self._operator = self.operator_name = who.username or "operator"
        self.access = "operator"
        return True

    def _forget(self) -> None:
        self._operator = self.operator_name = ""
        self.reviews, self.windows, self.errors, self.screens = [], [], [], []
        self.transcript_key, self.transcript, self.transcript_error = "", [], ""
        self.module, self.module_ids, self.module_titles = ModuleView(), [], {}
        self.has_more, self.review_page = False, 0
        self.delete_found = self.delete_name = self.delete_error = ""
        self._delete_learner_id = 0

    @rx.event
    async def load(self):
        self.access, self.notice, self.load_error = "", "", ""
        if not await self._check_operator():
            if self.access == "denied" and self.auth_mode == "accounts" and not self.signed_in_as:
                return rx.redirect(auth_page("/signin", "/operator"))
            return None
        library = get_engine().library
        self.module_ids = list(library.modules)
        self.module_titles = {m.id: m.title for m in library.modules.values()}
        if self.module_id not in library.modules:
            self.module_id = self.module_ids[0] if self.module_ids else ""
        return OperatorState.refresh

    # ------------------------------------------------------------------ loading

    @rx.event(background=True)
    async def refresh(self):
        async with self:
            if not await self._check_operator():
                return
            self.loading = True
            include, page, module_id = self.show_reviewed, self.review_page, self.module_id
        engine = get_engine()
        pricer = engine.settings.cost if engine.settings.prices_configured else None
        try:
            data = await engine.store.run(load_console, engine.store, engine.library, include_reviewed=include,
                                          page=page, module_id=module_id, pricer=pricer)
        except dbfaults.DatabaseUnavailable as fault:
            dbfaults.report(fault, log, "operator console")
            async with self:
                self.loading, self.load_error = False, dbfaults.UNAVAILABLE
            return
        async with self:
            if not await self._check_operator(fresh=True):  # signed out or disabled meanwhile
                self.loading = False
                return
            self.reviews, self.has_more = data.reviews, data.has_more
            self.windows, self.errors, self.module = data.windows, data.errors, data.module
            self.screens = data.screens
            self.loading, self.load_error = False, ""

    @rx.event
    async def toggle_show_reviewed(self):
        if not await self._check_operator():
            return None
        self.show_reviewed, self.review_page = not self.show_reviewed, 0
        return OperatorState.refresh

    @rx.event
    async def next_page(self):
        if not await self._check_operator() or not self.has_more:
            return None
        self.review_page += 1
        return OperatorState.refresh

    @rx.event
    async def previous_page(self):
        if not await self._check_operator() or self.review_page == 0:
            return None
        self.review_page -= 1
        return OperatorState.refresh

    @rx.event
    async def choose_module(self, module_id: str):
        if not await self._check_operator() or module_id not in self.module_titles:
            return None
        self.module_id = module_id
        return OperatorState.refresh

    # ------------------------------------------------------------------ actions

    @rx.event
    async def mark_reviewed(self, form_data: dict[str, Any]):
        if not await self._check_operator():
            return None
        item = _review_item(form_data.get("item", ""))
        note = str(form_data.get("note", "")).strip()[:NOTE_MAX] or None
        if item is None:
            return None
        kind, number = item
        store = get_engine().store
        mark = mark_reviewed if kind == "risk" else mark_turn_reviewed
        try:
            found = await store.run(mark, store, number, by=self._operator, note=note)
        except dbfaults.DatabaseUnavailable as fault:
            dbfaults.report(fault, log, "mark reviewed")
            self.notice = "Could not save the review mark just now: the database is unavailable."
            return None
        what = "Safety flag" if kind == "risk" else "Tutor turn"
        self.notice = f"{what} {number} marked reviewed." if found else f"{what} {number} no longer exists."
        return OperatorState.refresh

    @rx.event
    async def toggle_transcript(self, key: str):
        """Open the conversation around a review item (read-only), or close the open one."""
        if not await self._check_operator():
            return None
        if key == self.transcript_key:
            self.transcript_key, self.transcript, self.transcript_error = "", [], ""
            return None
        item = _review_item(key)
        if item is None:
            return None
        kind, number = item
        store = get_engine().store
        self.transcript_key, self.transcript, self.transcript_error = key, [], ""
        try:
            lines = await store.run(review_transcript, store, kind, number)
        except dbfaults.DatabaseUnavailable as fault:
            dbfaults.report(fault, log, "review transcript")
            self.transcript_error = "Could not load the conversation just now: the database is unavailable."
            return None
        if lines is None:
            self.transcript_error = "This item's conversation no longer exists."
        else:
            self.transcript = transcript_rows(lines)
        return None

    @rx.event
    async def find_learner(self, form_data: dict[str, Any]):
        self.delete_found = self.delete_name = self.delete_error = ""
        self._delete_learner_id = 0
        if not await self._check_operator():
            return None
        wanted = str(form_data.get("who", "")).strip()[:128]
        if not wanted:
            self.delete_error = "Type a learner's username or key."
            return None
        store = get_engine().store
        try:
            ref = await store.run(find_learner, store, wanted)
        except dbfaults.DatabaseUnavailable as fault:
            dbfaults.report(fault, log, "find learner")
            self.delete_error = "The database is unavailable just now. Try again in a moment."
            return None
        if ref is None:
            self.delete_error = f"No learner has the username or key “{wanted}”."
            return None
        if ref.username and ref.username == self._operator:
            self.delete_error = "That is your own account: another operator (or `tutor learners delete`) can delete it."
            return None
        self._delete_learner_id = ref.id
        self.delete_name = ref.username or ref.key
        account = f" (account {ref.username})" if ref.username else ""
        self.delete_found = f"Learner {ref.key}{account}: " + translator(None).plural(
            "{n:,} conversation.", "{n:,} conversations.", ref.conversations)
        return rx.set_focus("delete-confirm")

    @rx.event
    def cancel_delete(self):
        self.delete_found = self.delete_name = self.delete_error = ""
        self._delete_learner_id = 0
        return rx.set_focus("delete-who")

    @rx.event
    async def confirm_delete(self, form_data: dict[str, Any]):
        if not await self._check_operator() or not self._delete_learner_id:
            return None
        typed = str(form_data.get("confirm", "")).strip()
        if typed != self.delete_name and typed.lower() != self.delete_name.lower():
            self.delete_error = f"Type “{self.delete_name}” exactly to confirm. Nothing was deleted."
            return rx.set_focus("delete-confirm")
        store = get_engine().store
        try:
            deleted = await store.run(delete_learner, store, self._delete_learner_id)
        except dbfaults.DatabaseUnavailable as fault:
            dbfaults.report(fault, log, "delete learner")
            self.delete_error = "The database is unavailable: nothing was deleted. Try again in a moment."
            return None
        name = self.delete_name
        self.delete_found = self.delete_name = self.delete_error = ""
        self._delete_learner_id = 0
        if deleted is None:
            self.notice = f"{name} was already deleted."
        else:
            log.info("learner %s deleted by %s (%s rows)", deleted.learner_key, self._operator, deleted.total)
            self.notice = f"Deleted {name} and all their data (" + translator(None).plural(
                "{n:,} row", "{n:,} rows", deleted.total) + ")."
        return [rx.set_value("delete-who", ""), OperatorState.refresh]


def _review_item(key: object) -> tuple[str, int] | None:
    """A review item's key as the page names it ("risk-12", "turn-40"): (kind, id), or None."""
    kind, _, number = str(key).partition("-")
    if kind not in ("risk", "turn") or not number.isdigit():
        return None
    return kind, int(number)
