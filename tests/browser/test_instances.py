"""Two app instances on two ports, as on two machines behind a load balancer: each its own
`scripts/run.sh` (own build, own workers), sharing one PostgreSQL database and one Redis.
The same learner has a tab on each; a message sent on one is answered once — one model
call, one stored reply — and both tabs show that reply."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import redis
from playwright.sync_api import Page, expect

from tests.browser.app_runner import REPO, RunningApp
from tests.browser.conftest import AppPool, scripted_model_env, screen_finds_nothing
from tests.browser.helpers import open_module, wait_idle
from tests.conftest import postgres_database
from tests.fakes.servers import FakeLLMServer, Scripted
from tests.fakes.wire import openai_reply, tutor_reply

REDIS_DB = 13


@pytest.fixture
def instances(apps: AppPool, model_server: FakeLLMServer, tmp_path_factory) -> Iterator[list[RunningApp]]:
    if apps.running is not None:  # free the machine (and .web-test) from the pool's app
        apps.running.stop()
        apps.running = None
    redis.Redis(host="127.0.0.1", port=6379, db=REDIS_DB).flushdb()
    with postgres_database("tutor_instances") as database_url:
        shared = scripted_model_env(
            model_server, TUTOR_DATABASE_URL=database_url, TUTOR_REDIS_URL=f"redis://127.0.0.1:6379/{REDIS_DB}",
            GRANIAN_WORKERS="1", TUTOR_LLM_TIMEOUT="60", TUTOR_LLM_STREAM="0")
        running = []
        try:
            for i, workdir in enumerate((".web-test-second", ".web-test")):
                app = RunningApp.create(tmp_path_factory.mktemp(f"instance-{i}"), **shared,
                                        REFLEX_WEB_WORKDIR=str(REPO / workdir))
                app.start()
                running.append(app)
            yield running
        finally:
            for app in running:
                app.stop()

def test_two_instances_answer_each_message_once(instances: list[RunningApp], model_server: FakeLLMServer,
                                                page: Page) -> None:
    first, second = instances
    assert first.port != second.port
    model_server.reset()
    model_server.intercept = screen_finds_nothing
    open_module(page, first.url)
    key = page.evaluate("() => window.localStorage.getItem('tutor_learner')")
    assert key
    other = page.context.browser.new_context().new_page()
    other.add_init_script(f"window.localStorage.setItem('tutor_learner', {json.dumps(key)})")
    open_module(other, second.url)  # the same learner, through the other instance
    calls = len(model_server.requests)
    model_server.default = lambda _request: Scripted(
        200, openai_reply(json.dumps(tutor_reply("One answer from one instance."))).body, delay_s=2.5)

    page.locator("#message").fill("What does anxiety do to the body?")
    page.locator("#message").press("Enter")
    expect(page.locator(".msg-learner").last).to_contain_text("What does anxiety do")
    other.reload()  # mid-turn, on the other instance: it finds the message unanswered

    for tab in (page, other):
        expect(tab.locator(".msg-tutor").last).to_contain_text("One answer from one instance.", timeout=30_000)
        wait_idle(tab)
        assert tab.locator(".msg-tutor", has_text="One answer from one instance.").count() == 1
    assert len(model_server.requests) == calls + 1  # one model call for one message
    screened = [r for r in model_server.intercepted if "What does anxiety do" in json.dumps(r.body)]
    assert len(screened) == 1  # and one safety screen of it
    other.context.close()
