"""Usage limits as a learner meets them: 2 turns a minute, one model call at a time."""

from __future__ import annotations

import json
import re

from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import RunningApp, ScriptedModel
from tests.browser.helpers import MODULE, block, message_texts, open_module, reply, send

LONG = ("Anxiety is the body's alarm system: it prepares you to act. The heart beats faster to send blood "
        "to the muscles, breathing quickens to bring in oxygen, and attention narrows onto the threat. "
        "These changes are uncomfortable but not dangerous, and they pass once the alarm settles. "
        "Noticing them with curiosity, rather than fighting them, helps the wave crest and fall. ")


def test_a_learner_sending_too_fast_sees_a_calm_message_and_keeps_their_text(
    limits_app: RunningApp, limited_model: ScriptedModel, page: Page
) -> None:
    open_module(page, limits_app.url)
    send(page, "What is anxiety?")
    send(page, "And panic?")
    asked = len(limited_model.requests)
    page.locator("#message").fill("Why does my heart race before exams?")
    page.locator("#message").press("Enter")
    expect(page.locator(".input-error")).to_contain_text(
        re.compile(r"You're sending messages faster than the tutor can keep up — you can send again in \d+ (s|min)\."))
    expect(page.locator("#message")).to_have_value("Why does my heart race before exams?")
    assert not any("heart race" in t for t in message_texts(page))  # not sent, not shown
    assert len(limited_model.requests) == asked  # and no model was asked
    # A reload keeps the refused message as this conversation's draft (nothing typed is lost).
    page.reload()
    expect(page.locator("#message")).to_have_value("Why does my heart race before exams?", timeout=15_000)
    assert not any("heart race" in t for t in message_texts(page))


def test_a_learner_waiting_for_a_model_slot_sees_their_place_in_line(
    limits_app: RunningApp, limited_model: ScriptedModel, page: Page, browser: Browser
) -> None:
    open_module(page, limits_app.url)
    limited_model.stream(json.dumps(reply(block("paragraph", LONG))), pieces=40, chunk_delay_s=0.25)  # ~10 s
    page.locator("#message").fill("Tell me everything about anxiety")
    page.locator("#message").press("Enter")
    expect(page.locator("#streaming-reply .growing")).to_contain_text("Anxiety is the body", timeout=10_000)

    # Another learner opens the module meanwhile: their tutor's opening turn waits in line.
    other_context = browser.new_context(viewport={"width": 1100, "height": 900})
    try:
        other = other_context.new_page()
        other.goto(limits_app.url + "/")
        other.locator(f"#open-{MODULE}").click()
        expect(other.locator("#typing")).to_contain_text(
            "Many learners are asking at once — you're next in line…", timeout=15_000)
        # Once the first learner's reply is done, theirs comes.
        expect(other.locator(".msg-tutor")).to_have_count(1, timeout=30_000)
        expect(other.locator("#typing")).to_have_count(0)
        expect(page.locator(".msg-tutor").last).to_contain_text("Anxiety is the body")
    finally:
        other_context.close()
