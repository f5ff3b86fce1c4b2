"""The judge contract against the real server: whatever the tiny model writes, a judged
answer ends with a valid score whose criteria are the rubric's own names, or with no
score at all (the turn is then flagged judge_failed) — never an invented one."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tutor.content.modules import load_library
from tutor.llm.factory import make_provider
from tutor.teach.judge_call import judge_with_model

pytestmark = pytest.mark.real_model

ROOT = Path(__file__).resolve().parents[2]
MODULE = "understanding_anxiety"


def test_judging_an_answer_with_the_real_server(llama):
    settings = llama.settings(strategy="json_schema", stream=False, max_tokens=400)
    module = load_library(ROOT / "modules").get(MODULE)
    topic, check = next((t, c) for t in module.topics for c in t.checks)

    async def play():
        provider = make_provider(settings)
        try:
            return await judge_with_model(provider, settings, module, check, check.example_answer)
        finally:
            await provider.aclose()

    call = asyncio.run(play())
    assert call.attempts and all(a.kind == "judge" and a.strategy == "json_schema" for a in call.attempts)
    if call.result is None:
        assert call.problem  # failed closed, and says why (for the operator)
        assert len(call.attempts) == 2 and call.attempts[1].temperature == 0.0
    else:
        assert 0 <= call.result.score <= 10
        assert set(call.result.criteria_scores) <= set(check.rubric.names)
        assert call.result.feedback.strip()
