"""Text blocks as seed 002's table says, model markup inert, and the plain-text fallback."""

from __future__ import annotations

import colorsys
import re

from playwright.sync_api import Page, expect

from tests.browser.conftest import RunningApp, ScriptedModel
from tests.browser.helpers import block, last_tutor, open_module, reply, send

HOSTILE = '<script>window.__xss = 1</script> <img src=x onerror="window.__xss = 2"> [click me](javascript:window.__xss=3)'


def _hue(page: Page, selector: str) -> float:
    rgb = page.locator(selector).first.evaluate("e => getComputedStyle(e).backgroundColor")
    r, g, b = (int(x) / 255 for x in re.findall(r"\d+", rgb)[:3])
    return colorsys.rgb_to_hls(r, g, b)[0] * 360


def test_every_block_type_is_styled_as_the_seed_says(model_app: RunningApp, model: ScriptedModel, page: Page) -> None:
    model.reply(reply(
        *[block("heading", f"Level {n} heading", level=n) for n in range(1, 7)],
        block("paragraph", "A **bold** idea with a [guide](https://example.org/guide)."),
        block("list", "- body\n- mind\n- behaviour"),
        block("list", "1. first\n2. second"),
        block("quote", "A change at any one level can ripple through the other two."),
        block("info", "Blue: for your information."),
        block("warning", "Yellow: take care."),
        block("success", "Green: good news."),
        block("tip", "Purple: a helpful tip."),
        block("success", "**Worth knowing:** the brain keeps learning."),
        block("quote", "## Thoughts are guesses\nA thought feeling true doesn't make it true.\n\n"
                       "!!! tip Try noticing thoughts.\n\n- one\n- two"),
    ))
    open_module(page, model_app.url)
    msg = last_tutor(page)
    for n in range(1, 7):
        expect(msg.locator(f"h{n}.block-heading")).to_have_text(f"Level {n} heading")
    expect(msg.locator(".block-paragraph strong")).to_have_text("bold")
    expect(msg.locator(".block-list ul > li")).to_have_count(3)
    expect(msg.locator(".block-list ol > li")).to_have_count(2)
    expect(msg.locator("blockquote.block-quote").first).to_contain_text("ripple through")
    for kind, label in [("info", "Info"), ("warning", "Warning"), ("success", "Good news"), ("tip", "Tip")]:
        callout = msg.locator(f".block-{kind}").first
        expect(callout).to_have_attribute("role", "note")
        expect(callout.locator(".callout-label")).to_have_text(label)
    # a callout's own title is its label; green alone never says "Well done"
    titled = msg.locator(".block-success").nth(1)
    expect(titled.locator(".callout-label")).to_have_text("Worth knowing")
    expect(titled).to_have_attribute("aria-label", "Worth knowing")
    expect(titled.locator(".md")).to_have_text("the brain keeps learning.")
    expect(msg.locator(".callout-label", has_text="Well done")).to_have_count(0)
    # a quote of the author's material shows its heading, callout and list as written, inside the quote
    quoted = msg.locator("blockquote.block-quote").nth(1)
    expect(quoted.locator("h2")).to_have_text("Thoughts are guesses")
    expect(quoted.locator(".quote-tip[role=note] .callout-label")).to_have_text("Tip")
    expect(quoted.locator(".quote-tip")).to_contain_text("Try noticing thoughts.")
    expect(quoted.locator("li")).to_have_count(2)
    expect(quoted).not_to_contain_text("!!!")
    assert 250 <= _hue(page, "blockquote .quote-tip") <= 290  # the tip's colour inside the quote
    assert 195 <= _hue(page, ".block-info") <= 235  # blue
    assert 40 <= _hue(page, ".block-warning") <= 60  # yellow
    assert 110 <= _hue(page, ".block-success") <= 160  # green
    assert 250 <= _hue(page, ".block-tip") <= 290  # purple
    link = msg.locator("a", has_text="guide")
    expect(link).to_have_attribute("href", "https://example.org/guide")
    expect(link).to_have_attribute("target", "_blank")
    assert "noopener" in (link.get_attribute("rel") or "")


def test_hostile_markup_from_the_model_is_shown_as_text_and_stays_inert(
    model_app: RunningApp, model: ScriptedModel, page: Page
) -> None:
    def hostile(where: str) -> str:  # each text its own: the same text twice is a loop, never shown
        return f"{where} says: {HOSTILE}"

    form = {
        "id": "probe", "title": hostile("Title"), "description": hostile("Description"),
        "fields": [{"id": "answer", "type": "select", "label": hostile("Label"), "help_text": hostile("Help"),
                    "options": [{"value": "a", "label": hostile("Option")}]}],
    }
    model.reply(reply(
        *[block(kind, hostile(kind)) for kind in ("heading", "paragraph", "list", "quote", "warning")],
        forms=[form],
        media=[{"type": "image", "src": "/media/understanding_anxiety/three_levels.svg", "alt": hostile("Alt"),
                "caption": hostile("Caption")}],
        next_step={"prompt": hostile("Prompt"), "suggestions": [HOSTILE]},
    ))
    open_module(page, model_app.url)
    msg = last_tutor(page)
    expect(msg.locator(".block-paragraph")).to_contain_text("<script>window.__xss = 1</script>")
    expect(msg.locator(".form-title")).to_contain_text('onerror="window.__xss = 2"')
    expect(msg.locator(".chip")).to_have_text(HOSTILE)

    def assert_inert() -> None:
        page.wait_for_timeout(300)  # an injected handler would have run by now
        assert page.evaluate("window.__xss") is None
        assert page.locator("#messages script, #messages [onerror], #messages iframe").count() == 0
        hrefs = page.locator("#messages a[href]").evaluate_all("as => as.map(a => a.href)")
        assert all(not h.lower().startswith("javascript:") for h in hrefs), hrefs

    assert_inert()
    msg.locator(".chip").click()  # the suggestion comes back as the learner's words
    expect(page.locator(".msg-learner").last).to_have_text(HOSTILE)
    assert_inert()


def test_an_unreadable_reply_is_shown_as_sanitised_markdown_with_a_notice(
    model_app: RunningApp, model: ScriptedModel, page: Page
) -> None:
    open_module(page, model_app.url)
    text = ("Slow breathing **calms** the body.\n\n- in for four\n- out for six\n\n"
            "<script>window.__xss = 1</script> [x](javascript:window.__xss=2)")
    model.raw(text)
    model.raw(text)  # the re-ask gets the same: the app fails closed to plain text
    send(page, "Can you say that again?")
    msg = last_tutor(page)
    expect(msg.locator(".fallback-notice")).to_have_text(
        "The tutor's reply couldn't be read as a structured lesson, so it is shown as plain text.")
    body = msg.locator(".fallback-body")
    expect(body.locator("strong")).to_have_text("calms")
    expect(body.locator("li")).to_have_count(2)
    expect(body).to_contain_text("<script>window.__xss = 1</script>")
    assert body.locator("script, a[href]").count() == 0
    assert page.evaluate("window.__xss") is None
    expect(page.locator("#message")).to_be_enabled()
