"""Small steps shared by the browser tests."""

from __future__ import annotations

from playwright.sync_api import Page

MODULE = "understanding_anxiety"


def open_module(page: Page, base_url: str, module: str = MODULE) -> None:
    page.goto(base_url + "/")
    page.locator(f"#open-{module}").click()
    page.locator(".msg-tutor").first.wait_for()
    wait_idle(page)


def wait_idle(page: Page) -> None:
    """Until the tutor has answered everything sent so far."""
    page.wait_for_function("!document.getElementById('typing')", timeout=30_000)


def send(page: Page, text: str) -> None:
    tutor_before = page.locator(".msg-tutor").count()
    page.locator("#message").fill(text)
    page.locator("#message").press("Enter")
    page.wait_for_function(
        f"document.querySelectorAll('.msg-tutor').length > {tutor_before}", timeout=30_000
    )
    wait_idle(page)


def message_texts(page: Page) -> list[str]:
    return [t.strip() for t in page.locator(".msg").all_inner_texts()]
