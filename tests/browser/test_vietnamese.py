"""A Vietnamese module: the chat page and the built-in tutor speak Vietnamese; an English
module opened next speaks English again."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import RunningApp, _page
from tests.browser.helpers import MODULE, last_tutor, open_module, send
from tutor.access.accounts import message_for
from tutor.i18n import localize

VI_MODULE = "giac_ngu_lanh_manh"


def test_a_vietnamese_module_speaks_vietnamese(app: RunningApp, page: Page) -> None:
    open_module(page, app.url, VI_MODULE)
    # The page's own words.
    expect(page.locator("#send")).to_have_text("Gửi")
    expect(page.locator("#send")).to_have_attribute("aria-label", "Gửi tin nhắn")
    expect(page.locator("label[for=message]")).to_have_text("Tin nhắn của bạn")
    expect(page.locator("#message")).to_have_attribute(
        "placeholder", "Nhập tin nhắn — Enter để gửi, Shift+Enter để xuống dòng")
    expect(page.locator("#composer")).to_have_attribute("aria-label", "Gửi tin nhắn cho gia sư")
    expect(page.locator("#progress-count")).to_have_text("1 trên 10 chủ đề")
    expect(page.locator(".page.chat")).to_have_attribute("lang", "vi")
    expect(page.locator("html")).to_have_attribute("lang", "vi")  # the whole document, for screen readers
    expect(page).to_have_title("Ngủ ngon hơn mỗi đêm — Tutor")
    assert page.locator("[title*=Tone]").count() == 0
    # Numbers the Vietnamese way, in the page's counter as in the server's words.
    page.locator("#message").fill("a" * 4100)
    expect(page.locator("#char-count")).to_contain_text("4.100")
    expect(page.locator("#char-count")).to_contain_text("4.000")
    page.locator("#message").fill("")
    # On a phone the module's title is read whole, not cut to "Ngủ ngon hơn mỗi …".
    page.set_viewport_size({"width": 375, "height": 740})
    title = page.locator(".chat-header .module-title")
    expect(title).to_be_visible()
    assert title.evaluate("e => e.scrollHeight <= e.clientHeight + 1 && e.scrollWidth <= e.clientWidth + 1")
    page.set_viewport_size({"width": 1280, "height": 800})
    expect(page.locator("#chat-theme option[value=light]")).to_have_text("Sáng")
    # The words the page's scripts show: a message being sent, a lost connection.
    expect(page.locator("#outbox")).to_have_attribute("data-sending", "Đang gửi…")
    expect(page.locator("[data-connection-lost]")).to_have_attribute(
        "data-connection-lost", "Mất kết nối — đang kết nối lại… Tin nhắn của bạn vẫn được giữ nguyên.")
    # The built-in tutor's opening.
    opening = page.locator(".msg-tutor").first
    expect(opening).to_contain_text("Chào mừng bạn! Chúng ta sẽ đi qua 10 chủ đề trong 3 phần")
    expect(opening.locator(".chip").last).to_have_text("Tiếp tục")

    send(page, "Tiếp tục")
    expect(page.locator(".msg-learner").last).to_have_text("Tiếp tục")
    reply = last_tutor(page)
    expect(reply).to_contain_text("Trước khi đi tiếp, mình cùng xem bạn còn nhớ gì từ Vì sao chúng ta cần ngủ nhé.")
    expect(reply.locator(".chip").first).to_have_text("Bỏ qua câu hỏi này")
    expect(page.locator("#progress-count")).to_have_text("1 trên 10 chủ đề")
    shown = " ".join(page.locator("main, footer").all_inner_texts())
    for english in ("Send", "Continue", "Skip this check", "Welcome", "Type your answer"):
        assert english not in shown

    # An English module opened next: the page speaks English again.
    page.goto(app.url + "/")
    open_module(page, app.url)
    expect(page.locator("#send")).to_have_text("Send")
    expect(page.locator("label[for=message]")).to_have_text("Your message")
    expect(page.locator(".page.chat")).to_have_attribute("lang", "en")
    expect(page.locator("html")).to_have_attribute("lang", "en")


@pytest.fixture
def vietnamese_browser(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Page]:
    """A browser set to Vietnamese: it sends Accept-Language: vi-VN."""
    yield from _page(browser, request, viewport={"width": 1100, "height": 900}, locale="vi-VN")


def test_the_start_page_speaks_the_browsers_language(app: RunningApp, vietnamese_browser: Page) -> None:
    page = vietnamese_browser
    page.goto(app.url + "/")
    expect(page.locator(".page.home")).to_contain_text(
        "Chọn một học phần và học qua trò chuyện. Bạn cứ nhập bất cứ điều gì, bất cứ lúc nào.")
    expect(page.locator("html")).to_have_attribute("lang", "vi")
    expect(page.locator(f"#open-{MODULE}")).to_have_text(re.compile(r"^(Bắt đầu|Học tiếp)$"))
    shown = page.locator("main").inner_text()
    for english in ("Pick a module", "Start over", "Your progress", "Theme"):
        assert english not in shown, english


def test_the_sign_in_page_speaks_the_browsers_language(accounts_app: RunningApp, vietnamese_browser: Page) -> None:
    page = vietnamese_browser
    page.goto(accounts_app.url + "/signin?error=credentials")
    expect(page.locator("#signin-submit")).to_have_text("Đăng nhập")
    expect(page.locator("main")).to_contain_text(localize(message_for("credentials"), "vi"))
    expect(page.locator("html")).to_have_attribute("lang", "vi")
    assert "Sign in" not in page.locator("main").inner_text()
