"""A learner who follows the built-in tutor's quick replies, and answers each check with the
author's example answer, finishes the module: the replies never lead round in a circle, and
a check is never followed by another one at once."""

from __future__ import annotations

import asyncio

import pytest

from tutor.content.modules import load_library
from tutor.llm.base import LearnerInput
from tutor.llm.config import LLMSettings
from tutor.llm.factory import make_provider
from tutor.storage.store import Store
from tutor.teach.check_plan import SPACING
from tutor.turns.engine import Engine

LIBRARY = load_library()
SKIP = {"Skip this check", "Bỏ qua câu hỏi này"}
MAX_TURNS = 120


def walk(store: Store, module_id: str, *, prefer: str | None = None) -> list[tuple[str, str]]:
    """(what the learner sent, "check" | "reply") per turn until the module is complete."""
    module = LIBRARY.get(module_id)
    engine = Engine(store, make_provider(LLMSettings()), LIBRARY, LLMSettings())

    async def go() -> list[tuple[str, str]]:
        view = await engine.open(f"walker-{module_id}-{prefer}", module_id)
        last, sent = engine.history(view.id)[-1], []
        for _ in range(MAX_TURNS):
            content = (last.response or {}).get("content", {})
            check = next((f for f in content.get("forms") or [] if f["id"].startswith("check-")), None)
            offered = [s for s in (content.get("next_step") or {}).get("suggestions") or [] if s not in SKIP]
            if check is not None:
                text, kind = module.find_check(check["id"].removeprefix("check-"))[1].example_answer, "check"
            else:
                assert offered, f"no way on after {len(sent)} turns"
                text, kind = (prefer if prefer in offered else offered[0]), "reply"
                asked = {s for s, k in sent if k == "reply" and _is_question(s)}
                assert not asked & set(offered), f"offered again what the learner already asked: {asked & set(offered)}"
            result = await engine.send(view.id, LearnerInput(text=text))
            sent.append((text, kind))
            last = result.reply
            if result.progress.percentage >= 100:
                return sent
        raise AssertionError(f"not finished in {MAX_TURNS} turns: {[s for s, _ in sent][-12:]}")

    return asyncio.run(go())


def _is_question(reply: str) -> bool:
    """A quick reply that asks something (moving on, "Continue" or "Next: …", may come again)."""
    return reply.endswith("?") or reply.startswith("Tell me more")


@pytest.mark.parametrize("prefer", [None, "Continue"], ids=["first-reply", "continue"])
def test_following_the_quick_replies_finishes_the_module_without_going_round(store, prefer):
    sent = walk(store, "understanding_anxiety", prefer=prefer)
    module = LIBRARY.get("understanding_anxiety")
    checks = sum(len(t.checks) for t in module.topics)
    assert sum(1 for _, kind in sent if kind == "check") == checks  # each answered once, well
    assert len(sent) <= 2 * (len(module.topics) + checks)


@pytest.mark.parametrize("prefer", [None, "Continue"], ids=["first-reply", "continue"])
def test_a_check_answered_is_never_followed_by_another_at_once(store, prefer):
    """New material comes after a check answered well; in the closing review (every topic
    taught) the tutor says how many are left and the next one waits for "Continue"."""
    sent = walk(store, "understanding_anxiety", prefer=prefer)
    kinds = [kind for _, kind in sent]
    assert all(not (a == b == "check") for a, b in zip(kinds, kinds[1:])), kinds


def test_a_learner_who_only_asks_questions_still_meets_the_checks_spread_out(store):
    """Following the first quick reply asks a question nearly every turn; the check of a
    taught topic still comes below an answer once SPACING turns passed without one, instead
    of every check waiting for the closing review."""
    kinds = "".join("C" if kind == "check" else "r" for _, kind in walk(store, "understanding_anxiety"))
    assert max(len(s) for s in kinds.split("C")) <= SPACING + 2, kinds


def test_the_vietnamese_module_is_walked_to_the_end_too(store):
    sent = walk(store, "giac_ngu_lanh_manh", prefer="Tiếp tục")
    assert sum(1 for _, kind in sent if kind == "check") == sum(len(t.checks) for t in
                                                             LIBRARY.get("giac_ngu_lanh_manh").topics)
