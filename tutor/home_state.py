"""Reflex state of the home page: the module cards, start over. Thin on purpose."""

from __future__ import annotations

import json
import logging

import reflex as rx

from tutor import dbfaults
from tutor.display import ModuleCard, module_card
from tutor.modules import ModuleNotServable, public_problem
from tutor.runtime import get_engine
from tutor.state import ChatState, TutorState

log = logging.getLogger(__name__)


class HomeState(TutorState):
    modules: list[ModuleCard] = []
    problems: list[str] = []
    confirm_restart: str = ""  # the module whose "start over" waits for a confirmation
    unavailable: str = ""  # the calm line shown instead of the modules while the database is down

    @rx.event
    async def load(self) -> None:
        key = self.ensure_learner()
        # A tab keeps its chat state across pages: clear it here, so the chat page never
        # shows the previous visit's conversation while it loads the next one.
        chat = await self.get_state(ChatState)
        chat._reset_view()
        try:
            engine = get_engine()
            active = {c.module_id: c for c in engine.conversations(key) if c.status == "active"}
            modules = [
                module_card(
                    module.id, module.title, module.description, len(module.topic_ids),
                    engine.progress_for(key, module.id), active.get(module.id),
                )
                for module in engine.library.modules.values()
            ]
        except dbfaults.DatabaseUnavailable as fault:
            dbfaults.report(fault, log, "home page")
            self.modules, self.problems, self.unavailable = [], [], dbfaults.UNAVAILABLE
            return
        self.unavailable = ""
        self.modules = modules
        # Learners see which file is broken and why, never where the server keeps it.
        folder = engine.library.directory
        self.problems = [public_problem(p, folder) for ps in engine.library.problems.values() for p in ps]
        self.confirm_restart = ""

    @rx.event
    def ask_restart(self, module_id: str) -> None:
        self.confirm_restart = module_id

    @rx.event
    def cancel_restart(self):
        module_id, self.confirm_restart = self.confirm_restart, ""
        # Back to the button that asked; it is rendered again by this change, hence the wait.
        target = json.dumps(f"restart-{module_id}")
        return rx.call_script(f"setTimeout(() => document.getElementById({target})?.focus(), 0)")

    @rx.event
    async def start_over(self, module_id: str):
        key = self.ensure_learner()
        self.confirm_restart = ""
        try:
            await get_engine().open(key, module_id, new=True, defer_opening=True)
        except ModuleNotServable:
            return HomeState.load  # the module went away meanwhile: show what there is
        except dbfaults.DatabaseUnavailable as fault:
            dbfaults.report(fault, log, f"start over in {module_id}")
            self.unavailable = dbfaults.UNAVAILABLE
            return None
        return rx.redirect(f"/learn?module={module_id}")
