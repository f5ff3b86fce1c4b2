"""Layout and the ending, as a learner meets them: the newest message stays in view while the
tutor is slow, the focus is never hidden under the sticky header or composer, a phone's
header is one line, dark mode (the system's, or the learner's remembered choice), a
fallback that reads like a lesson, and a real ending: the completion view at 100%, the home
card's "Completed", and "Start over" from the chat's menu (Escape closes the confirmation)."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.browser.axe import axe_in_both_themes
from tests.browser.conftest import AppPool, RunningApp, ScriptedModel
from tests.browser.helpers import MODULE, block, last_tutor, low_contrast_texts, open_module, reply, send, wait_idle

# Two tiny modules, so the built-in tutor walks one to 100% in two turns and offers the other.
_MODULE_YAML = """\
id: {id}
title: {title}
description: Two short topics.
language: en
mode: threaded
milestones: [50, 100]
instructions: |
  Teach one topic at a time.
phases:
  - id: basics
    title: Basics
    sections:
      - id: basics_section
        title: The basics
        topics:
          - id: {id}_one
            title: {one}
            keywords: [{one_kw}]
            content: |
              The first idea, in a sentence.
          - id: {id}_two
            title: {two}
            keywords: [{two_kw}]
            content: |
              The second idea, in a sentence.
"""
FIRST, OTHER = "breathing_basics", "sleep_basics"


@pytest.fixture(scope="session")
def finish_modules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("finish-modules")
    (folder / f"{FIRST}.yaml").write_text(_MODULE_YAML.format(
        id=FIRST, title="Breathing basics", one="Slow breathing", one_kw="slow breathing",
        two="Box breathing", two_kw="box breathing"))
    (folder / f"{OTHER}.yaml").write_text(_MODULE_YAML.format(
        id=OTHER, title="Sleep basics", one="Winding down", one_kw="winding down",
        two="Regular hours", two_kw="regular hours"))
    return folder


@pytest.fixture
def finish_app(apps: AppPool, finish_modules: Path) -> RunningApp:
    """The built-in tutor over the two tiny modules."""
    return apps.use("finish", TUTOR_MODULES_DIR=str(finish_modules))


def _clear_of_bars(page: Page, selector: str | None = None) -> dict:
    """Where an element (the last match of `selector`, or the focused one) is against the
    sticky header and composer."""
    return page.evaluate(
        """(sel) => {
          const el = sel ? [...document.querySelectorAll(sel)].pop() : document.activeElement;
          const r = el.getBoundingClientRect();
          const head = document.querySelector('.chat-header').getBoundingClientRect().bottom;
          const foot = document.querySelector('.chat-footer').getBoundingClientRect().top;
          const inBar = !!el.closest('.chat-header, .chat-footer');  // the sticky parts' own controls
          return {top: r.top, bottom: r.bottom, head, foot, ok: inBar || (r.top >= head - 1 && r.bottom <= foot + 1),
                  what: el.id || el.getAttribute('aria-label') || el.className};
        }""",
        selector,
    )


def _until(page: Page, condition: str, timeout_s: float = 10) -> None:
    """Poll a JavaScript condition (page.evaluate: fine under the app's CSP, unlike
    wait_for_function's string predicates)."""
    for _ in range(int(timeout_s * 10)):
        if page.evaluate(condition):
            return
        page.wait_for_timeout(100)
    raise AssertionError(f"never true: {condition}")


# ---------------------------------------------------------------- the built-in app


def test_a_phone_header_is_one_line_that_opens_on_tap(app: RunningApp, phone: Page) -> None:
    open_module(phone, app.url)
    header = phone.locator(".chat-header")
    footer = phone.locator(".chat-footer")
    head_h, foot_h = header.bounding_box()["height"], footer.bounding_box()["height"]
    assert head_h <= 64, f"the header takes {head_h}px of 740"
    assert foot_h <= 72, f"the composer takes {foot_h}px of 740"
    assert (head_h + foot_h) / 740 < 0.2
    expect(phone.locator("#progress-details")).to_be_hidden()
    toggle = phone.locator("#progress-toggle")
    line = [phone.locator(sel).bounding_box() for sel in (".back", ".module-title", "#progress-toggle", "#menu-toggle")]
    assert all(abs(box["y"] + box["height"] / 2 - line[0]["y"] - line[0]["height"] / 2) < 12 for box in line), line  # one line
    assert all(a["x"] + a["width"] <= b["x"] + 1 for a, b in zip(line, line[1:])), line  # side by side, not on top
    expect(toggle).to_have_attribute("aria-expanded", "false")

    toggle.tap()
    expect(phone.locator("#progress-details")).to_be_visible()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    expect(phone.locator("#progress-count")).to_be_visible()
    expect(phone.locator("#progress-percent")).to_be_hidden()  # the toggle says it: not twice
    toggle.tap()
    expect(phone.locator("#progress-details")).to_be_hidden()

    # The placeholder is short enough for one line of the box.
    box = phone.locator("#message")
    fits = box.evaluate("""(b) => {
        const cs = getComputedStyle(b);
        const ctx = document.createElement('canvas').getContext('2d');
        ctx.font = `${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
        const room = b.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
        return {text: b.placeholder, width: ctx.measureText(b.placeholder).width, room};
    }""")
    assert fits["width"] <= fits["room"], fits
    assert fits["text"] == "Type your message"
    assert phone.evaluate("document.documentElement.scrollWidth") <= 375


def test_dark_mode_follows_the_system_and_a_choice_is_remembered(app: RunningApp, page: Page) -> None:
    # The served page sets the theme in <head>, before anything is painted.
    with urllib.request.urlopen(app.url + "/", timeout=10) as response:
        html = response.read().decode()
    head = html.split("<body", 1)[0]
    assert "tutor-theme" in head and "data-theme" in head

    page.emulate_media(color_scheme="dark")
    page.goto(app.url + "/")
    page.locator(f"#open-{MODULE}").wait_for()
    root = page.locator("html")
    expect(root).to_have_attribute("data-theme", "dark")
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert sum(int(x) for x in re.findall(r"\d+", background)[:3]) < 120, background  # dark
    assert low_contrast_texts(page) == []
    select = page.locator("#home-theme")
    expect(select).to_have_value("system")

    select.select_option("light")
    expect(root).to_have_attribute("data-theme", "light")
    page.reload()
    page.locator(f"#open-{MODULE}").wait_for()
    expect(root).to_have_attribute("data-theme", "light")  # remembered, despite a dark system
    expect(page.locator("#home-theme")).to_have_value("light")

    open_module(page, app.url)
    expect(root).to_have_attribute("data-theme", "light")
    page.locator("#menu-toggle").click()
    chat_select = page.locator("#chat-theme")
    expect(chat_select).to_have_value("light")
    chat_select.select_option("dark")
    expect(root).to_have_attribute("data-theme", "dark")
    page.emulate_media(color_scheme="light")
    page.reload()
    page.locator(".msg-tutor").first.wait_for()
    expect(root).to_have_attribute("data-theme", "dark")  # the learner's choice wins over the system
    assert low_contrast_texts(page) == []

    page.locator("#menu-toggle").click()
    page.locator("#chat-theme").select_option("system")
    expect(root).to_have_attribute("data-theme", "light")
    page.emulate_media(color_scheme="dark")
    expect(root).to_have_attribute("data-theme", "dark")  # follows the system live


# ---------------------------------------------------------------- the scripted model


def test_the_newest_message_and_the_typing_indicator_stay_in_view_while_the_tutor_is_slow(
    model_app: RunningApp, model: ScriptedModel, page: Page
) -> None:
    page.set_viewport_size({"width": 1100, "height": 700})
    long = reply(*[block("paragraph", f"Paragraph {n}: " + " ".join(f"a calm sentence, number {k}, to read." for k in range(12))) for n in range(14)])
    model.reply(long)
    open_module(page, model_app.url)
    model.reply(reply(block("paragraph", "A slow but short answer.")), delay_s=4)
    tutors = page.locator(".msg-tutor").count()
    page.locator("#message").fill("Could you say more?")
    page.locator("#message").press("Enter")
    page.locator("#typing").wait_for()
    page.wait_for_timeout(400)
    mine = _clear_of_bars(page, ".msg-learner")
    assert mine["ok"], f"the learner's message is hidden: {mine}"
    typing = _clear_of_bars(page, "#typing")
    assert typing["ok"], f"the typing indicator is hidden: {typing}"
    expect(page.locator(".msg-tutor")).to_have_count(tutors + 1, timeout=30_000)
    wait_idle(page)
    expect(last_tutor(page)).to_be_in_viewport()

    # Reading further up: a new message does not pull the page away; a button offers it.
    model.reply(reply(block("paragraph", "Another slow answer.")), delay_s=3)
    tutors = page.locator(".msg-tutor").count()
    page.locator("#message").fill("And then?")
    page.locator("#message").press("Enter")
    page.locator("#typing").wait_for()
    page.mouse.move(500, 350)
    page.mouse.wheel(0, -6000)
    _until(page, "window.scrollY < 50")
    expect(page.locator(".msg-tutor")).to_have_count(tutors + 1, timeout=30_000)
    wait_idle(page)
    button = page.get_by_role("button", name="New message")
    expect(button).to_be_visible()
    assert page.evaluate("window.scrollY") < 50
    button.click()
    expect(button).to_be_hidden()
    expect(last_tutor(page)).to_be_in_viewport()
    assert _clear_of_bars(page, ".msg-tutor")["bottom"] <= _clear_of_bars(page, "#chat-end")["foot"] + 1


def test_tabbing_through_a_long_form_never_hides_the_focus_under_the_sticky_parts(
    model_app: RunningApp, model: ScriptedModel, page: Page
) -> None:
    page.set_viewport_size({"width": 1000, "height": 600})
    options = [{"value": f"o{n}", "label": f"Option number {n}"} for n in range(17)]
    form = {"id": "long", "title": "A long list", "fields": [
        {"id": "many", "type": "checkbox", "label": "Tick any", "options": options},
        {"id": "note", "type": "text", "label": "Anything else?"}]}
    model.reply(reply(block("paragraph", "Have a look at these."), forms=[form]))
    open_module(page, model_app.url)
    page.locator("#message").focus()
    hidden = []
    boxes = page.locator(".tutor-form input[type=checkbox]").count()
    assert boxes == 17
    for _ in range(boxes + 3):  # up through the form, toward the sticky header
        page.keyboard.press("Shift+Tab")
        where = _clear_of_bars(page)
        if not where["ok"]:
            hidden.append(("up", where))
    for _ in range(boxes + 3):  # and down again, toward the composer
        page.keyboard.press("Tab")
        where = _clear_of_bars(page)
        if not where["ok"]:
            hidden.append(("down", where))
    assert hidden == []


def test_the_plain_text_fallback_reads_like_a_lesson(model_app: RunningApp, model: ScriptedModel, page: Page) -> None:
    open_module(page, model_app.url)
    text = ("## Calming the body\n\nSlow breathing **calms** the body.\n\nIt takes practice.\n\n"
            "> Breathe out longer than you breathe in.\n\nTry `4-6` breathing:\n\n```\nin 4, out 6\n```\n")
    model.raw(text)
    model.raw(text)
    send(page, "Tell me about breathing")
    body = last_tutor(page).locator(".fallback-body")
    style = body.evaluate("""(b) => {
        const cs = (sel) => getComputedStyle(b.querySelector(sel));
        return {body: parseFloat(getComputedStyle(b).fontSize), h2: parseFloat(cs('h2').fontSize),
                pGap: parseFloat(cs('p').marginBottom), quoteBorder: parseFloat(cs('blockquote').borderLeftWidth),
                quoteBg: cs('blockquote').backgroundColor, surface: getComputedStyle(b.closest('.msg')).backgroundColor,
                codeBg: cs('code').backgroundColor, preBg: cs('pre').backgroundColor};
    }""")
    assert style["h2"] >= style["body"] * 1.2, style
    assert style["pGap"] >= 8, style
    assert style["quoteBorder"] >= 3 and style["quoteBg"] != style["surface"], style
    assert style["codeBg"] != "rgba(0, 0, 0, 0)" and style["preBg"] != style["surface"], style
    assert axe_in_both_themes(page) == {}


# ---------------------------------------------------------------- the ending


def _reach_the_end(page: Page, url: str) -> None:
    open_module(page, url, FIRST)
    expect(page.locator("#milestone")).to_contain_text("50%")
    send(page, "Continue")
    expect(page.locator("#progress-percent")).to_have_text("100%")


def test_reaching_100_percent_shows_the_ending_and_the_home_card_says_completed(
    finish_app: RunningApp, page: Page
) -> None:
    open_module(page, finish_app.url, FIRST)
    banner = page.locator("#milestone")
    expect(banner).to_contain_text("50%")
    expect(banner.locator("svg")).to_have_count(2)  # the celebration's icon and the dismiss icon: no emoji
    assert "🎉" not in page.locator("#messages").inner_text()
    expect(last_tutor(page)).to_contain_text("You've reached 50% of Breathing basics")
    expect(last_tutor(page).locator(".block-success")).to_have_count(0)  # the banner is the celebration
    assert axe_in_both_themes(page) == {}  # the milestone view

    send(page, "Continue")
    completion = page.locator("#completion")
    expect(completion).to_be_visible()
    expect(completion.get_by_role("heading", level=2)).to_contain_text("Module complete: Breathing basics")
    expect(page.locator("#completion-covered li")).to_have_text(["Slow breathing", "Box breathing"])
    expect(page.locator("#completion-next").get_by_role("link", name="Sleep basics")).to_have_attribute(
        "href", f"/learn?module={OTHER}")
    expect(banner).to_have_count(0)  # one celebration: the ending replaces the banner
    expect(last_tutor(page).locator(".block-success")).to_have_count(0)
    assert axe_in_both_themes(page) == {}  # the completion view

    page.reload()  # the ending stays with the conversation
    expect(page.locator("#completion")).to_be_visible()

    page.goto(finish_app.url + "/")
    card = page.locator(f"#card-{FIRST}")
    expect(card.locator(f"#completed-{FIRST}")).to_have_text("Completed")
    expect(card.get_by_role("link", name="Review Breathing basics")).to_be_visible()
    expect(card.get_by_role("button", name="Start over: Breathing basics")).to_be_visible()
    expect(page.locator(f"#card-{OTHER}").get_by_role("link", name="Start Sleep basics")).to_be_visible()
    card.get_by_role("link", name="Review Breathing basics").click()
    expect(page.locator("#completion")).to_be_visible()


def test_start_over_from_the_chat_menu_and_escape_closes_the_confirmation(
    finish_app: RunningApp, page: Page
) -> None:
    _reach_the_end(page, finish_app.url)
    expect(page.locator("#completion")).to_be_visible()
    page.locator("#menu-toggle").click()
    ask = page.get_by_role("button", name="Start over")
    ask.click()
    confirm = page.get_by_role("button", name="Yes, start over")
    expect(confirm).to_be_focused()
    page.keyboard.press("Escape")
    expect(confirm).to_have_count(0)
    expect(page.locator("#menu-restart")).to_be_focused()  # the focus goes back to the button that asked
    expect(page.locator("#completion")).to_be_visible()  # nothing was lost

    page.locator("#menu-restart").click()
    page.get_by_role("button", name="Yes, start over").click()
    expect(page.locator("#completion")).to_have_count(0)
    page.locator(".msg-tutor").first.wait_for()
    wait_idle(page)
    expect(page.locator(".msg-learner")).to_have_count(0)  # a new conversation
    expect(page.locator(".msg-tutor")).to_have_count(1)
    expect(page.locator("#progress-percent")).to_have_text("50%")  # the opening lesson only

    # On the start page, Escape closes its confirmation too.
    page.goto(finish_app.url + "/")
    page.get_by_role("button", name="Start over: Breathing basics").click()
    expect(page.get_by_role("button", name="Yes, start over")).to_be_focused()
    page.keyboard.press("Escape")
    expect(page.get_by_role("button", name="Yes, start over")).to_have_count(0)
    expect(page.locator(f"#restart-{FIRST}")).to_be_focused()
