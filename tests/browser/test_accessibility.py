"""Keyboard only, named controls, announced turns, focus after sending, WCAG AA contrast,
a 375 px wide screen, and axe-core's WCAG 2.2 AA rules on every kind of page content in
light and dark themes (the milestone and completion views: tests/browser/test_finish.py)."""

from __future__ import annotations

import colorsys
import re

from playwright.sync_api import Page, expect

from tests.browser.axe import axe_in_both_themes
from tests.browser.conftest import ARTIFACTS, RunningApp, ScriptedModel
from tests.browser.test_forms import EVERY_FIELD
from tests.browser.helpers import (
    MODULE,
    block,
    last_tutor,
    low_contrast_texts,
    open_module,
    reply,
    send,
    unlabelled_controls,
    wait_for_reply,
)


def _active(page: Page) -> dict:
    return page.evaluate(
        "() => { const e = document.activeElement;"
        " return {id: e.id, tag: e.tagName, type: e.type || '', cls: e.className || '', text: e.innerText || ''}; }")


def _tab_until(page: Page, test, *, back: bool = False, limit: int = 30) -> dict:
    for _ in range(limit):
        page.keyboard.press("Shift+Tab" if back else "Tab")
        active = _active(page)
        if test(active):
            return active
    raise AssertionError(f"never reached the control; focus is on {_active(page)}")


def test_a_learner_can_do_everything_with_the_keyboard(app: RunningApp, page: Page) -> None:
    page.goto(app.url + "/")
    page.locator(f"#open-{MODULE}").wait_for()
    _tab_until(page, lambda a: a["id"] == f"open-{MODULE}")
    page.keyboard.press("Enter")
    page.locator(".msg-tutor").first.wait_for()
    expect(page.locator("#message")).to_be_focused()  # ready to type at once
    page.keyboard.press("Enter")  # nothing typed: nothing happens, the focus stays in the box
    expect(page.locator(".msg-sending")).to_have_count(0)
    expect(page.locator("#message")).to_be_focused()
    expect(page.locator("#message")).to_have_attribute("aria-invalid", "false")

    tutors = page.locator(".msg-tutor").count()
    page.keyboard.type("What are the three levels of anxiety?")
    page.keyboard.press("Enter")
    wait_for_reply(page, tutors)
    expect(page.locator(".msg-learner").last).to_have_text("What are the three levels of anxiety?")
    expect(page.locator("#message")).to_be_focused()
    expect(page.locator("#message")).to_have_value("")
    expect(page.locator("#message")).to_have_attribute("aria-invalid", "false")

    # Back into the reply: its form, by keyboard alone.
    _tab_until(page, lambda a: a["type"] == "radio", back=True)
    page.keyboard.press("ArrowDown")  # moving in a radio group also chooses
    _tab_until(page, lambda a: a["type"] == "number")
    page.keyboard.type("4")
    tutors = page.locator(".msg-tutor").count()
    page.keyboard.press("Enter")  # submits the form the number is in
    wait_for_reply(page, tutors)
    expect(page.locator(".tutor-form").first).to_have_attribute("data-status", "submitted")
    expect(page.locator("#message")).to_be_focused()

    # A suggestion chip, by keyboard.
    chip = _tab_until(page, lambda a: "chip" in a["cls"], back=True)
    tutors = page.locator(".msg-tutor").count()
    page.keyboard.press("Enter")
    wait_for_reply(page, tutors)
    expect(page.locator(".msg-learner").last).to_have_text(chip["text"])

    # Before the header, a link skips straight to the message box.
    page.get_by_role("link", name="All modules").focus()
    page.keyboard.press("Shift+Tab")
    skip = page.get_by_role("link", name="Skip to the message box")
    expect(skip).to_be_focused()
    expect(skip).to_be_in_viewport()
    page.keyboard.press("Enter")
    expect(page.locator("#message")).to_be_focused()
    assert page.url.endswith("/learn?module=understanding_anxiety")


def test_controls_are_named_turns_are_announced_and_focus_returns(app: RunningApp, page: Page) -> None:
    page.goto(app.url + "/")
    page.locator(f"#open-{MODULE}").wait_for()
    assert unlabelled_controls(page) == []
    open_module(page, app.url)
    page.locator("#message").fill("What are the three levels of anxiety?")
    tutors = page.locator(".msg-tutor").count()
    page.locator("#send").click()  # by mouse this time
    wait_for_reply(page, tutors)
    expect(page.locator("#message")).to_be_focused()

    announcer = page.locator("#announcer")
    expect(announcer).to_have_attribute("aria-live", "polite")
    expect(announcer).to_contain_text("Tutor: Body, mind and behaviour Anxiety rarely appears in just one way.")
    assert unlabelled_controls(page) == []
    names = last_tutor(page).get_by_role("button").evaluate_all(
        "bs => bs.filter(b => !b.disabled).map(b => b.getAttribute('aria-label') || b.innerText)")
    assert len(names) == len(set(names)), f"two buttons share a name: {names}"

    page.get_by_role("button", name="Skip Quick reflection").click()
    expect(page.locator("#message")).to_be_focused()


def test_text_meets_wcag_aa_contrast_everywhere(model_app: RunningApp, model: ScriptedModel, page: Page) -> None:
    page.goto(model_app.url + "/")
    page.locator(f"#open-{MODULE}").wait_for()
    assert low_contrast_texts(page) == []
    form = {"id": "check", "title": "Check in", "description": "Only if you like.", "fields": [
        {"id": "mood", "type": "radio", "label": "Mood", "required": True, "help_text": "Pick one.",
         "options": [{"value": "ok", "label": "Fine"}]},
        {"id": "level", "type": "number", "label": "Level", "min": 0, "max": 10, "placeholder": "0-10"}]}
    model.reply(reply(
        *[block(kind, f"A {kind} block with a [link](https://example.org).")
          for kind in ("heading", "paragraph", "list", "quote", "info", "warning", "success", "tip")],
        forms=[form],
        media=[{"type": "image", "src": "/media/missing.png", "alt": "A lake", "caption": "Caption"}],
        next_step={"prompt": "What next?", "suggestions": ["More please", "An example"]},
        meta={"response_type": "educational", "emotion": "supportive"},
    ))
    open_module(page, model_app.url)
    page.locator(".tutor-form form").evaluate("f => { f.noValidate = true; }")
    page.get_by_label("Level").fill("11")
    page.get_by_role("button", name="Submit").click()
    expect(page.locator(".field-error:not(.empty)")).to_be_visible()
    model.raw("Plain words, not JSON.")
    model.raw("Plain words, not JSON.")
    send(page, "Carry on")  # earlier chips now disabled, a learner bubble, the plain-text notice
    expect(page.locator(".fallback-notice")).to_be_visible()
    assert low_contrast_texts(page) == []
    page.emulate_media(color_scheme="dark")
    expect(page.locator("html")).to_have_attribute("data-theme", "dark")
    assert low_contrast_texts(page) == []


def test_axe_finds_no_wcag_22_aa_violations_in_light_or_dark(
    model_app: RunningApp, model: ScriptedModel, page: Page
) -> None:
    page.goto(model_app.url + "/")
    page.locator(f"#open-{MODULE}").wait_for()
    assert axe_in_both_themes(page) == {}  # the start page

    model.reply(reply(  # every block type, media, suggestions and every form field type
        *[block("heading", f"Level {n} heading", level=n) for n in (1, 2, 3)],
        *[block(kind, f"A {kind} block with a [link](https://example.org).")
          for kind in ("paragraph", "list", "quote", "info", "warning", "success", "tip")],
        forms=[EVERY_FIELD],
        media=[{"type": "image", "src": "/media/understanding_anxiety/three_levels.svg", "alt": "Three levels",
                "caption": "Body, mind, behaviour"},
               {"type": "image", "src": "/media/missing.png", "alt": "A lake", "caption": "Caption"}],
        next_step={"prompt": "What next?", "suggestions": ["More please", "An example"]},
        meta={"response_type": "educational", "emotion": "supportive"},
    ))
    open_module(page, model_app.url)
    assert axe_in_both_themes(page) == {}
    for scheme in ("light", "dark"):  # the supportive tone is a calm teal, never an error's red
        page.emulate_media(color_scheme=scheme)
        expect(page.locator("html")).to_have_attribute("data-theme", scheme)
        rgb = last_tutor(page).evaluate("e => getComputedStyle(e).borderLeftColor")
        r, g, b = (int(x) / 255 for x in re.findall(r"\d+", rgb)[:3])
        assert 150 <= colorsys.rgb_to_hls(r, g, b)[0] * 360 <= 200, rgb

    form = last_tutor(page).locator("section.tutor-form")  # an inline error, then answered read-only
    form.locator("form").evaluate("f => { f.noValidate = true; }")
    form.get_by_role("button", name="Send my answers").click()
    expect(form.locator(".field-error:not(.empty)").first).to_be_visible()
    assert axe_in_both_themes(page) == {}

    text = ("## A heading\n\nSome **bold** words.\n\n> A quote.\n\n- one\n- two\n\n`code`\n")
    model.raw(text)
    model.raw(text)  # the fallback: plain markdown with its notice
    send(page, "Carry on")
    expect(page.locator(".fallback-notice")).to_be_visible()
    page.locator("#menu-toggle").click()  # the menu open, with the theme choice and Start over
    assert axe_in_both_themes(page) == {}


def test_the_chat_works_on_a_375_px_screen(app: RunningApp, phone: Page) -> None:
    phone.goto(app.url + "/")
    phone.locator(f"#open-{MODULE}").wait_for()
    assert phone.evaluate("document.documentElement.scrollWidth") <= 375
    open_module(phone, app.url)
    send(phone, "What are the three levels of anxiety?")
    assert phone.evaluate("document.documentElement.scrollWidth") <= 375, "the page scrolls sideways"
    widest = phone.locator("#messages *").evaluate_all(
        "es => Math.max(...es.map(e => e.getBoundingClientRect().right))")
    assert widest <= 375
    for control in ("#message", "#send"):
        box = phone.locator(control).bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= 375 and box["y"] + box["height"] <= 740
    phone.get_by_label("Mental (thoughts and worries)").tap()
    expect(phone.get_by_label("Mental (thoughts and worries)")).to_be_checked()
    ARTIFACTS.mkdir(exist_ok=True)
    phone.screenshot(path=str(ARTIFACTS / "chat-375px.png"))
