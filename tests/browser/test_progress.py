"""Progress in view (bar, counts, where we are), milestones celebrated (quietly for those
who asked for less motion), the tutor's tone shown subtly, and the next step's chips."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.browser.conftest import RunningApp
from tests.browser.helpers import last_tutor, open_module, send


def _counts(page: Page) -> tuple[int, int, int]:
    percent = int(page.locator("#progress-percent").inner_text().rstrip("%"))
    covered, total = map(int, re.findall(r"\d+", page.locator("#progress-count").inner_text()))
    return percent, covered, total


def test_progress_bar_counts_and_module_state(app: RunningApp, page: Page) -> None:
    open_module(page, app.url)
    percent, covered, total = _counts(page)
    assert (covered, total) == (1, 25) and percent == 4  # the opening lesson covers the first topic
    bar = page.get_by_role("progressbar", name="Module progress")
    expect(bar).to_have_attribute("aria-valuenow", "4")
    expect(bar).to_have_attribute("aria-valuetext", "4% of the module covered: 1 of 25 topics")
    expect(page.locator("#progress-remaining")).to_have_text("24 to go")
    expect(page.locator("#progress-sections")).to_have_text("sections done: 0 of 6")
    expect(page.locator("#module-state")).to_have_text("Foundations › What anxiety is")
    page.wait_for_function(  # the fill is 4% of the bar, once its transition ends
        "() => { const f = document.querySelector('#progress-bar .bar-fill');"
        " return Math.abs(f.offsetWidth / f.parentElement.offsetWidth - 0.04) < 0.005; }")

    send(page, "What is the fight or flight response?")
    percent, covered, _ = _counts(page)
    assert covered == 2 and percent == 8
    expect(page.locator("#progress-remaining")).to_have_text("23 to go")


def test_a_milestone_is_celebrated_once_and_quietly_for_reduced_motion(app: RunningApp, page: Page) -> None:
    open_module(page, app.url)
    for _ in range(5):
        send(page, "Continue")
        expect(page.locator("#milestone")).to_have_count(0)
    send(page, "Continue")  # the 7th topic of 25: 28%
    banner = page.locator("#milestone")
    expect(banner).to_contain_text("Milestone reached: 25% of the module")
    msg = last_tutor(page)
    expect(msg.locator(".milestone-badge")).to_have_text("Milestone: 25%")
    expect(msg).to_have_attribute("data-emotion", "celebratory")
    assert banner.evaluate("e => getComputedStyle(e).animationName") == "pop"

    page.emulate_media(reduced_motion="reduce")
    assert banner.evaluate("e => getComputedStyle(e).animationName") == "none"
    icon = banner.locator(".milestone-icon")
    assert icon.evaluate("e => getComputedStyle(e).animationName") == "none"
    fill = page.locator("#progress-bar .bar-fill")
    assert fill.evaluate("e => getComputedStyle(e).transitionDuration") == "0s"

    page.get_by_role("button", name="Dismiss the milestone message").click()
    expect(banner).to_have_count(0)
    expect(page.locator("#message")).to_be_focused()
    send(page, "Continue")  # the next turn does not celebrate again
    expect(page.locator("#milestone")).to_have_count(0)
    expect(last_tutor(page).locator(".milestone-badge")).to_have_count(0)


def test_tone_is_shown_by_accent_and_icon_and_chips_send_their_text(app: RunningApp, page: Page) -> None:
    open_module(page, app.url)
    opening = page.locator(".msg-tutor").first
    expect(opening).to_have_attribute("data-emotion", "encouraging")
    expect(opening.locator(".avatar")).to_have_attribute("title", "Tone: encouraging")
    send(page, "What is the fight or flight response?")
    answer = page.locator(".msg-tutor").nth(1)
    expect(answer).to_have_attribute("data-emotion", "informative")
    stripe = "e => getComputedStyle(e).borderLeftColor"
    assert opening.evaluate(stripe) != answer.evaluate(stripe)
    assert answer.locator(".avatar svg").get_attribute("aria-hidden") == "true"

    expect(answer.locator(".next-prompt")).to_contain_text("Ask me anything about")
    chips = answer.get_by_role("group", name="Suggested replies").get_by_role("button")
    first = chips.first.inner_text()
    chips.first.click()
    expect(page.locator(".msg-learner").last).to_have_text(first)
    expect(answer.get_by_role("group", name="Earlier suggestions").get_by_role("button").first).to_be_disabled()
