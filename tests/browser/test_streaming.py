"""A reply appears while the model writes it; Stop ends it and keeps what arrived."""

from __future__ import annotations

import json
import re
import time

from playwright.sync_api import Page, expect

from tests.browser.conftest import RunningApp, ScriptedModel
from tests.browser.helpers import Network, block, db_rows, open_module, reply, send, wait_idle, wait_until

LONG = "Anxiety is the body's alarm system: it prepares you to act. "


def prose(n: int) -> str:
    """`n` sentences that do not repeat themselves (a looping reply is not shown as a lesson)."""
    return LONG + " ".join(f"Point {k}: the alarm rings, the body answers, and the feeling passes in time."
                           for k in range(2, n + 1)) + " "


def _send_only(page: Page, text: str) -> None:
    page.locator("#message").fill(text)
    page.locator("#message").press("Enter")


def _long_reply_under_way(model: ScriptedModel, page: Page, seconds: int):
    """A reply of `seconds` points written over as many seconds, its first points on the
    page: the growing block's locator."""
    model.stream(json.dumps(reply(block("paragraph", prose(seconds)))), pieces=10 * seconds, chunk_delay_s=0.1)
    _send_only(page, "Tell me everything about anxiety")
    growing = page.locator("#streaming-reply .growing")
    expect(growing).to_contain_text("Point 2:", timeout=10_000)
    return growing


def test_blocks_appear_while_the_reply_is_written_then_the_stored_reply_replaces_them(
    model_app: RunningApp, model: ScriptedModel, page: Page
) -> None:
    open_module(page, model_app.url)
    final = reply(block("heading", "The alarm", level=2), block("paragraph", prose(4)),
                  block("tip", "Breathe out slowly."), next_step={"suggestions": ["Tell me more"]})
    model.stream(json.dumps(final), pieces=40, chunk_delay_s=0.1)  # about 4 s in all
    tutor_before = page.locator(".msg-tutor").count()
    started = time.monotonic()
    _send_only(page, "Why does my heart race?")
    streaming = page.locator("#streaming-reply")
    expect(streaming.locator(".block-heading")).to_have_text("The alarm", timeout=10_000)
    first_block = time.monotonic() - started
    # the heading shows while the paragraph is still being written: no stored reply yet
    assert page.locator(".msg-tutor").count() == tutor_before
    expect(streaming.locator(".growing")).to_contain_text("Anxiety is the body")
    expect(page.locator("#stop")).to_be_visible()
    expect(page.locator("#message")).to_be_enabled()
    wait_idle(page)
    total = time.monotonic() - started
    assert first_block < total / 2
    expect(streaming).to_have_count(0)
    last = page.locator(".msg-tutor").last
    expect(last.locator(".block-heading")).to_have_text("The alarm")
    expect(last.locator(".block-tip")).to_contain_text("Breathe out slowly.")
    expect(last.locator(".chip")).to_have_text(["Tell me more"])
    expect(page.locator("#stop")).to_have_count(0)


def test_stop_keeps_what_arrived_and_the_learner_carries_on(
    model_app: RunningApp, model: ScriptedModel, page: Page
) -> None:
    open_module(page, model_app.url)
    model.stream(json.dumps(reply(block("paragraph", prose(12)))), pieces=80, chunk_delay_s=0.2)  # 16 s
    _send_only(page, "Tell me everything about anxiety")
    expect(page.locator("#streaming-reply .growing")).to_contain_text("Anxiety is the body", timeout=10_000)
    # What the learner has seen when they press Stop is kept (how much that is depends on
    # the machine's pace: the last word on screen may still have been growing).
    seen = " ".join(page.locator("#streaming-reply .growing").inner_text().split()[:-1])
    clicked = time.monotonic()
    page.locator("#stop").click()
    wait_idle(page)
    assert time.monotonic() - clicked < 5
    kept = page.locator(".msg-tutor").last
    expect(kept).to_contain_text("Anxiety is the body")
    assert seen in " ".join(kept.inner_text().split())
    shown = " ".join(kept.inner_text().split())
    assert len(shown) < len(prose(12))  # only what arrived
    expect(kept.locator(".cut-note")).to_have_text("Stopped — this is what had arrived.")  # said, not guessed
    expect(kept.locator(".chip")).to_have_text(["Continue"])  # and a way on
    rows = db_rows(model_app.db_path, "SELECT flags_json FROM message WHERE role='tutor' ORDER BY id DESC LIMIT 1")
    assert "stopped" in json.loads(rows[0][0])
    # the conversation goes on
    model.reply(reply(block("paragraph", "Happy to go on.")))
    send(page, "Go on, more briefly")
    expect(page.locator(".msg-tutor").last).to_contain_text("Happy to go on.")


def test_the_next_person_in_the_tab_gets_none_of_a_reply_still_being_written(
    model_app: RunningApp, model: ScriptedModel, page: Page
) -> None:
    # After its first update, the preview is sent without entering the tab's state
    # (tutor.web.preview_frames): each update must still check whose the tab is now.
    frames: list[str] = []
    page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: frames.append(str(payload))))
    open_module(page, model_app.url)
    key = page.evaluate("localStorage.getItem('tutor_learner')")
    _long_reply_under_way(model, page, 20)
    page.get_by_role("button", name="Not you? Start fresh").click()
    page.get_by_role("button", name="Yes, start fresh").click()
    wait_until(page, f"localStorage.getItem('tutor_learner') && localStorage.getItem('tutor_learner') !== {key!r}")
    expect(page.locator("#streaming-reply")).to_have_count(0)
    changed_hands = len(frames)
    stored = "SELECT count(*) FROM message WHERE role='tutor' AND (text || coalesce(raw, '')) LIKE '%Point 20:%'"
    assert db_rows(model_app.db_path, stored) == [(0,)]  # the first learner's reply goes on being written
    deadline = time.monotonic() + 40
    while db_rows(model_app.db_path, stored) == [(0,)] and time.monotonic() < deadline:
        page.wait_for_timeout(250)
    assert db_rows(model_app.db_path, stored) == [(1,)]
    assert not any("the alarm rings" in frame for frame in frames[changed_hands:])
    expect(page.locator("#streaming-reply")).to_have_count(0)


def test_a_page_that_reconnects_while_the_reply_is_written_shows_it_again_from_the_start(
    model_app: RunningApp, model: ScriptedModel, page: Page
) -> None:
    # A dropped connection: the page loads its view again (the preview is emptied); the
    # reply still being written comes back whole, not as "Thinking…" until it is stored.
    network = Network(page)
    open_module(page, model_app.url)
    # 30 s: the reconnect (the page's backoff, a busy machine) comes well before the end
    growing = _long_reply_under_way(model, page, 30)
    network.go_offline()
    expect(page.locator("#connection-lost")).to_be_visible(timeout=10_000)
    network.go_online()
    expect(page.locator("#connection-lost")).to_have_count(0, timeout=10_000)
    expect(growing).to_contain_text("Point 9:", timeout=15_000)
    assert " ".join(growing.inner_text().split()).startswith("Anxiety is the body's alarm system")
    assert page.locator(".msg-tutor").last.inner_text().count("Point 9:") == 0  # not stored yet
    wait_idle(page)
    expect(page.locator(".msg-tutor").last).to_contain_text("Point 30:")


def test_a_reask_shows_a_calm_status_and_the_preview_is_replaced(
    model_app: RunningApp, model: ScriptedModel, page: Page
) -> None:
    open_module(page, model_app.url)
    model.stream("Well, Draft that breaks: let me answer in my own words for a while.", pieces=6, chunk_delay_s=0.1)
    model.stream(json.dumps(reply(block("paragraph", "A clear answer."))), pieces=20, chunk_delay_s=0.15)
    _send_only(page, "What is anxiety?")
    expect(page.locator("#typing")).to_contain_text("Let me put that more clearly", timeout=10_000)
    wait_idle(page)
    last = page.locator(".msg-tutor").last
    expect(last).to_contain_text("A clear answer.")
    expect(last).not_to_contain_text("Draft that breaks")


def test_the_busy_timer_starts_again_for_the_next_turn(
    model_app: RunningApp, model: ScriptedModel, page: Page
) -> None:
    open_module(page, model_app.url)
    model.stream(json.dumps(reply(block("paragraph", prose(8)))), pieces=40, chunk_delay_s=0.2)  # ~8 s
    model.stream(json.dumps(reply(block("paragraph", "And the second answer, in its own time."))),
                 pieces=30, chunk_delay_s=0.2)  # ~6 s
    tutors = page.locator(".msg-tutor").count()
    _send_only(page, "Tell me about the alarm")
    timer = page.locator("#turn-elapsed")
    expect(timer).to_contain_text(re.compile(r"\b[4-9] s"), timeout=15_000)  # the first turn is counted
    _send_only(page, "And then what?")  # sent while the tutor is still busy
    expect(page.locator(".msg-tutor")).to_have_count(tutors + 1, timeout=30_000)
    # The first reply has landed and the tutor is busy with the second message: its count
    # starts from nothing, not from the first turn's seconds. (Polled: on a busy machine the
    # new turn's start can reach the page a moment after the reply, and the count is redrawn
    # every 250 ms; a timer that carried the first turn over never drops below 4 s again.)
    page.wait_for_function("() => { const m = (document.getElementById('turn-elapsed') || {}).textContent"
                           " || ''; const n = m.match(/(\\d+) s/); return !n || Number(n[1]) < 4; }",
                           timeout=3_000)
    expect(page.locator(".msg-tutor")).to_have_count(tutors + 2, timeout=30_000)


def test_a_message_sent_while_the_introduction_is_written_waits_below_it_and_keeps_its_place(
    model_app: RunningApp, model: ScriptedModel, page: Page
) -> None:
    greeting = reply(block("paragraph", prose(6)), next_step={"suggestions": ["Continue"]})
    model.stream(json.dumps(greeting), pieces=40, chunk_delay_s=0.3)  # the opening turn, ~12 s: time to send
    model.reply(reply(block("paragraph", "Good question: the heart speeds up to carry oxygen.")))
    page.goto(model_app.url + "/")
    page.locator("#open-understanding_anxiety").click()
    streaming = page.locator("#streaming-reply")
    expect(streaming.locator(".growing")).to_contain_text("Anxiety is the body", timeout=15_000)
    _send_only(page, "Why does my heart race?")
    held = page.locator("#outbox-held .msg-sending")
    expect(held).to_contain_text("Why does my heart race?")
    expect(held).to_contain_text("Sent once the introduction is done")
    expect(page.locator("#message")).to_have_value("")  # the box is free for the next thought
    # Below the introduction being written, not above it.
    assert page.evaluate("() => !!(document.getElementById('streaming-reply').compareDocumentPosition("
                         "document.querySelector('#outbox-held .msg-sending')) & Node.DOCUMENT_POSITION_FOLLOWING)")
    expect(page.locator(".msg-tutor")).to_have_count(2, timeout=30_000)
    wait_idle(page)
    order = page.locator(".msg-tutor, .msg-learner").evaluate_all(
        "els => els.map(e => e.classList.contains('msg-tutor') ? 'tutor' : 'learner')")
    assert order == ["tutor", "learner", "tutor"], order
    expect(page.locator(".msg-learner").last).to_contain_text("Why does my heart race?")
    expect(page.locator(".msg-tutor").last).to_contain_text("the heart speeds up")
    expect(page.locator(".msg-sending")).to_have_count(0)
    # Stored in that order too: a reload reads the same conversation.
    rows = db_rows(model_app.db_path, "SELECT role FROM message WHERE conversation_id = "
                   "(SELECT max(id) FROM conversation) ORDER BY seq")
    assert [r[0] for r in rows] == ["tutor", "learner", "tutor"]
    page.reload()
    page.locator(".msg-tutor").first.wait_for()
    assert page.locator(".msg-tutor, .msg-learner").evaluate_all(
        "els => els.map(e => e.classList.contains('msg-tutor') ? 'tutor' : 'learner')") == order
