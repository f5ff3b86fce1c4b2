"""What the page shows of the learner's progress, as plain data: the chat header's bar and
counts (topics seen, topics mastered, where they are) and the start page's module cards."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Protocol

from tutor.i18n import translator
from tutor.render.views import ConversationSummary, ProgressView

__all__ = ["CompletionItem", "LinkItem", "ModuleCard", "ProgressItem", "completion_item", "module_card", "progress_item"]


@dataclasses.dataclass
class ModuleCard:
    """A module on the start page, with this learner's progress in it."""

    id: str
    title: str
    description: str
    topics: int
    started: bool = False
    percent: int = 0
    covered: int = 0
    mastered: int = 0
    activity: str = ""  # "3 messages sent" in the active conversation
    completed: bool = False  # every topic done: the card offers Review and Start over
    # The counts as words, in the start page's language (TUTOR_LANGUAGE).
    topics_text: str = ""  # "25 topics"
    covered_text: str = ""  # "3 of 25 topics covered"
    mastered_text: str = ""  # "2 mastered"


def module_card(
    module_id: str, title: str, description: str, topics: int,
    progress: ProgressView | None, conversation: ConversationSummary | None, language: str | None = None,
) -> ModuleCard:
    covered = len(progress.covered) if progress else 0
    turns = conversation.turns if conversation else 0
    t = translator(language)
    return ModuleCard(
        id=module_id,
        title=title,
        description=description,
        topics=topics,
        started=conversation is not None or covered > 0,
        percent=progress_item(progress).percent if progress else 0,
        covered=covered,
        mastered=len(progress.mastered) if progress else 0,
        activity=t.plural("{n} message sent", "{n} messages sent", turns) if turns else "",
        completed=bool(progress and progress.complete),
        topics_text=t.plural("{n} topic", "{n} topics", topics),
        covered_text=t.plural("{covered} of {n} topic covered", "{covered} of {n} topics covered", topics,
                              covered=covered),
        mastered_text=t("{n} mastered", n=len(progress.mastered) if progress else 0),
    )


@dataclasses.dataclass
class ProgressItem:
    """The learner's place in the module, as the header shows it."""

    percent: int = 0
    covered: int = 0  # topics seen
    total: int = 0
    remaining: int = 0  # topics not done yet
    mastered: int = 0
    checked: int = 0  # topics with checks: what "mastered" counts out of
    phase: str = ""
    section: str = ""
    sections_completed: int = 0
    total_sections: int = 0
    summary: str = "0% of the module covered"  # for the progress bar's aria-valuetext
    # The header's counts as words, in the module's language ("3 of 25 topics").
    count_text: str = ""
    mastered_text: str = ""
    remaining_text: str = ""
    sections_text: str = ""
    now_text: str = ""  # "Now: Foundations, What anxiety is"


def progress_item(progress: ProgressView, language: str | None = None) -> ProgressItem:
    state = progress.module_state
    # Floor, so the bar never shows 100% before the module is complete.
    percent = int(progress.percentage) if progress.percentage < 100 else 100
    covered = len(progress.covered)
    mastered = len(progress.mastered)
    t = translator(language)
    total, checked = progress.total, progress.checked
    summary = (t("{percent}% of the module covered: {covered} of {total} topics, {mastered} of {checked} mastered",
                 percent=percent, covered=covered, total=total, mastered=mastered, checked=checked) if checked else
               t("{percent}% of the module covered: {covered} of {total} topics", percent=percent, covered=covered,
                 total=total))
    phase, section = str(state.get("current_phase") or ""), str(state.get("current_section") or "")
    done_sections, sections = int(state.get("sections_completed") or 0), int(state.get("total_sections") or 0)
    words = dict(
        count_text=t.plural("{covered} of {n} topic", "{covered} of {n} topics", total, covered=covered),
        mastered_text=t("{mastered} of {checked} mastered", mastered=mastered, checked=checked),
        # "to go" counts what "{covered} of {n} topics" counts: topics not seen yet; once every
        # topic is seen, the checks still to answer well ("3 of 10 mastered" beside it).
        remaining_text=(t.plural("{n} topic to go", "{n} topics to go", total - covered) if covered < total else
                        t.plural("{n} check to go", "{n} checks to go", checked - mastered) if mastered < checked
                        else ""),
        sections_text=t("sections done: {done} of {total}", done=done_sections, total=sections),
        now_text=(t("Now: {phase}, {section}", phase=phase, section=section) if phase else
                  t("Now: {section}", section=section)),
    )
    return ProgressItem(
        **words,
        percent=percent,
        covered=covered,
        total=progress.total,
        remaining=max(progress.remaining, 0),
        mastered=mastered,
        checked=progress.checked,
        phase=str(state.get("current_phase") or ""),
        section=str(state.get("current_section") or ""),
        sections_completed=int(state.get("sections_completed") or 0),
        total_sections=int(state.get("total_sections") or 0),
        summary=summary,
    )


class _Module(Protocol):  # tutor.content.module_format.Module, without importing the authoring schema here
    id: str
    title: str
    topics: list  # each with id, title and checks


@dataclasses.dataclass
class LinkItem:
    id: str
    title: str


@dataclasses.dataclass
class CompletionItem:
    """The ending of a module: what was covered, what is worth reviewing, what next."""

    complete: bool = False
    covered: list[str] = dataclasses.field(default_factory=list)  # topic titles, module order
    review: list[str] = dataclasses.field(default_factory=list)  # seen, with checks not yet mastered
    next_modules: list[LinkItem] = dataclasses.field(default_factory=list)


def completion_item(module: _Module, progress: ProgressView, others: Iterable[_Module]) -> CompletionItem:
    """The completion view once every topic is done; an empty item before that."""
    if not progress.complete:
        return CompletionItem()
    seen, mastered = set(progress.covered), set(progress.mastered)
    topics = list(module.topics)
    return CompletionItem(
        complete=True,
        covered=[t.title for t in topics if t.id in seen or t.id in mastered],
        review=[t.title for t in topics if t.checks and t.id in seen and t.id not in mastered],
        next_modules=[LinkItem(m.id, m.title) for m in others if m.id != module.id],
    )
