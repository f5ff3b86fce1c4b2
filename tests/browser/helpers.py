"""Small steps shared by the browser tests."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from playwright.sync_api import Page

MODULE = "understanding_anxiety"


# Keeps the page's sockets within reach, so a test can cut them as a network would.
TRACK_SOCKETS = """
(() => {
  const Native = window.WebSocket;
  window.__sockets = [];
  window.WebSocket = class extends Native {
    constructor(...args) { super(...args); window.__sockets.push(this); }
  };
})();
"""


class Network:
    """The browser going offline: the open event socket is cut and new connections fail,
    as a dropped Wi-Fi does (Playwright's offline mode alone leaves open sockets alone)."""

    def __init__(self, page: Page) -> None:
        self.page = page
        page.add_init_script(TRACK_SOCKETS)

    def go_offline(self) -> None:
        self.page.context.set_offline(True)
        self.page.evaluate("() => window.__sockets.forEach((s) => s.close())")

    def go_online(self) -> None:
        self.page.context.set_offline(False)


def open_module(page: Page, base_url: str, module: str = MODULE) -> None:
    page.goto(base_url + "/")
    page.locator(f"#open-{module}").click()
    page.locator(".msg-tutor").first.wait_for()
    wait_idle(page)


def wait_until(page: Page, expression: str, arg: Any = None, *, timeout: float = 30_000,
               polling: float = 50) -> None:
    """Until a JavaScript expression (or function of `arg`) is truthy in the page.

    page.wait_for_function evaluates its string with eval() inside the page, which the
    app's Content-Security-Policy forbids; page.evaluate does not need eval, so this polls
    it from here. The browser tests run under the real policy."""
    deadline = time.monotonic() + timeout / 1000
    while not page.evaluate(expression, arg):
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout / 1000:g} s: {expression}")
        time.sleep(polling / 1000)


def wait_idle(page: Page) -> None:
    """Until the tutor has answered everything sent so far (no typing indicator, no reply
    still being written)."""
    wait_until(page, "!document.getElementById('typing') && !document.getElementById('streaming-reply')")


def wait_for_reply(page: Page, tutor_before: int) -> None:
    wait_until(page, f"document.querySelectorAll('.msg-tutor').length > {tutor_before}")
    wait_idle(page)


def send(page: Page, text: str) -> None:
    tutor_before = page.locator(".msg-tutor").count()
    page.locator("#message").fill(text)
    page.locator("#message").press("Enter")
    wait_for_reply(page, tutor_before)


def message_texts(page: Page) -> list[str]:
    """Each message's words, whitespace collapsed (textContent: independent of layout)."""
    return [" ".join(t.split()) for t in page.locator(".msg").all_text_contents()]


def last_tutor(page: Page):
    return page.locator(".msg-tutor").last


def reply(*blocks: dict[str, Any], **content: Any) -> dict[str, Any]:
    """A RESPONSE_SCHEMA object with these text blocks and other content keys."""
    meta = content.pop("meta", {"response_type": "educational", "emotion": "informative"})
    return {"content": {"text_blocks": list(blocks), **content}, "meta": meta}


def block(kind: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "content": text, **extra}


def db_rows(db: Path, sql: str, *args: Any) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        return conn.execute(sql, args).fetchall()


def message_count(db: Path) -> int:
    return db_rows(db, "select count(*) from message")[0][0]


# WCAG 2 contrast of every visible text against the background it is drawn on (layers of
# translucent backgrounds blended); AA needs 4.5:1, or 3:1 for large text.
_CONTRAST_JS = """
() => {
  const parse = (c) => {
    const m = c.match(/rgba?\\(([^)]+)\\)/);
    if (!m) { return null; }
    const p = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
    return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1};
  };
  const blend = (top, bottom) => ({
    r: top.r * top.a + bottom.r * (1 - top.a), g: top.g * top.a + bottom.g * (1 - top.a),
    b: top.b * top.a + bottom.b * (1 - top.a), a: 1});
  const lum = ({r, g, b}) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const background = (el) => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c.a > 0) { layers.push(c); if (c.a >= 1) { break; } }
    }
    let bg = {r: 255, g: 255, b: 255, a: 1};
    for (const layer of layers.reverse()) { bg = blend(layer, bg); }
    return bg;
  };
  const failures = [];
  const seen = new Set();
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const el = walker.currentNode.parentElement;
    if (!walker.currentNode.textContent.trim() || !el || seen.has(el)) { continue; }
    seen.add(el);
    const cs = getComputedStyle(el);
    if (cs.visibility === 'hidden' || !el.getClientRects().length || el.closest('.sr-only, script, style')) { continue; }
    const bg = background(el);
    const fg = blend(parse(cs.color), bg);
    const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
    const ratio = (hi + 0.05) / (lo + 0.05);
    const size = parseFloat(cs.fontSize);
    const large = size >= 24 || (parseInt(cs.fontWeight, 10) >= 700 && size >= 18.66);
    if (ratio < (large ? 3 : 4.5)) {
      failures.push(`${walker.currentNode.textContent.trim().slice(0, 40)} (${ratio.toFixed(2)}:1, ${cs.color} on ${el.className})`);
    }
  }
  return failures;
}
"""


def low_contrast_texts(page: Page) -> list[str]:
    return page.evaluate(_CONTRAST_JS)


def unlabelled_controls(page: Page) -> list[str]:
    """Controls without an accessible name, as chromium computes names for assistive tech."""
    cdp = page.context.new_cdp_session(page)
    try:
        nodes = cdp.send("Accessibility.getFullAXTree")["nodes"]
    finally:
        cdp.detach()
    roles = {"button", "link", "textbox", "checkbox", "radio", "combobox", "spinbutton", "progressbar",
             "slider", "searchbox", "radiogroup", "form", "region"}
    missing = []
    for node in nodes:
        role = (node.get("role") or {}).get("value")
        if node.get("ignored") or role not in roles:
            continue
        if not ((node.get("name") or {}).get("value") or "").strip():
            missing.append(f"{role} #{node.get('backendDOMNodeId')}")
    return missing
