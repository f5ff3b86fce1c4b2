"""Reflex state of the home page: the module cards, start over. Thin on purpose."""

from __future__ import annotations

import logging

import reflex as rx

from tutor.content.modules import ModuleNotServable, public_problem
from tutor.i18n import localize
from tutor.render.display import ModuleCard, module_card
from tutor.storage import dbfaults
from tutor.turns.engine import InputError
from tutor.turns.runtime import get_engine
from tutor.web.page_words import StartWords
from tutor.web.state import ChatState, TutorState

log = logging.getLogger(__name__)


class HomeState(StartWords, TutorState):
    modules: list[ModuleCard] = []
    problems: list[str] = []
    confirm_restart: str = ""  # the module whose "start over" waits for a confirmation
    unavailable: str = ""  # the calm line shown instead of the modules while the database is down
    restart_refused: str = ""  # why "start over" was refused (a usage limit), calmly

    @rx.event
    async def load(self):
        # A tab keeps its chat state across pages: clear it here, so the chat page never
        # shows the previous visit's conversation while it loads the next one.
        chat = await self.get_state(ChatState)
        chat._reset_view()
        try:
            engine = get_engine()
            key, away = await self.signed_in_learner()
            if away is not None:
                return away
            language = self._pick_language()  # after the identity check, which may reset the tab
            active = {c.module_id: c for c in engine.conversations(key) if c.status == "active"}
            modules = [
                module_card(
                    module.id, module.title, module.description, len(module.topic_ids),
                    engine.progress_for(key, module.id), active.get(module.id), language,
                )
                for module in engine.library.modules.values()
            ]
        except dbfaults.DatabaseUnavailable as fault:
            dbfaults.report(fault, log, "home page")
            language = self._pick_language()
            self.modules, self.problems, self.unavailable = [], [], localize(dbfaults.UNAVAILABLE, language)
            return
        self.unavailable = ""
        self.modules = modules
        # Learners see which file is broken and why, never where the server keeps it.
        folder = engine.library.directory
        self.problems = [public_problem(p, folder) for ps in engine.library.problems.values() for p in ps]
        self.confirm_restart = ""
        self.restart_refused = ""

    @rx.event
    def ask_restart(self, module_id: str) -> None:
        self.confirm_restart = module_id
        self.restart_refused = ""

    @rx.event
    def cancel_restart(self):
        self.confirm_restart = ""  # the page puts the focus back (data-return-focus)

    @rx.event
    async def start_over(self, module_id: str):
        self.confirm_restart = ""
        try:
            key, away = await self.signed_in_learner()
            if away is not None:
                return away
            await get_engine().open(key, module_id, new=True, defer_opening=True)
        except ModuleNotServable:
            return HomeState.load  # the module went away meanwhile: show what there is
        except InputError as exc:  # new conversations per day (tutor.access.usage)
            self.restart_refused = localize(exc.message, self.page_language)
            return None
        except dbfaults.DatabaseUnavailable as fault:
            dbfaults.report(fault, log, f"start over in {module_id}")
            self.unavailable = localize(dbfaults.UNAVAILABLE, self.page_language)
            return None
        return rx.redirect(f"/learn?module={module_id}")
