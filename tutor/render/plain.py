"""A tutor reply as plain text, the one way: the terminal chat (tutor.cli.chat_cmd) prints it,
the operator's read-only transcript (tutor.console.transcript) shows it.

The reply is data from a model, so every part is read defensively: a block, quote, form or
suggestion of the wrong shape is left out, never an error. Nothing is rendered as markdown
or HTML; headings keep their '#', quotes their '>', callouts their title in brackets.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tutor.render.callouts import CALLOUT_LABELS, callout_title

__all__ = ["block_text", "content_lines", "dicts", "form_title_lines"]


def dicts(value: Any) -> list[dict[str, Any]]:
    """The dict items of `value` when it is a list (anything else reads as none)."""
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def block_text(block: dict[str, Any]) -> str:
    kind, text = block.get("type"), str(block.get("content") or "")
    if kind == "heading":
        level = block.get("level")
        return "#" * (level if isinstance(level, int) and 1 <= level <= 6 else 2) + " " + text
    if kind == "quote":
        return "\n".join("> " + line for line in text.splitlines())
    if kind in CALLOUT_LABELS:
        title, rest = callout_title(text)
        return f"[{title or CALLOUT_LABELS[kind]}] {rest}"
    return text


def form_title_lines(form: dict[str, Any]) -> list[str]:
    """A form as one line: its title (the transcript's way; the terminal lists its fields)."""
    return [f"[form: {form.get('title') or form.get('id') or ''}]", ""]


def content_lines(content: dict[str, Any], form_lines: Callable[[dict[str, Any]], list[str]] = form_title_lines
                  ) -> list[str]:
    """A reply's `content` as lines: its blocks, verified quotes with where they come from,
    forms (`form_lines`), media, the next step's prompt and numbered quick replies."""
    lines: list[str] = []
    for block in dicts(content.get("text_blocks")):
        lines += [block_text(block), ""]
    for cited in dicts(content.get("citations")):  # verified quotes from the module's material
        lines += ["> " + line for line in str(cited.get("quote") or "").splitlines()]
        lines += [f"  — {cited.get('location') or cited.get('source_id') or ''}", ""]
    for form in dicts(content.get("forms")):
        lines += form_lines(form)
    for item in dicts(content.get("media")):
        caption = item.get("caption") or item.get("alt") or ""
        lines.append(f"[{item.get('type') or 'media'}] {item.get('src') or ''}" + (f" — {caption}" if caption else ""))
    step = content.get("next_step")
    if isinstance(step, dict):
        if step.get("prompt"):
            lines.append(str(step["prompt"]))
        suggestions = [s for s in step.get("suggestions") or [] if isinstance(s, str)]
        lines += [f"  {i}. {suggestion}" for i, suggestion in enumerate(suggestions, 1)]
    return lines
