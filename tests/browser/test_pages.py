"""The start page (modules, progress, resume, start over) and a page that stays usable
while the tutor thinks."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.browser.conftest import RunningApp, ScriptedModel
from tests.browser.helpers import MODULE, block, message_texts, open_module, reply, send, wait_idle


def test_start_page_lists_modules_and_resumes_or_starts_over(app: RunningApp, page: Page) -> None:
    page.goto(app.url + "/")
    card = page.locator(f"#card-{MODULE}")
    expect(card.get_by_role("heading", level=2)).to_have_text("Understanding anxiety")
    expect(card.locator(".card-description")).to_contain_text("self-paced introduction")
    expect(card.locator(f"#topics-{MODULE}")).to_have_text("25 topics")
    expect(card.get_by_role("link", name="Start Understanding anxiety")).to_be_visible()
    expect(card.get_by_role("progressbar")).to_have_count(0)  # nothing started yet

    card.get_by_role("link", name="Start Understanding anxiety").click()
    page.locator(".msg-tutor").first.wait_for()
    wait_idle(page)
    send(page, "What is the fight or flight response?")
    before = message_texts(page)

    page.get_by_role("link", name="All modules").click()
    card = page.locator(f"#card-{MODULE}")
    # Two topics seen, none mastered yet: 2 of 50 units.
    expect(card.locator(".card-progress-text")).to_have_text("4% · 2 of 25 topics covered · 1 message sent")
    expect(card.get_by_role("progressbar", name="Your progress in Understanding anxiety")).to_have_attribute(
        "aria-valuenow", "4")
    card.get_by_role("link", name="Resume Understanding anxiety").click()
    page.locator(".msg-learner").first.wait_for()
    wait_idle(page)
    assert message_texts(page) == before  # resumed where we left off

    page.goto(app.url + "/")
    card = page.locator(f"#card-{MODULE}")
    card.get_by_role("button", name="Start over: Understanding anxiety").click()
    expect(card.locator(".confirm")).to_contain_text("goes back to 0%")
    card.get_by_role("button", name="Cancel").click()
    expect(card.get_by_role("button", name="Start over: Understanding anxiety")).to_be_focused()
    card.get_by_role("button", name="Start over: Understanding anxiety").click()
    card.get_by_role("button", name="Yes, start over").click()
    page.wait_for_url("**/learn?module=understanding_anxiety")
    page.locator(".msg-tutor").first.wait_for()
    wait_idle(page)
    assert len(message_texts(page)) == 1  # a fresh conversation: the opening lesson only
    expect(page.locator("#progress-count")).to_have_text("1 of 25 topics")


def test_the_page_stays_usable_while_the_tutor_thinks(
    model_app: RunningApp, model: ScriptedModel, page: Page
) -> None:
    open_module(page, model_app.url)
    model.reply(reply(block("paragraph", "First answer, after some thought.")), delay_s=4)
    box = page.locator("#message")
    box.fill("A slow question")
    box.press("Enter")
    expect(page.locator("#typing")).to_be_visible()
    expect(page.locator("#thinking-status")).to_have_text("The tutor is thinking.")
    expect(box).to_be_enabled()
    expect(box).to_be_focused()
    box.type("typing while it thinks")  # the box takes keys at once
    expect(box).to_have_value("typing while it thinks")
    box.press("Enter")  # and a second message goes through while the first is answered
    expect(page.locator(".msg-learner")).to_have_count(2)
    assert page.locator(".msg-tutor").count() == 1, "the second message waited for the first reply"
    expect(page.locator(".msg-learner").last).to_have_text("typing while it thinks")
    page.get_by_role("link", name="All modules").focus()  # other controls respond too
    expect(page.get_by_role("link", name="All modules")).to_be_focused()
    tutor = page.locator(".msg-tutor")
    expect(tutor.nth(1)).to_contain_text("First answer, after some thought.", timeout=15_000)
    # The message sent while the tutor was thinking gets its own reply, in order.
    expect(tutor).to_have_count(3, timeout=15_000)
    wait_idle(page)
    expect(page.locator("#thinking-status")).to_have_text("")
