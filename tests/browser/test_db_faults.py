"""The database goes away under a running app (PostgreSQL closed to connections, its
backends cut) and comes back: the learner is told calmly and keeps their text; the home
page says Tutor is unavailable; the operator log gets the cause and the fix, no driver
tracebacks; once the database is back, the same text sends."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import AppPool, RunningApp
from tests.browser.helpers import MODULE, open_module, send
from tests.test_db_faults import PgDatabase
from tutor.storage import dbfaults


@pytest.fixture
def pg_app(apps: AppPool) -> Iterator[tuple[RunningApp, PgDatabase]]:
    db = PgDatabase()
    app = apps.use("dbfaults", TUTOR_DATABASE_URL=db.url)
    try:
        yield app, db
    finally:
        app.stop()
        db.drop()


def test_a_database_outage_is_told_calmly_and_nothing_typed_is_lost(page: Page, pg_app):
    app, db = pg_app
    open_module(page, app.url)
    learner_before = page.locator(".msg-learner").count()
    log_before = len(app.log_path.read_text(errors="replace")) if app.log_path else 0

    db.down()
    box = page.locator("#message")
    box.fill("Does this get lost?")
    box.press("Enter")
    expect(page.locator("#composer-help")).to_have_text(dbfaults.MESSAGE_NOT_SAVED)
    expect(box).to_have_value("Does this get lost?")
    expect(page.locator(".msg-learner")).to_have_count(learner_before)

    page.goto(app.url + "/")
    expect(page.locator("#unavailable")).to_have_text(dbfaults.UNAVAILABLE)
    expect(page.locator("#modules li")).to_have_count(0)

    log = app.log_path.read_text(errors="replace")[log_before:]
    lines = [line for line in log.splitlines() if "database unavailable (" in line]
    assert any("learner message not saved" in line for line in lines), log
    assert any("home page" in line for line in lines), log
    assert all(f"TUTOR_DATABASE_URL=postgresql+psycopg2://postgres@127.0.0.1:5432/{db.name}" in line
               for line in lines), lines
    assert "OperationalError" not in log and "psycopg2" not in log.replace(db.url, "")  # no driver tracebacks

    page.goto(f"{app.url}/learn?module={MODULE}")
    expect(page.locator(".load-error")).to_contain_text(dbfaults.UNAVAILABLE)

    db.up()
    box.fill("Does this get lost?")
    box.press("Enter")  # the page loaded while the database was down: this loads it again
    expect(page.locator(".load-error")).to_have_count(0)
    page.locator(".msg-tutor").first.wait_for()
    expect(box).to_have_value("Does this get lost?")
    send(page, "Does this get lost?")
    expect(page.locator(".msg-learner")).to_have_count(learner_before + 1)
    expect(page.locator(".msg-learner").last).to_contain_text("Does this get lost?")
