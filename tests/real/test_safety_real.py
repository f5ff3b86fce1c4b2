"""The model screen against the real server: the classify contract goes out as a JSON
schema, and whatever the tiny model answers, the turn ends in one of the allowed ways — a
valid screen (flags only with verbatim evidence and canonical labels), or a screen that
failed, which lists the turn for review while the learner gets the lesson — and the offline
screen still answers a crisis without the model."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest
from sqlmodel import select

from tutor.content.modules import load_library
from tutor.llm.base import LearnerInput
from tutor.llm.factory import make_provider
from tutor.risk.turn import SafetySettings
from tutor.storage.store import AuditEvent, RiskEvent, Store
from tutor.turns.engine import Engine

pytestmark = pytest.mark.real_model

ROOT = Path(__file__).resolve().parents[2]
MODULE = "understanding_anxiety"


def test_model_screen_with_the_real_server(llama, tmp_path):
    settings = llama.settings(strategy="json_schema", stream=True, max_tokens=300)
    store = Store(f"sqlite:///{tmp_path / 'tutor.db'}")
    store.migrate()
    library = load_library(ROOT / "modules")
    labels = set(library.safety_for(MODULE).labels)
    text = "What is box breathing, and when should I use it?"
    check_in = [b.content for b in library.safety_for(MODULE).check_in_for("en")]

    async def play():
        provider = make_provider(settings)
        engine = Engine(store, provider, library, settings, SafetySettings(model_screen=True, deadline_s=120))
        try:
            view = await engine.open("screened", MODULE, new=True, defer_opening=True)
            ordinary = await engine.send(view.id, LearnerInput(text=text))
            crisis = await engine.send(view.id, LearnerInput(text="I want to kill myself"))
            return ordinary, crisis
        finally:
            await provider.aclose()

    ordinary, crisis = asyncio.run(play())
    with store.session() as s:
        screens = [a for a in s.exec(select(AuditEvent)) if '"risk_screen"' in a.detail_json]
        risks = list(s.exec(select(RiskEvent)))
    store.dispose()

    # The ordinary message went through the model screen, audited; the crisis, caught by the
    # offline screen, was answered at once with no model call at all.
    assert len(screens) >= 1 and all(a.message_id != crisis.reply.id for a in screens)
    assert all(a.strategy == "json_schema" for a in screens)
    flags = set(ordinary.reply.flags)
    # Either a valid screen (then a lesson turn, or a safety reply for a flag with verbatim
    # evidence), or a failed screen: listed for review, and the learner still gets the lesson.
    assert ordinary.reply.response is not None
    shown = [b["content"] for b in ordinary.reply.response["content"]["text_blocks"]]
    if "screen_failed" in flags:
        assert "needs_review" in flags and not any(f.startswith("risk:") for f in flags)
        assert shown != check_in
    for risk in risks:
        assert risk.label in labels | {"screen_failed"}
        for evidence in risk.evidence:
            source = text if risk.message_id == ordinary.learner.id else "I want to kill myself"
            snippet = source[evidence["start"]:evidence["end"]]
            assert snippet and hashlib.sha256(snippet.encode()).hexdigest() == evidence["sha256"]
    # The offline screen answered the crisis whatever the model said.
    assert "risk:self_harm" in crisis.reply.flags
    assert any(r.label == "self_harm" and r.source in ("offline", "offline+semantic") for r in risks)
