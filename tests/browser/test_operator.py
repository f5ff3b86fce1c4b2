"""The operator console in the browser: refused to learners and signed-out visitors (no data
reaches their page), and an operator, made with `tutor users create --operator`, finds a
turn that failed closed, reads its raw reply and the configuration hint, and marks it
reviewed; the progress export answers the operator only."""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect
from sqlmodel import select

from tests.browser.app_runner import REPO
from tests.browser.axe import axe_in_both_themes
from tests.browser.conftest import RunningApp, _page
from tests.browser.helpers import MODULE
from tutor.access.accounts import find_account
from tutor.storage.store import (
    AuditEvent,
    Conversation,
    Learner,
    Message,
    Store,
    TurnReview,
)

PASSWORD = "a fine password"
HOSTILE_RAW = 'Here is {"content": <img src=x onerror="window.__pwned=1"> broken'


def make_account(app: RunningApp, name: str, *, operator: bool = False) -> None:
    command = [str(REPO / ".venv" / "bin" / "tutor"), "users", "create", name, "--password-stdin"]
    if operator:
        command.append("--operator")
    env = {**os.environ, **{k: v for k, v in app.env.items() if k.startswith("TUTOR_")}}
    done = subprocess.run(command, input=PASSWORD + "\n", text=True, capture_output=True, env=env, cwd=REPO,
                          timeout=120)
    assert done.returncode == 0, done.stderr


def sign_in(page: Page, app: RunningApp, name: str, next_path: str = "/operator") -> None:
    page.goto(app.url + "/signin?next=" + next_path.replace("/", "%2F"))
    expect(page.locator("input[name=next]")).to_have_value(next_path)  # the page has read its address
    page.get_by_label("Username").fill(name)
    page.get_by_label("Password").fill(PASSWORD)
    page.locator("#signin-submit").click()
    page.wait_for_url(re.compile(re.escape(next_path) + "/?$"))


def failed_turn(app: RunningApp) -> int:
    """A turn that failed closed because the endpoint refused the key, stored as the engine
    stores one: the learner's message, the apology with the raw text, one audit row."""
    store = Store(f"sqlite:///{app.db_path}")
    try:
        with store.session() as s:
            learner = Learner(key="k-" + uuid.uuid4().hex)
            s.add(learner)
            s.flush()
            conv = Conversation(learner_id=learner.id or 0, module_id=MODULE)
            s.add(conv)
            s.flush()
            s.add(Message(conversation_id=conv.id or 0, seq=0, role="learner", text="hello"))
            reply = Message(conversation_id=conv.id or 0, seq=1, role="tutor", raw=HOSTILE_RAW, outcome="invalid",
                            flags_json='["invalid_json", "transport_error", "needs_review"]', reply_to_seq=0)
            s.add(reply)
            s.flush()
            s.add(AuditEvent(conversation_id=conv.id or 0, message_id=reply.id, attempt=1, provider="openai",
                             model="gpt-test", strategy="json_schema", latency_ms=123.0, outcome="error",
                             error_class="AuthError", detail_json=json.dumps({
                                 "kind": "first", "http_status": 401, "error": "401 Unauthorized: bad key",
                                 "hint": "The model endpoint rejected the API key (401): check TUTOR_LLM_API_KEY"})))
            s.commit()
            return reply.id or 0
    finally:
        store.dispose()


def test_the_console_is_refused_to_learners_and_signed_out_visitors(accounts_app: RunningApp, page: Page) -> None:
    failed_turn(accounts_app)
    page.goto(accounts_app.url + "/operator")
    page.wait_for_url("**/signin?next=%2Foperator")  # signed out: sign in first

    name = "learner-" + uuid.uuid4().hex[:6]
    make_account(accounts_app, name)
    sign_in(page, accounts_app, name)
    expect(page.locator("#not-operator")).to_have_text("This page is for operators.")
    expect(page.get_by_role("link", name="Back to Tutor")).to_have_attribute("href", "/")
    expect(page.locator("#not-operator-signin")).to_have_count(0)  # signed in already
    expect(page.locator("#review-list")).to_have_count(0)
    assert "AuthError" not in page.content() and "TUTOR_LLM_API_KEY" not in page.content()
    # The export checks the session itself, whatever the page shows.
    export = page.request.get(accounts_app.url + "/operator/progress.csv")
    assert export.status == 403 and export.text() == "This page is for operators."


@pytest.fixture
def hanoi(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    """An operator whose computer is set to Vietnam's time (UTC+7)."""
    yield from _page(browser, request, viewport={"width": 1100, "height": 900}, timezone_id="Asia/Ho_Chi_Minh",
                     locale="en-GB")


def test_an_operator_marks_a_failed_turn_reviewed(accounts_app: RunningApp, hanoi: Page) -> None:
    page = hanoi
    turn_id = failed_turn(accounts_app)
    name = "olga-" + uuid.uuid4().hex[:6]
    make_account(accounts_app, name, operator=True)
    sign_in(page, accounts_app, name)
    item = page.locator(f"#review-turn-{turn_id}")
    expect(item).to_be_visible()
    expect(item.get_by_role("heading", level=3)).to_contain_text("Tutor turn · invalid_json, transport_error")
    raw = item.locator("pre.op-raw")
    expect(raw).to_have_text(HOSTILE_RAW)  # shown as text: the markup is not run
    assert raw.locator("img").count() == 0 and page.evaluate("window.__pwned") is None
    expect(item.get_by_role("table")).to_contain_text("AuthError")
    # Times in the operator's own zone; the UTC time stays as the tooltip.
    when = item.locator("time.op-time").first
    expect(when.locator(".local")).to_have_count(1)
    utc = datetime.fromisoformat(when.get_attribute("datetime").replace("Z", "+00:00"))
    expect(when.locator(".local")).to_contain_text((utc + timedelta(hours=7)).strftime("%H:%M"))
    expect(when.locator(".utc")).to_be_hidden()
    expect(when).to_have_attribute("title", re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d UTC$"))
    expect(item).to_contain_text("check TUTOR_LLM_API_KEY")
    expect(page.locator("#recent-errors")).to_contain_text("check TUTOR_LLM_API_KEY")
    # The conversation around the turn, read-only: the learner's message, and the turn itself
    # marked as the one under review, its raw text shown as text.
    item.get_by_role("button", name="Show conversation").click()
    conversation = page.locator(f"#conversation-turn-{turn_id}")
    expect(conversation.locator("li")).to_have_count(2)
    expect(conversation.locator("li").first).to_contain_text("Learner")
    expect(conversation.locator("li").first).to_contain_text("hello")
    focus = conversation.locator("li[aria-current=true]")
    expect(focus).to_contain_text("the message under review")
    expect(focus).to_contain_text(HOSTILE_RAW)
    assert focus.locator("img").count() == 0 and page.evaluate("window.__pwned") is None
    expect(item.get_by_role("button", name="Hide conversation")).to_have_attribute("aria-expanded", "true")
    item.get_by_role("button", name="Hide conversation").click()
    expect(conversation).to_have_count(0)

    item.get_by_label("Note (optional)").fill("rotated the key")
    item.get_by_role("button", name="Mark reviewed").click()
    expect(page.locator("#op-notice")).to_have_text(f"Tutor turn {turn_id} marked reviewed.")
    expect(item).to_have_count(0)  # reviewed items are hidden by default
    page.locator("#show-reviewed").click()  # the server ticks it (a controlled box)
    expect(page.locator("#show-reviewed")).to_be_checked()
    expect(item).to_contain_text(f"Reviewed by {name}")
    expect(item).to_contain_text("rotated the key")

    store = Store(f"sqlite:///{accounts_app.db_path}")
    try:
        with store.session() as s:
            mark = s.exec(select(TurnReview).where(TurnReview.message_id == turn_id)).one()
        assert (mark.reviewed_by, mark.note) == (name, "rotated the key")
    finally:
        store.dispose()

    export = page.request.get(accounts_app.url + "/operator/progress.csv")
    assert export.status == 200 and export.headers["content-disposition"].startswith("attachment;")
    assert export.text().lstrip("\ufeff").startswith("learner,username,module")


def test_an_operator_deletes_a_learner_only_after_typing_their_name(accounts_app: RunningApp, page: Page) -> None:
    learner = "leaving-" + uuid.uuid4().hex[:6]
    make_account(accounts_app, learner)
    failed_turn(accounts_app)  # something in the review list, so every part of the page shows
    name = "olga-" + uuid.uuid4().hex[:6]
    make_account(accounts_app, name, operator=True)
    sign_in(page, accounts_app, name)
    expect(page.locator("#module-summary")).to_contain_text(re.compile(r"^\d+ learners? · \d+ stopped"))
    expect(page.locator("#module-summary")).not_to_contain_text("1 learners")
    page.get_by_role("button", name="Show conversation").first.click()  # checked open too
    expect(page.locator(".op-transcript li[aria-current=true]")).to_have_count(1)
    assert axe_in_both_themes(page) == {}

    page.get_by_label("Username or learner key").fill(learner)
    page.get_by_role("button", name="Find learner").click()
    expect(page.locator("#delete-summary")).to_contain_text(f"(account {learner}): 0 conversations.")
    page.get_by_label(f"Type “{learner}” to confirm").fill("someone-else")
    page.get_by_role("button", name="Delete learner and data").click()
    expect(page.locator("#delete-error")).to_contain_text("Nothing was deleted")
    page.get_by_label(f"Type “{learner}” to confirm").fill(learner)
    page.get_by_role("button", name="Delete learner and data").click()
    expect(page.locator("#op-notice")).to_contain_text(f"Deleted {learner} and all their data")

    store = Store(f"sqlite:///{accounts_app.db_path}")
    try:
        assert find_account(store, learner) is None and find_account(store, name) is not None
    finally:
        store.dispose()


def test_the_csv_button_downloads_the_progress_file(accounts_app: RunningApp, page: Page) -> None:
    """The button is a plain download: the page's router does not take it (no "404: Page not
    found"), and the file comes under the app's real Content-Security-Policy."""
    name = "olga-" + uuid.uuid4().hex[:6]
    make_account(accounts_app, name, operator=True)
    sign_in(page, accounts_app, name)
    button = page.get_by_role("link", name="Download progress (CSV)")
    expect(button).to_be_visible()
    with page.expect_download(timeout=30_000) as info:
        button.click()
    download = info.value
    assert download.suggested_filename.startswith("tutor-progress-") and download.suggested_filename.endswith(".csv")
    first = Path(download.path()).read_text(encoding="utf-8-sig").splitlines()[0]
    assert first == "learner,username,module,topics seen,topics mastered,percent,last activity"
    expect(page).to_have_url(re.compile(r"/operator/?$"))  # still on the console
    assert "404" not in page.locator("body").inner_text()
    expect(page.locator("#progress-csv")).to_be_visible()
