"""A learner in distress gets the author's safety reply at once, in the page, and can go on."""

from __future__ import annotations

import json

from playwright.sync_api import Page, expect

from tests.browser.conftest import RunningApp
from tests.browser.helpers import db_rows, last_tutor, open_module, send
from tutor.risk.config import load_safety


def test_a_crisis_message_gets_the_authors_reply_and_the_lesson_can_go_on(app: RunningApp, page: Page) -> None:
    open_module(page, app.url)
    progress = page.locator("#progress-count").inner_text()

    send(page, "I don't want to be alive anymore")
    reply = last_tutor(page)
    for block in load_safety().reply_for("self_harm", "en"):
        if block.type != "list":  # its words, as rendered (no markdown marks)
            expect(reply).to_contain_text(" ".join(block.content.replace("**", "").split()[:6]))
    expect(page.locator("#progress-count")).to_have_text(progress)  # nothing counted as learning
    expect(page.locator("#message")).to_be_enabled()
    [(flags,)] = db_rows(app.db_path, "select flags_json from message where role = 'tutor' order by id desc limit 1")
    assert "risk:self_harm" in json.loads(flags)
    [(label, evidence)] = db_rows(app.db_path, "select label, evidence_json from riskevent")
    assert label == "self_harm" and json.loads(evidence)[0]["sha256"]

    send(page, "Thank you, I'm safe. What is the fight or flight response?")
    expect(last_tutor(page)).to_contain_text("adrenaline")
