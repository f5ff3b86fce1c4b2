"""A new turn sends the browser only what is new, never the conversation so far. (How it
scales to 200 turns is measured by `python -m benchmarks.ui_bench`, not timed here.)"""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.browser.conftest import RunningApp, ScriptedModel
from tests.browser.helpers import block, open_module, reply, send

FORM = {"id": "check", "title": "Check", "fields": [
    {"id": "mood", "type": "radio", "label": "Mood", "options": [{"value": "ok", "label": "Fine"}]}]}


def test_each_turn_sends_only_the_new_messages(model_app: RunningApp, model: ScriptedModel, page: Page) -> None:
    frames: list[str] = []

    def watch(ws) -> None:
        ws.on("framereceived", lambda payload: frames.append(payload if isinstance(payload, str) else payload.decode()))

    page.on("websocket", watch)
    open_module(page, model_app.url)
    sizes = []
    for turn in range(1, 9):
        model.reply(reply(
            block("paragraph", f"Answer R{turn:02d}, one paragraph of the same length every turn."),
            forms=[FORM],  # each turn closes the previous turn's form: that must stay small too
            next_step={"suggestions": [f"Follow-up S{turn:02d}"]},
        ))
        frames.clear()
        send(page, f"Question L{turn:02d}")
        expect(page.locator(".msg-tutor").last).to_contain_text(f"R{turn:02d}")
        page.wait_for_timeout(100)  # trailing updates (focus, thinking off)
        wire = "".join(frames)
        assert f"L{turn:02d}" in wire and f"R{turn:02d}" in wire
        for earlier in range(1, turn):
            for marker in (f"L{earlier:02d}", f"R{earlier:02d}", f"S{earlier:02d}"):
                assert marker not in wire, f"turn {turn} re-sent {marker} from turn {earlier}"
        sizes.append(len(wire.encode()))
    assert max(sizes[1:]) <= 1.2 * min(sizes[1:]), f"bytes per turn grow with the conversation: {sizes}"
    # ... and every form a later turn closed shows so; the latest is still open.
    expect(page.locator(".tutor-form[data-status=skipped]")).to_have_count(7)
    expect(page.locator(".tutor-form[data-status=open]")).to_have_count(1)
