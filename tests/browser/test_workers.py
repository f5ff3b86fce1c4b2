"""Many learners' mode in a real browser: Redis for tab state, two backend workers, one
database. Two tabs of one conversation get one reply per message; a worker killed in the
middle of a turn is replaced, and the turn it held is answered by another worker once its
claim's lease runs out — the learner's tab shows it without a reload."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from playwright.sync_api import Page, expect

from tests.browser.conftest import AppPool, RunningApp, ScriptedModel, scripted, scripted_model_env
from tests.browser.helpers import db_rows, open_module, wait_idle
from tests.fakes.servers import FakeLLMServer, Scripted
from tests.fakes.wire import openai_reply, tutor_reply

REDIS_DB = 11
LEASE_S = 4


@pytest.fixture
def workers_app(apps: AppPool, model_server: FakeLLMServer) -> Iterator[RunningApp]:
    redis.Redis(host="127.0.0.1", port=6379, db=REDIS_DB).flushdb()
    yield apps.use("workers", **scripted_model_env(
        model_server, TUTOR_REDIS_URL=f"redis://127.0.0.1:6379/{REDIS_DB}", GRANIAN_WORKERS="2",
        TUTOR_REPLY_LEASE=str(LEASE_S), TUTOR_LLM_TIMEOUT="120", TUTOR_LLM_STREAM="0"))


@pytest.fixture
def model(model_server: FakeLLMServer, workers_app: RunningApp) -> Iterator[ScriptedModel]:
    yield from scripted(model_server)


def workers(app: RunningApp) -> list[int]:
    """The backend worker processes: children of the server process."""
    assert app.process is not None
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == app.process.pid and "reflex" in cmdline:
            found.append(int(entry.name))
    return sorted(found)


def replies_to(app: RunningApp, text: str) -> list[tuple]:
    return db_rows(app.db_path, """
        select t.id from message t join message l
          on l.conversation_id = t.conversation_id and t.reply_to_seq = l.seq
        where t.role = 'tutor' and l.role = 'learner' and l.text = ?""", text)


def slow(text: str, delay_s: float):
    return lambda _request: Scripted(200, openai_reply(json.dumps(tutor_reply(text))).body, delay_s=delay_s)


def test_two_tabs_on_two_workers_get_one_reply_per_message(workers_app: RunningApp, model: ScriptedModel,
                                                           page: Page) -> None:
    open_module(page, workers_app.url)
    other = page.context.new_page()  # the same learner in a second tab
    open_module(other, workers_app.url)
    calls = len(model.requests)
    model.server.default = slow("One careful answer.", 2.5)

    page.locator("#message").fill("What does anxiety do to the body?")
    page.locator("#message").press("Enter")
    expect(page.locator(".msg-learner").last).to_contain_text("What does anxiety do")
    other.reload()  # mid-turn: the other tab's page load finds the message unanswered

    for tab in (page, other):
        expect(tab.locator(".msg-tutor").last).to_contain_text("One careful answer.", timeout=30_000)
        wait_idle(tab)
        assert tab.locator(".msg-tutor", has_text="One careful answer.").count() == 1
    assert len(replies_to(workers_app, "What does anxiety do to the body?")) == 1
    assert len(model.requests) == calls + 1  # one model call for one message


def test_a_killed_worker_is_replaced_and_its_turn_answered(workers_app: RunningApp, model: ScriptedModel,
                                                          page: Page) -> None:
    before = workers(workers_app)
    assert len(before) == 2
    open_module(page, workers_app.url)
    model.server.default = slow("never arrives", 60)

    page.locator("#message").fill("Tell me about slow breathing")
    page.locator("#message").press("Enter")
    deadline = time.monotonic() + 30
    holder = []
    while not holder and time.monotonic() < deadline:
        holder = db_rows(workers_app.db_path, "select holder from replyclaim")
        time.sleep(0.2)
    assert holder, "the turn was never claimed"
    pid = int(holder[0][0].split(":")[1])
    assert pid in before
    model.server.default = slow("Answered by the worker that took over.", 0)
    os.kill(pid, signal.SIGKILL)

    # The page reconnects to a live worker, which waits out the dead one's lease and answers.
    expect(page.locator(".msg-tutor").last).to_contain_text("Answered by the worker that took over.",
                                                           timeout=LEASE_S * 1000 + 40_000)
    assert len(replies_to(workers_app, "Tell me about slow breathing")) == 1
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(workers(workers_app)) < 2:
        time.sleep(0.5)
    after = workers(workers_app)
    assert len(after) == 2 and pid not in after  # replaced; the server kept running
