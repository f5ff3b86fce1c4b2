"""Imminent-risk alerts: posted to TUTOR_SAFETY_ALERT_URL (a real HTTP server on 127.0.0.1)
once per imminent flag, without the learner's words, retried until delivered."""

from __future__ import annotations

import asyncio
import json

import pytest
from sqlmodel import select

from tests.fakes.servers import FakeLLMServer, Scripted
from tutor.content.modules import load_library
from tutor.llm.base import LearnerInput
from tutor.llm.config import LLMSettings
from tutor.llm.factory import make_provider
from tutor.settings import ConfigError
from tutor.storage.store import RiskEvent, Store
from tutor.turns.alerts import Alerter, AlertSettings
from tutor.turns.engine import Engine

MODULE = "understanding_anxiety"
PLAN = "I have my pills counted out and tonight I am going to take all of them"


def _engine(store: Store, url: str, tries: int = 3) -> Engine:
    settings = LLMSettings()
    alerts = Alerter(store, AlertSettings(url=url, tries=tries, first_pause_s=0.05))
    return Engine(store, make_provider(settings), load_library(), settings, alerts=alerts)


def _send(engine: Engine, learner: str, text: str):
    async def go():
        view = await engine.open(learner, MODULE)
        result = await engine.send(view.id, LearnerInput(text=text))
        await engine.alerts.drain()
        return result
    return asyncio.run(go())


def test_an_imminent_flag_is_posted_once_without_the_learners_words(store):
    with FakeLLMServer("openai") as hook:
        hook.default = lambda request: Scripted(204, b"")
        result = _send(_engine(store, hook.base_url + "/chat/completions"), "amy", PLAN)
    assert "risk_imminent" in result.reply.flags
    [post] = hook.requests
    body = post.json
    assert body["event"] == "imminent_risk" and body["severity"] == "imminent" and body["label"] == "self_harm"
    assert post.headers["idempotency-key"] == f"risk-{body['flag_id']}"
    raw = json.dumps(body)
    assert "pills" not in raw and "amy" not in raw and "sha256" not in raw  # no words, no identity, no evidence
    with store.session() as s:
        flag = s.exec(select(RiskEvent).where(RiskEvent.id == body["flag_id"])).one()
    assert flag.alerted_at is not None and body["conversation_id"] == flag.conversation_id


def test_a_failing_receiver_is_tried_again_until_it_answers(store):
    with FakeLLMServer("openai") as hook:
        hook.script(Scripted(503, {"error": "busy"}), Scripted(500, {}), Scripted(200, {}))
        _send(_engine(store, hook.base_url + "/chat/completions", tries=5), "ben", PLAN)
    assert len(hook.requests) == 3
    assert len({r.json["flag_id"] for r in hook.requests}) == 1  # the same flag each time
    with store.session() as s:
        assert s.exec(select(RiskEvent)).one().alerted_at is not None


def test_a_refusing_receiver_is_not_retried_and_the_flag_stays_unalerted(store, caplog):
    with FakeLLMServer("openai") as hook:
        hook.default = lambda request: Scripted(401, {"error": "no"})
        _send(_engine(store, hook.base_url + "/chat/completions", tries=5), "cal", PLAN)
    assert len(hook.requests) == 1
    assert "TUTOR_SAFETY_ALERT_URL" in caplog.text and PLAN not in caplog.text
    with store.session() as s:
        assert s.exec(select(RiskEvent)).one().alerted_at is None


def test_an_unreachable_receiver_does_not_hold_up_the_learner(store):
    # Nothing listens on port 9 of loopback: every try is refused at once.
    result = _send(_engine(store, "http://127.0.0.1:9/alerts", tries=2), "dee", PLAN)
    assert any(flag.startswith("risk:") for flag in result.reply.flags)


def test_an_ordinary_or_serious_message_posts_nothing(store):
    with FakeLLMServer("openai") as hook:
        hook.default = lambda request: Scripted(200, {})
        engine = _engine(store, hook.base_url + "/chat/completions")
        _send(engine, "eli", "What is box breathing?")
    assert hook.requests == []


@pytest.mark.parametrize("url", ["ftp://alerts.example.org/x", "alerts.example.org", "http://"])
def test_a_wrong_alert_address_names_the_setting(url):
    with pytest.raises(ConfigError, match="TUTOR_SAFETY_ALERT_URL"):
        AlertSettings.from_env({"TUTOR_SAFETY_ALERT_URL": url})


def test_alerts_are_off_without_an_address():
    assert AlertSettings.from_env({}).url == ""
