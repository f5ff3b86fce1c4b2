"""One refresh of the operator console as the page gets it (tutor.console.console_display): a page
of reviews with a next page, health rows, a module's rows; on a real SQLite database with
rows from real turns (tests/test_console.py's World)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import unicodedata

import pytest

from tests.test_console import LIBRARY, MODULE, SECRET, World
from tutor.access import accounts
from tutor.console.console_display import (
    REVIEW_PAGE,
    console_time,
    load_console,
    module_view,
    review_row,
)
from tutor.console.reviews import ReviewItem
from tutor.i18n import translator
from tutor.llm.base import LearnerInput
from tutor.llm.config import LLMSettings
from tutor.llm.factory import make_provider
from tutor.storage.store import Message, Store
from tutor.turns.engine import Engine


@pytest.fixture
def world(store: Store, monkeypatch: pytest.MonkeyPatch) -> World:
    return World(store, monkeypatch)


def test_one_refresh_holds_a_page_of_reviews_health_and_the_module(world, store):
    data = load_console(store, LIBRARY, include_reviewed=False, page=0, module_id=MODULE,
                        pricer=LLMSettings(price_input_per_mtok=3.0).cost)
    assert [r.key for r in data.reviews] == [data.reviews[0].key, f"turn-{world.cat_reply.id}"]
    risk, turn = data.reviews
    assert risk.kind_label == "Safety flag" and risk.learner == "bob" and "confidence" in risk.detail
    assert risk.evidence and risk.evidence[0].check == ""
    assert turn.kind_label == "Tutor turn" and not turn.reviewed and turn.attempts[0].error_class == "AuthError"
    assert turn.attempts[0].cost == "0.000000" and "TUTOR_LLM_API_KEY" in turn.attempts[0].hint
    assert not data.has_more
    assert [w.label for w in data.windows] == ["last hour", "last day"] and data.windows[0].p50.endswith("ms")
    assert data.errors[0].status == "401" and "TUTOR_LLM_API_KEY" in data.errors[0].hint
    assert data.module.module_id == MODULE and data.module.learners == "3 learners"
    assert risk.module_title == LIBRARY.modules[MODULE].title != MODULE  # the title, not the id
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", risk.created_at), risk.created_at
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", data.errors[0].created_at)
    assert re.fullmatch(r"[\d,]+ calls?", data.windows[1].calls) and data.windows[1].calls != "1 calls"
    assert re.fullmatch(r"Built-in tutor: [\d,]+ turns \(not model calls, not in the latency\); "
                        r"1 stood in for a failed model turn\.", data.windows[0].builtin), data.windows[0].builtin
    assert any(t.mastered == "1" for t in data.module.topics)
    assert any(f.key == "anxiety_levels_check-primary_level" for f in data.module.fields)
    assert data.module.checks[0].mean == "10"
    assert SECRET not in json.dumps([r.__dict__ for r in data.reviews], default=lambda o: o.__dict__)


def test_the_review_list_is_paged_and_an_unknown_module_shows_nothing(world, store):
    with store.session() as s:
        for i in range(REVIEW_PAGE + 5):
            s.add(Message(conversation_id=world.ann.id, seq=100 + i, role="tutor", raw=f"cut {i}",
                          outcome="repaired", flags_json='["truncated"]'))
        s.commit()
    first = load_console(store, LIBRARY, include_reviewed=False, page=0, module_id="no-such-module")
    second = load_console(store, LIBRARY, include_reviewed=False, page=1, module_id="no-such-module")
    assert len(first.reviews) == REVIEW_PAGE and first.has_more
    assert len(second.reviews) == 7 and not second.has_more  # 25 turns, a flag and cat's turn
    assert not {r.key for r in first.reviews} & {r.key for r in second.reviews}
    assert first.module.module_id == "" and first.module.topics == []


def test_counts_use_the_catalogues_plural_forms(store):
    """One learner is "1 learner", not "1 learners"; the same sentence in Vietnamese has its one form."""
    engine = Engine(store, make_provider(LLMSettings()), LIBRARY, LLMSettings())
    key = accounts.identity_of(store, accounts.create_account(store, "solo", "pass-phrase one")).learner_key

    async def lesson():
        view = await engine.open(key, MODULE)
        await engine.send(view.id, LearnerInput(text="Continue"))

    asyncio.run(lesson())
    view = module_view(store, LIBRARY, MODULE)
    assert view.learners == "1 learner"
    assert view.stopped == "0 stopped (no message for a day, module not complete), 0 of them before any topic"
    assert module_view(store, LIBRARY, MODULE, translator("vi")).learners == "1 người học"
    item = ReviewItem(kind="turn", id=7, created_at="2026-11-25T14:03:09Z", module_id="gone_module",
                      conversation_id=1, learner_key="k", label="truncated", raw="x", raw_omitted=1,
                      reviewed_at="2026-11-26T09:00:00Z", reviewed_by="olga")
    row = review_row(item, {MODULE: "A title"})
    assert row.raw_more == "… 1 more character not shown"
    assert row.module_title == "gone_module"  # a module no longer served: its id
    assert row.reviewed_line == "Reviewed by olga at 2026-11-26 09:00 UTC"
    assert console_time("2026-11-25T14:03:09Z") == "2026-11-25 14:03 UTC" and console_time(None) == ""
    # Vietnamese a model wrote as letters plus combining marks is shown composed, so a
    # monospace font draws "ệ", not "e" with two marks hanging beside it.
    decomposed = unicodedata.normalize("NFD", "Bạn nghỉ ngơi đi nhé. Tiếp tục")
    assert decomposed != "Bạn nghỉ ngơi đi nhé. Tiếp tục"
    assert review_row(dataclasses.replace(item, raw=decomposed), {}).raw == "Bạn nghỉ ngơi đi nhé. Tiếp tục"
