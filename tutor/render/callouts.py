"""Callouts as the page labels them, and quotes of the author's material shown as written.

A callout's label is its title when it has one (an author's `!!! tip "Title" …`, carried
as a bold lead-in `**Title:** …` — see tutor.contract.authored — or a model's own lead-in),
otherwise a neutral word for its kind: never praise picked by colour ("Well done" on every
green box told learners they had done well when the author only said something hopeful).

A quote keeps its text verbatim (the citation check and the stored reply hold the author's
markdown); only the page reads the author's `!!! kind` callouts inside it, so a quoted
passage shows its callout as a callout instead of the raw "!!! tip" line.
"""

from __future__ import annotations

import re
from html import escape

from tutor.contract.authored import callout_runs
from tutor.i18n import Translator, translator
from tutor.render.markdown import render

__all__ = ["CALLOUT_LABELS", "callout_title", "quoted_html"]

# Msgids of the catalogues' page context (tutor/locales; translated with Translator.page and
# the page's `ui`), shown when a callout has no title of its own.
CALLOUT_LABELS = {"info": "Info", "warning": "Warning", "success": "Good news", "tip": "Tip"}

# "**Good news:** text" or "**Good news**: text"; short, one line, no markup of its own.
_LEAD_IN = re.compile(r"^\s*\*\*([^*_`\[\]<>\n]{1,60}?)(?::\*\*|\*\*:)[ \t]*")


def callout_title(content: str) -> tuple[str, str]:
    """(the callout's own title, the text after it), or ("", content) when it has none."""
    lead = _LEAD_IN.match(content)
    if lead is None or not lead.group(1).strip() or not content[lead.end():].strip():
        return "", content
    return lead.group(1).strip(), content[lead.end():]


def quoted_html(text: str, t: Translator | None = None, budget: dict | None = None) -> str:
    """A quote's markdown as safe HTML (tutor.render.markdown), with the author's callouts
    inside it rendered as callouts labelled in `t`'s language. The HTML goes inside the
    page's blockquote; headings, lists and nested quotes are markdown's own."""
    t = t or translator(None)
    budget = {} if budget is None else budget
    runs = callout_runs(text or "")
    if all(kind is None for kind, _ in runs):
        return render(text, budget)
    parts = []
    for kind, chunk in runs:
        if kind is None:
            parts.append(render(chunk, budget))
            continue
        title, body = callout_title(chunk)
        label = escape(title or t.page(CALLOUT_LABELS[kind]))
        parts.append(f'<div class="quote-callout quote-{kind}" role="note" aria-label="{label}">'
                     f'<p class="callout-label">{label}</p>{render(body, budget)}</div>\n')
    return "".join(parts)
