"""The ending of a module as plain data: what was covered (in the module's order), what is
worth reviewing (seen, with checks not yet mastered), what next (the other modules); and the
start page's card for a completed module."""

from __future__ import annotations

from pathlib import Path

from tutor.content.modules import load_library
from tutor.render.progress_display import (
    CompletionItem,
    LinkItem,
    completion_item,
    module_card,
)
from tutor.render.views import ConversationSummary, ProgressView

REPO = Path(__file__).resolve().parents[1]
SAMPLE = load_library(REPO / "modules").get("understanding_anxiety")
OTHERS = list(load_library(REPO / "tests" / "fixtures" / "modules" / "good").modules.values())


def _progress(covered: list[str], mastered: list[str], *, done: int) -> ProgressView:
    checked = sum(1 for t in SAMPLE.topics if t.checks)
    return ProgressView(percentage=100.0 * done / len(SAMPLE.topic_ids), covered=covered, total=len(SAMPLE.topic_ids),
                        milestone=None, milestones=[], module_state={}, mastered=mastered, checked=checked, done=done)


def test_no_ending_before_every_topic_is_done() -> None:
    ids = list(SAMPLE.topic_ids)
    assert completion_item(SAMPLE, _progress(ids[:3], ids[:3], done=3), OTHERS) == CompletionItem()


def test_the_ending_lists_what_was_covered_what_to_review_and_what_next() -> None:
    ids = list(SAMPLE.topic_ids)
    checked = [t.id for t in SAMPLE.topics if t.checks]
    not_mastered = checked[:2]
    item = completion_item(
        SAMPLE, _progress(list(reversed(ids)), [i for i in ids if i not in not_mastered], done=len(ids)),
        [SAMPLE, *OTHERS])
    assert item.complete
    assert item.covered == [t.title for t in SAMPLE.topics]  # the module's order, not the order seen
    assert item.review == [SAMPLE.topic(i).title for i in not_mastered]
    assert item.next_modules == [LinkItem(m.id, m.title) for m in OTHERS]  # never the module itself


def test_a_completed_module_card_says_so() -> None:
    ids = list(SAMPLE.topic_ids)
    summary = ConversationSummary(id=1, module_id=SAMPLE.id, status="active", turns=30, updated_at="2026-01-01")
    done = module_card(SAMPLE.id, SAMPLE.title, "", len(ids), _progress(ids, ids, done=len(ids)), summary)
    assert done.completed and done.started and done.percent == 100
    halfway = module_card(SAMPLE.id, SAMPLE.title, "", len(ids), _progress(ids[:5], ids[:5], done=5), summary)
    assert not halfway.completed and halfway.started
