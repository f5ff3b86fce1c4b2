"""A real model (llama.cpp, Gemma 3 270M) in the browser: its reply shows while it is being
written, and the stored reply replaces it. Structure and behaviour, never wording."""

from __future__ import annotations

import time

from playwright.sync_api import Page, expect

from tests.browser.conftest import RunningApp
from tests.browser.helpers import db_rows, open_module, wait_until

FIRST_TEXT = (
    "(() => { const s = document.getElementById('streaming-reply');"
    " return !!s && [...s.querySelectorAll('.block')].some((b) => b.textContent.trim().length > 0); })()"
)


def test_blocks_of_a_real_reply_appear_before_it_is_complete(llama_app: RunningApp, page: Page) -> None:
    page.set_default_timeout(120_000)  # a CPU model on a busy machine: the opening can take a while
    open_module(page, llama_app.url)  # the opening turn, streamed and stored
    tutor_before = page.locator(".msg-tutor").count()
    page.locator("#message").fill("What is anxiety, actually?")
    started = time.monotonic()
    page.locator("#message").press("Enter")
    wait_until(page, FIRST_TEXT, timeout=120_000, polling=20)
    first = time.monotonic() - started
    assert page.locator(".msg-tutor").count() == tutor_before  # nothing stored yet
    wait_until(
        page, "!document.getElementById('streaming-reply') && !document.getElementById('typing')",
        timeout=180_000,
    )
    total = time.monotonic() - started
    assert first < total  # seen while it was written, not after
    expect(page.locator(".msg-tutor")).to_have_count(tutor_before + 1)
    last = page.locator(".msg-tutor").last
    assert last.inner_text().strip()  # the learner always has something to read
    outcome, flags = db_rows(llama_app.db_path, "SELECT outcome, flags_json FROM message WHERE role='tutor' "
                                                 "ORDER BY id DESC LIMIT 1")[0]
    assert outcome in ("valid", "repaired") or "needs_review" in flags
    expect(page.locator("#message")).to_be_enabled()
