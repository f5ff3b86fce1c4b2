"""Images, video and audio with alt text and caption; a broken or refused source shows
its words instead of a broken element."""

from __future__ import annotations

import functools
import math
import struct
import threading
import wave
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import RunningApp, ScriptedModel
from tests.browser.helpers import block, last_tutor, open_module, reply, wait_until

DIAGRAM = "/media/understanding_anxiety/three_levels.svg"


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def media_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A second origin on 127.0.0.1 serving a real, playable sound (half a second of a tone)."""
    root = tmp_path_factory.mktemp("media-host")
    with wave.open(str(root / "tone.wav"), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(b"".join(struct.pack("<h", int(8000 * math.sin(i / 8))) for i in range(4000)))
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _figure(msg, index: int):
    return msg.locator("figure.media").nth(index)


def test_media_show_with_alt_and_caption_and_fall_back_to_their_words(
    model_app: RunningApp, model: ScriptedModel, page: Page, media_host: str
) -> None:
    model.reply(reply(
        block("paragraph", "Have a look and a listen. ![A bar chart of worry](/media/missing-inline.png)"),
        media=[
            {"type": "image", "src": DIAGRAM, "alt": "Three linked boxes: body, mind, behaviour",
             "caption": "The three levels"},
            {"type": "audio", "src": f"{media_host}/tone.wav", "alt": "A calm tone", "caption": "Listen"},
            {"type": "image", "src": "/media/missing.png", "alt": "A calm lake at dawn", "caption": "A lake"},
            {"type": "video", "src": "/media/missing.mp4", "alt": "Slow breathing, guided", "caption": "Follow along"},
            {"type": "audio", "src": f"{media_host}/missing.mp3", "caption": "Body scan"},
            {"type": "image", "src": "javascript:alert(1)", "alt": "The worry curve", "caption": "Rises, then falls"},
        ],
    ))
    open_module(page, model_app.url)
    msg = last_tutor(page)
    figures = msg.locator("figure.media")
    expect(figures).to_have_count(6)
    for i in range(6):
        _figure(msg, i).scroll_into_view_if_needed()  # lazy images load when seen

    image = _figure(msg, 0)
    expect(image.locator("img")).to_have_attribute("alt", "Three linked boxes: body, mind, behaviour")
    expect(image.locator("figcaption")).to_have_text("The three levels")
    wait_until(page, "(img) => img.complete && img.naturalWidth > 0", image.locator("img").element_handle())
    expect(image.locator(".media-fallback")).to_be_hidden()

    sound = _figure(msg, 1)
    expect(sound.locator("audio")).to_have_attribute("aria-label", "A calm tone")
    wait_until(page, "(a) => a.readyState >= 1", sound.locator("audio").element_handle())
    expect(sound).to_have_attribute("data-state", "ok")

    # Broken sources (404s) swap themselves for their words, in the browser.
    for index, words, caption, element in [
        (2, "A calm lake at dawn", "A lake", "img"),
        (3, "Slow breathing, guided", "Follow along", "video"),
        (4, "This media could not be shown.", "Body scan", "audio"),
    ]:
        fig = _figure(msg, index)
        expect(fig).to_have_attribute("data-state", "broken")
        expect(fig.locator(".media-fallback")).to_have_text(words)
        expect(fig.locator("figcaption")).to_have_text(caption)
        expect(fig.locator(element)).to_be_hidden()

    # The same for an image inside the tutor's text.
    expect(msg.locator(".block-paragraph .img-fallback")).to_have_text("A bar chart of worry")
    assert msg.locator(".block-paragraph img").count() == 0

    # A source the server refused never reaches the page; its words do.
    refused = _figure(msg, 5)
    expect(refused).to_have_attribute("data-state", "refused")
    expect(refused.locator(".media-fallback")).to_have_text("The worry curve")
    expect(refused.locator("figcaption")).to_have_text("Rises, then falls")
    assert refused.locator("img, video, audio").count() == 0
