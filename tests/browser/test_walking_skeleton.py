"""A learner chats with the built-in tutor in a real browser and finds it all again."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.browser.conftest import RunningApp
from tests.browser.helpers import message_texts, open_module, send, wait_idle, wait_until


def test_chat_suggestion_reload_and_restart(app: RunningApp, page: Page) -> None:
    open_module(page, app.url)
    opening = page.locator(".msg-tutor").first
    expect(opening.locator(".block-heading").first).to_be_visible()

    send(page, "What is the fight or flight response?")
    learner = page.locator(".msg-learner").last
    expect(learner).to_contain_text("fight or flight")
    reply = page.locator(".msg-tutor").last
    expect(reply).to_contain_text("adrenaline")
    expect(page.locator("#message")).to_be_enabled()
    expect(page.locator("#message")).to_have_value("")

    chip = page.locator(".msg-tutor").last.locator(".chip:not([disabled])").first
    chip_text = chip.inner_text().strip()
    tutor_count = page.locator(".msg-tutor").count()
    chip.click()
    wait_until(page, f"document.querySelectorAll('.msg-tutor').length > {tutor_count}")
    wait_idle(page)
    expect(page.locator(".msg-learner").last).to_have_text(chip_text)
    # Suggestions of older turns can no longer be clicked.
    expect(page.locator(".msg-tutor").first.locator(".chip").first).to_be_disabled()

    before = message_texts(page)
    assert len(before) == 5  # opening, question, answer, suggestion, answer

    page.reload()
    page.locator(".msg-tutor").first.wait_for()
    wait_idle(page)
    assert message_texts(page) == before

    app.restart()
    page.reload()
    page.locator(".msg-tutor").first.wait_for()
    wait_idle(page)
    assert message_texts(page) == before
    expect(page.locator("#progress-count")).not_to_have_text("0 of 25 topics")
