"""Streamed conversations through the engine against the real server: the previews the
learner watches while a reply is written, Stop, and what is stored. Structure and
behaviour only, never wording."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from tutor.content.modules import load_library
from tutor.contract.partial import preview
from tutor.llm.base import LearnerInput
from tutor.llm.factory import make_provider
from tutor.llm.usable import Sent, check
from tutor.render.views import MessageView
from tutor.storage.store import Store
from tutor.turns.engine import Engine
from tutor.turns.prompts import OPENING_TURN

pytestmark = pytest.mark.real_model

ROOT = Path(__file__).resolve().parents[2]
MODULE = "understanding_anxiety"


# Chat-template markers the tiny model may write as text; never shown to the learner.
MARKER = re.compile(r"<\|[A-Za-z_]+\|>|</?s>|<(?:start|end)_of_turn>|<(?:eos|bos)>")


def assert_no_junk_shown(view: MessageView, learner: str) -> None:
    """A reply shown as a lesson passes the content gate (no placeholder, marker, echo or
    loop); anything else failed closed and says so. Either way no marker is on screen."""
    assert not MARKER.search(shown_text(view)), shown_text(view)
    lesson = view.outcome in ("valid", "repaired") and "needs_review" not in view.flags \
        and "fallback_apology" not in view.flags
    if lesson:
        verdict = check(view.response or {}, Sent(learner=learner))
        assert verdict.flags == [], (verdict.problems, view.response)
    else:
        assert "needs_review" in view.flags or "stopped" in view.flags, view.flags


def shown_text(view: MessageView) -> str:
    """What the page can show for a tutor message: its text blocks, or the raw text a
    failed-closed reply falls back to."""
    blocks = ((view.response or {}).get("content") or {}).get("text_blocks") or []
    text = "\n".join(str(b.get("content") or "") for b in blocks)
    return text if text.strip() else (view.raw or "")


class Recorder:
    """A TurnListener that keeps every update: attempts[i] is the growing raw text of the
    i-th model call of the turn (a re-ask starts a new one)."""

    def __init__(self, on_text: Callable[[str], Awaitable[None]] | None = None):
        self.attempts: list[list[str]] = [[]]
        self.statuses: list[str] = []
        self.on_text = on_text

    async def text(self, raw: str) -> None:
        self.attempts[-1].append(raw)
        if self.on_text is not None:
            await self.on_text(raw)

    async def status(self, status: str) -> None:
        self.statuses.append(status)
        if status == "reasking":
            self.attempts.append([])


async def with_engine(tmp_path: Path, settings, play):
    store = Store(f"sqlite:///{tmp_path / 'tutor.db'}")
    store.migrate()
    provider = make_provider(settings)
    engine = Engine(store, provider, load_library(ROOT / "modules"), settings)
    try:
        return await play(engine)
    finally:
        await provider.aclose()
        store.dispose()


def test_streamed_conversation_through_the_engine(llama, tmp_path):
    settings = llama.settings(strategy="json_schema", stream=True, max_tokens=400)
    recorders = [Recorder(), Recorder()]

    async def play(engine: Engine):
        view = await engine.open("real-learner", MODULE, new=True, defer_opening=True)
        results = [await engine.respond_pending(view.id, recorders[0])]
        pending = await engine.accept(view.id, LearnerInput(text="What is anxiety, actually?"))
        results.append(await engine.respond(pending, recorders[1]))
        return results, engine.history(view.id)

    results, history = asyncio.run(with_engine(tmp_path, settings, play))
    assert [m.role for m in history] == ["tutor", "learner", "tutor"]  # nothing lost, in order
    assert history[1].text == "What is anxiety, actually?"
    assert history[2].reply_to_seq == history[1].seq
    for result, stored, recorder in zip(results, [history[0], history[2]], recorders):
        assert result.reply.id == stored.id
        assert stored.outcome in ("valid", "repaired", "invalid")
        if stored.outcome == "invalid":
            assert "needs_review" in stored.flags  # failed closed, and says so
        assert shown_text(stored).strip(), stored  # the learner always has something to read
        assert_no_junk_shown(stored, OPENING_TURN if stored is history[0] else history[1].text)
        calls = [a for a in result.attempts if a.outcome != "skipped"]
        assert calls and all(a.strategy == "json_schema" for a in calls)
        assert all(a.tokens_out <= settings.max_tokens or "tokens_estimated" in a.flags for a in calls)
        assert_previews_grow(recorder, stored)


def assert_previews_grow(recorder: Recorder, stored: MessageView) -> None:
    """The learner watched the reply being written: many updates, each extending the last;
    a text block on screen before the reply was complete, its text only growing; and no
    previewed block that the stored reply lacks."""
    updates = recorder.attempts[-1]
    assert len(updates) >= 3, recorder.attempts
    for before, after in zip(updates, updates[1:]):
        assert after.startswith(before) and len(after) > len(before)
    previews = [preview(raw) for raw in updates]
    early = next((i for i, p in enumerate(previews) if p.blocks), None)
    assert early is not None and early < len(updates) - 1, "no text block was shown before the reply ended"
    for before, after in zip(previews, previews[1:]):
        assert len(after.blocks) >= len(before.blocks)
        for old, new in zip(before.blocks, after.blocks):
            assert new.content.startswith(old.content)
    if stored.outcome == "valid":  # the stored reply is the whole stream, untouched
        assert stored.raw == updates[-1]
        kept = [b.get("content") for b in stored.response["content"]["text_blocks"]]
        assert all(b.content in kept for b in previews[-1].blocks if b.complete)


def test_stop_ends_the_turn_at_once_and_the_learner_carries_on(llama, tmp_path):
    settings = llama.settings(strategy="json_schema", stream=True, max_tokens=400)
    conversation: dict[str, int] = {}

    async def play(engine: Engine):
        view = await engine.open("stopping-learner", MODULE, new=True, defer_opening=True)
        conversation["id"] = view.id

        async def stop_after_a_few(raw: str) -> None:
            if len(stopper.attempts[-1]) == 3:
                assert engine.writing(view.id)
                assert engine.stop(view.id)

        stopper = Recorder(stop_after_a_few)
        stopped = await engine.respond_pending(view.id, stopper)
        assert not engine.writing(view.id)
        after = await engine.send(view.id, LearnerInput(text="Please go on."))
        return stopped, stopper, after, engine.history(view.id)

    stopped, stopper, after, history = asyncio.run(with_engine(tmp_path, settings, play))
    assert "stopped" in stopped.reply.flags
    assert len(stopper.attempts) == 1  # no re-ask after a Stop
    # Ended at once: what arrived up to the Stop (a few tokens more at most), not a whole reply.
    assert len(stopped.reply.raw or "") <= len(stopper.attempts[-1][-1]) + 200
    calls = [a for a in stopped.attempts if a.outcome != "skipped"]
    assert len(calls) == 1 and calls[0].finish_reason == "stopped"
    assert [m.role for m in history] == ["tutor", "learner", "tutor"]  # stored, and the learner went on
    assert history[0].id == stopped.reply.id and "stopped" in history[0].flags
    assert history[2].id == after.reply.id and shown_text(history[2]).strip()
    assert_no_junk_shown(history[0], OPENING_TURN)
    assert_no_junk_shown(history[2], "Please go on.")
    # The server is not still writing: it stops within moments of the Stop (as in
    # test_openai_real), not after writing to max_tokens for nobody; on a busy machine it may
    # take a moment to notice the closed stream.
    deadline = time.monotonic() + 2.0
    while llama.get("/slots")[1][0]["is_processing"]:
        assert time.monotonic() < deadline, "the server kept generating after the turn ended"
        time.sleep(0.05)
