"""Progress in view (bar, counts of topics seen and mastered, where we are), a check of
understanding answered and scored kindly, milestones celebrated (quietly for those who
asked for less motion), the tutor's tone shown subtly, and the next step's chips."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.browser.conftest import RunningApp
from tests.browser.helpers import (
    last_tutor,
    open_module,
    send,
    wait_for_reply,
    wait_until,
)
from tutor.content.modules import REPO_ROOT, load_library

SAMPLE = load_library(REPO_ROOT / "modules").get("understanding_anxiety")


def _counts(page: Page) -> tuple[int, int, int]:
    percent = int(page.locator("#progress-percent").inner_text().rstrip("%"))
    covered, total = map(int, re.findall(r"\d+", page.locator("#progress-count").inner_text()))
    return percent, covered, total


def test_progress_bar_counts_and_module_state(app: RunningApp, page: Page) -> None:
    open_module(page, app.url)
    percent, covered, total = _counts(page)
    # The opening lesson shows the first topic: seen, not mastered (1 of 50 units: 2%).
    assert (covered, total) == (1, 25) and percent == 2
    bar = page.get_by_role("progressbar", name="Module progress")
    expect(bar).to_have_attribute("aria-valuenow", "2")
    expect(bar).to_have_attribute("aria-valuetext", "2% of the module covered: 1 of 25 topics, 0 of 24 mastered")
    expect(page.locator("#progress-mastered")).to_have_text("0 of 24 mastered")
    expect(page.locator("#progress-remaining")).to_have_text("24 topics to go")
    expect(page.locator("#progress-sections")).to_have_text("sections done: 0 of 6")
    expect(page.locator("#module-state")).to_have_text("Foundations › What anxiety is")
    wait_until(page,  # the fill is 2% of the bar, once its transition ends
        "() => { const f = document.querySelector('#progress-bar .bar-fill');"
        " return Math.abs(f.offsetWidth / f.parentElement.offsetWidth - 0.02) < 0.005; }")

    send(page, "What is the fight or flight response?")
    percent, covered, _ = _counts(page)
    assert covered == 2 and percent == 4
    expect(page.locator("#progress-remaining")).to_have_text("23 topics to go")  # "to go" counts topics not seen, as "2 of 25 topics" does
    send(page, "How does slow breathing calm my body down?")  # a jump ahead: the "where" line follows it
    expect(page.locator("#module-state")).to_have_text("Skills › Calming the body")
    page.reload()
    expect(page.locator("#module-state")).to_have_text("Skills › Calming the body", timeout=15_000)


def _answer_in_the_form(page: Page, text: str) -> None:
    form = last_tutor(page).locator("form").last
    form.get_by_role("textbox").fill(text)
    tutors = page.locator(".msg-tutor").count()
    form.get_by_role("button", name="Check my answer").click()
    wait_for_reply(page, tutors)


def test_a_check_is_answered_scored_kindly_and_counted_as_mastered(app: RunningApp, page: Page) -> None:
    open_module(page, app.url)
    check = SAMPLE.topics[0].checks[0]
    send(page, "Continue")  # after the lesson, its check
    asked = last_tutor(page)
    expect(asked).to_contain_text("let's check what stayed with you from What anxiety is")
    form = asked.get_by_role("form", name="Check your understanding")
    expect(form.get_by_role("textbox", name=check.question)).to_be_visible()
    # One way past it (the quick reply), the instructions once, no "Optional" beside "required".
    expect(asked.get_by_role("button", name=re.compile(r"^Skip"))).to_have_count(1)
    expect(asked.get_by_text(re.compile("sentence or two"))).to_have_count(1)
    expect(asked.locator(".form-optional, .form-note")).to_have_count(0)

    _answer_in_the_form(page, "It is a feeling.")
    tip = last_tutor(page).locator(".block-tip").first
    expect(tip).to_contain_text("You scored")
    expect(tip).to_contain_text("(7 or more masters it)")
    expect(tip).to_contain_text("another go")
    expect(tip).to_have_attribute("role", "note")
    expect(last_tutor(page).get_by_role("form", name="Try again")).to_be_visible()  # the check stays open
    expect(page.locator("#progress-mastered")).to_have_text("0 of 24 mastered")

    send(page, check.example_answer)  # typed in the message box, right after the question
    success = last_tutor(page).locator(".block-success").first
    expect(success).to_contain_text("You scored 10/10 on What anxiety is: mastered.")
    expect(page.locator("#progress-mastered")).to_have_text("1 of 24 mastered")
    # The check typed into the message box reads answered, with its score, where it was asked.
    expect(page.locator(".form-answered-in-chat")).to_have_text(["Answered in the chat: 10/10."])
    expect(page.locator(".form-skipped")).to_have_count(0)
    percent, covered, _ = _counts(page)
    assert (percent, covered) == (6, 2)  # mastered (2 units) and the next lesson seen (1 unit)
    expect(page.locator("#progress-remaining")).to_have_text("23 topics to go")
    page.reload()
    expect(page.locator(".form-answered-in-chat")).to_have_text(["Answered in the chat: 10/10."], timeout=15_000)


def test_a_milestone_is_celebrated_once_and_quietly_for_reduced_motion(app: RunningApp, page: Page) -> None:
    open_module(page, app.url)
    for topic in SAMPLE.topics[:5]:  # a check answered well: mastered, and the next lesson
        send(page, "Continue")
        send(page, topic.checks[0].example_answer)
        expect(page.locator("#milestone")).to_have_count(0)
    send(page, "Continue")
    send(page, SAMPLE.topics[5].checks[0].example_answer)  # 6 mastered + 1 seen: 13 of 50 units, 26%
    banner = page.locator("#milestone")
    expect(banner).to_contain_text("Milestone reached: 25% of the module")
    msg = last_tutor(page)
    expect(msg.locator(".block-success")).to_have_count(1)  # the judged answer's; the milestone is the banner
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
    expect(last_tutor(page).locator(".block-success")).to_have_count(0)


def test_tone_is_shown_by_accent_and_icon_and_chips_send_their_text(app: RunningApp, page: Page) -> None:
    open_module(page, app.url)
    opening = page.locator(".msg-tutor").first
    expect(opening).to_have_attribute("data-emotion", "encouraging")
    # The icon is decorative: no English jargon ("Tone: encouraging") in a tooltip.
    assert opening.locator(".avatar").get_attribute("title") is None
    assert opening.locator(".avatar").get_attribute("aria-hidden") == "true"
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
