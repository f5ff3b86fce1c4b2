"""axe-core in the browser tests: inject the axe.min.js that the `axe-playwright-python`
package ships (installed with the test extras) and run it at WCAG 2.2 AA."""

from __future__ import annotations

from pathlib import Path

import axe_playwright_python
from playwright.sync_api import Page, expect

AXE_JS = Path(axe_playwright_python.__file__).parent / "axe.min.js"
WCAG_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]

_RUN = """
async (tags) => {
  const result = await axe.run(document, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']});
  return result.violations.map((v) => `${v.id} (${v.impact}): ${v.help} — ` +
    v.nodes.slice(0, 4).map((n) => n.target.join(' ') + (n.failureSummary ? ' [' + n.failureSummary.replace(/\\s+/g, ' ').slice(0, 160) + ']' : '')).join(' | '));
}
"""


def axe_violations(page: Page) -> list[str]:
    """WCAG 2.2 AA violations axe-core finds on the page as it is now ([] when none)."""
    if not page.evaluate("typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE_JS))
    page.wait_for_timeout(700)  # transitions and the pop-in of a milestone settle first
    return page.evaluate(_RUN, WCAG_AA)


def axe_in_both_themes(page: Page) -> dict[str, list[str]]:
    """The violations with the system set to light, then to dark (the page follows it)."""
    found = {}
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        expect(page.locator("html")).to_have_attribute("data-theme", scheme)
        found[scheme] = axe_violations(page)
    return {k: v for k, v in found.items() if v}
