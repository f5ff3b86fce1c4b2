"""Reflex state: turns UI events into engine calls. Thin on purpose.

History lives in the database. The page gets it once (`history`) when it loads; each new
message then goes into a small "live" bucket, so a new turn sends the browser only that
bucket — not the whole conversation (reflex#4156: a changed list var is re-sent whole).
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from typing import Any
from urllib.parse import parse_qs, urlsplit

import reflex as rx

from tutor.contract import Form
from tutor.display import FormItem, MessageItem, answer_lines, form_item, form_values, message_item
from tutor.engine import InputError
from tutor.llm.base import LearnerInput
from tutor.modules import ModuleNotServable
from tutor.runtime import get_engine
from tutor.views import MessageView, ProgressView, TurnResult

log = logging.getLogger(__name__)

LIVE_BUCKETS = 64  # messages since page load: LIVE_BUCKETS * BUCKET_SIZE before a re-sync
BUCKET_SIZE = 4


@dataclasses.dataclass
class ModuleCard:
    id: str
    title: str
    description: str
    topics: int
    percentage: float
    covered: int
    started: bool


class TutorState(rx.State):
    """Who the learner is: a random key kept in this browser's local storage."""

    learner_key: str = rx.LocalStorage("", name="tutor_learner")

    def ensure_learner(self) -> str:
        if not self.learner_key:
            self.learner_key = uuid.uuid4().hex
        return self.learner_key


class HomeState(TutorState):
    modules: list[ModuleCard] = []
    problems: list[str] = []

    @rx.event
    def load(self) -> None:
        key = self.ensure_learner()
        engine = get_engine()
        cards = []
        for module in engine.library.modules.values():
            progress = engine.progress_for(key, module.id)
            cards.append(
                ModuleCard(
                    id=module.id,
                    title=module.title,
                    description=module.description,
                    topics=len(module.topic_ids),
                    percentage=progress.percentage if progress else 0.0,
                    covered=len(progress.covered) if progress else 0,
                    started=bool(progress and progress.covered),
                )
            )
        self.modules = cards
        self.problems = [p for ps in engine.library.problems.values() for p in ps]

    @rx.event
    async def start_over(self, module_id: str):
        key = self.ensure_learner()
        await get_engine().open(key, module_id, new=True, defer_opening=True)
        return rx.redirect(f"/learn?module={module_id}")


_live_annotations = {f"live_{i}": list[MessageItem] for i in range(LIVE_BUCKETS)}


class ChatState(TutorState):
    module_id: str = ""
    module_title: str = ""
    conversation_id: int = 0
    load_error: str = ""
    loaded: bool = False

    history: list[MessageItem] = []
    __annotations__.update(_live_annotations)
    vars().update({name: [] for name in _live_annotations})
    _live_count: int = 0

    form_status: dict[str, str] = {}  # form key -> open | submitted | skipped
    form_answers: dict[str, list[str]] = {}  # form key -> "Label: answer" lines
    form_error: dict[str, str] = {}  # form key -> why the server refused it
    latest_tutor_id: int = 0

    thinking: bool = False
    input_error: str = ""
    operator_notice: str = ""
    announcement: str = ""

    percentage: float = 0.0
    covered_count: int = 0
    total_topics: int = 0
    phase: str = ""
    section: str = ""
    sections_completed: int = 0
    total_sections: int = 0
    milestone: str = ""  # the celebration to show, if a milestone was reached this turn

    _responding: bool = False
    _requested: int = 0

    # ------------------------------------------------------------------ loading

    @rx.event
    async def load(self):
        key = self.ensure_learner()
        module_id = _query_param(str(self.router.url), "module")
        self._reset_view()
        self.module_id = module_id
        engine = get_engine()
        try:
            module = engine.library.get(module_id)
            view = await engine.open(key, module_id, defer_opening=True)
        except ModuleNotServable as exc:
            self.load_error = str(exc) or f"There is no module called {module_id!r}."
            self.loaded = True
            return None
        self.module_title = module.title
        self.conversation_id = view.id
        self.history = [message_item(m) for m in view.messages]
        self._sync_forms(view.messages)
        self._set_progress(view.progress, celebrate=False)
        self.loaded = True
        if not view.messages or view.messages[-1].role == "learner":
            # A new conversation, or a turn a restart cut short: the tutor answers now.
            self.thinking = True
            self._requested += 1
            return ChatState.respond
        return None

    def _reset_view(self) -> None:
        self.load_error = ""
        self.loaded = False
        self.history = []
        for i in range(LIVE_BUCKETS):
            setattr(self, f"live_{i}", [])
        self._live_count = 0
        self.form_status, self.form_answers, self.form_error = {}, {}, {}
        self.latest_tutor_id = 0
        self.thinking = False
        self.input_error = self.operator_notice = self.announcement = self.milestone = ""

    # ------------------------------------------------------------------ sending

    @rx.event
    async def send_text(self, form_data: dict[str, Any]):
        return await self._accept(LearnerInput(text=str(form_data.get("message", ""))), None)

    @rx.event
    async def send_suggestion(self, text: str):
        return await self._accept(LearnerInput(text=text), None)

    @rx.event
    async def submit_form(self, form_data: dict[str, Any]):
        data = dict(form_data)
        key = str(data.pop("__form", ""))
        item = self._form_item(key)
        if item is None:
            self.form_error = {**self.form_error, key: "This form is no longer open."}
            return None
        values = form_values(item, data)
        return await self._accept(LearnerInput(form_id=item.id, answers=values), key)

    @rx.event
    async def skip_form(self, key: str):
        message_id, _, form_id = key.partition("-")
        if message_id != str(self.latest_tutor_id):
            return None
        if await get_engine().skip_form(self.conversation_id, form_id):
            self.form_status = {**self.form_status, key: "skipped"}
        return rx.set_focus("message")

    async def _accept(self, learner_input: LearnerInput, form_key: str | None):
        if not self.conversation_id:
            return None
        try:
            pending = await get_engine().accept(self.conversation_id, learner_input)
        except InputError as exc:
            if form_key is not None:
                self.form_error = {**self.form_error, form_key: exc.message}
            else:
                self.input_error = exc.message
            return None
        self.input_error = ""
        if form_key is not None:
            self.form_error = {k: v for k, v in self.form_error.items() if k != form_key}
        self._close_forms(pending.learner, form_key)
        self._append(message_item(pending.learner))
        self.thinking = True
        self.milestone = ""
        self._requested += 1
        events: list[Any] = [ChatState.respond, rx.set_focus("message")]
        if form_key is None and learner_input.text is not None:
            events.insert(0, rx.set_value("message", ""))
        return events

    @rx.event(background=True)
    async def respond(self):
        async with self:
            if self._responding:
                return
            self._responding = True
        engine = get_engine()
        while True:
            async with self:
                seen, conversation_id = self._requested, self.conversation_id
            try:
                result = await engine.respond_pending(conversation_id)
            except Exception:  # the page must never hang on "thinking"
                log.exception("respond failed")
                async with self:
                    self.operator_notice = "The tutor could not answer just now. Your message is saved — send another message to try again."
                    self._responding = self.thinking = False
                return
            async with self:
                if result is not None:
                    self._add_reply(result)
                elif self._requested == seen:
                    self._responding = self.thinking = False
                    return

    # ------------------------------------------------------------------ helpers

    def _add_reply(self, result: TurnResult) -> None:
        reply = result.reply
        item = message_item(reply)
        self._append(item)
        self.latest_tutor_id = reply.id
        for form in item.forms:
            self.form_status = {**self.form_status, form.key: "open"}
        self._set_progress(result.progress, celebrate=True)
        self.operator_notice = result.operator_message or ""
        self.announcement = f"Tutor: {item.plain}"

    def _append(self, item: MessageItem) -> None:
        bucket = self._live_count // BUCKET_SIZE
        if bucket >= LIVE_BUCKETS:  # a very long session: fold everything into history
            merged = list(self.history)
            for i in range(LIVE_BUCKETS):
                merged.extend(getattr(self, f"live_{i}"))
                setattr(self, f"live_{i}", [])
            self.history = merged
            self._live_count, bucket = 0, 0
        name = f"live_{bucket}"
        setattr(self, name, [*getattr(self, name), item])
        self._live_count += 1

    def _sync_forms(self, messages: list[MessageView]) -> None:
        status: dict[str, str] = {}
        answers: dict[str, list[str]] = {}
        for view in messages:
            if view.role != "tutor":
                continue
            self.latest_tutor_id = view.id
            for form_id, state in view.form_states.items():
                key = f"{view.id}-{form_id}"
                status[key] = state.get("status", "open")
                if status[key] == "submitted":
                    answers[key] = answer_lines(view, form_id)
        self.form_status, self.form_answers = status, answers

    def _close_forms(self, learner: MessageView, form_key: str | None) -> None:
        prefix = f"{self.latest_tutor_id}-"
        status = dict(self.form_status)
        for key, value in status.items():
            if key.startswith(prefix) and value == "open":
                status[key] = "submitted" if key == form_key else "skipped"
        self.form_status = status
        if form_key is not None:
            view = next(
                (m for m in get_engine().history(self.conversation_id) if m.id == self.latest_tutor_id),
                None,
            )
            if view is not None:
                form_id = form_key[len(prefix):]
                self.form_answers = {**self.form_answers, form_key: answer_lines(view, form_id)}

    def _form_item(self, key: str) -> FormItem | None:
        if self.form_status.get(key) != "open":
            return None
        message_id, _, form_id = key.partition("-")
        if not message_id.isdigit():
            return None
        for view in get_engine().history(self.conversation_id):
            if view.id == int(message_id) and view.response:
                for form in view.response["content"].get("forms") or []:
                    if form.get("id") == form_id:
                        return form_item(view.id, Form.model_validate(form))
        return None

    def _set_progress(self, progress: ProgressView, *, celebrate: bool) -> None:
        self.percentage = progress.percentage
        self.covered_count = len(progress.covered)
        self.total_topics = progress.total
        state = progress.module_state
        self.phase = str(state.get("current_phase") or "")
        self.section = str(state.get("current_section") or "")
        self.sections_completed = int(state.get("sections_completed") or 0)
        self.total_sections = int(state.get("total_sections") or 0)
        if celebrate and progress.milestone:
            self.milestone = progress.milestone

    @rx.event
    def dismiss_milestone(self) -> None:
        self.milestone = ""


def _query_param(url: str, name: str) -> str:
    values = parse_qs(urlsplit(url).query).get(name) or [""]
    return values[0].strip()


def live_vars() -> list[rx.Var]:
    return [getattr(ChatState, f"live_{i}") for i in range(LIVE_BUCKETS)]
