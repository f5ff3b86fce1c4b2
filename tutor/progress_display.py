"""What the page shows of the learner's progress, as plain data: the chat header's bar and
counts (topics seen, topics mastered, where they are) and the start page's module cards."""

from __future__ import annotations

import dataclasses

from tutor.views import ConversationSummary, ProgressView

__all__ = ["ModuleCard", "ProgressItem", "module_card", "progress_item"]


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


def module_card(
    module_id: str, title: str, description: str, topics: int,
    progress: ProgressView | None, conversation: ConversationSummary | None,
) -> ModuleCard:
    covered = len(progress.covered) if progress else 0
    turns = conversation.turns if conversation else 0
    return ModuleCard(
        id=module_id,
        title=title,
        description=description,
        topics=topics,
        started=conversation is not None or covered > 0,
        percent=progress_item(progress).percent if progress else 0,
        covered=covered,
        mastered=len(progress.mastered) if progress else 0,
        activity=f"{turns} message{'' if turns == 1 else 's'} sent" if turns else "",
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


def progress_item(progress: ProgressView) -> ProgressItem:
    state = progress.module_state
    # Floor, so the bar never shows 100% before the module is complete.
    percent = int(progress.percentage) if progress.percentage < 100 else 100
    covered = len(progress.covered)
    mastered = len(progress.mastered)
    summary = f"{percent}% of the module covered: {covered} of {progress.total} topics"
    if progress.checked:
        summary += f", {mastered} of {progress.checked} mastered"
    return ProgressItem(
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
