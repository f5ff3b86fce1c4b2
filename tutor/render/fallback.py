"""Where a reply that could not be read as a lesson is cut for the page: its first
screenful shows at once, the rest waits behind "Show the rest". The cut keeps markdown
whole on both sides (a code fence is closed and opened again, a table's header repeated),
so each half renders on its own. Plain text in, plain text out; tutor.render.display renders it."""

from __future__ import annotations

import re

__all__ = ["FALLBACK_CHARS", "FALLBACK_SLACK", "split_fallback"]

# An unreadable reply shows its first ~1,200 characters (a screenful) at once; the rest
# waits behind "Show the rest". A reply at most FALLBACK_SLACK longer is shown whole.
FALLBACK_CHARS = 1200
FALLBACK_SLACK = 300

_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_RULE_OR_UNDERLINE = re.compile(r" {0,3}(?:-+|=+|\*+|_+)\s*$")
_TABLE_DELIMITER = re.compile(r"\s*\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$")


def split_fallback(text: str, limit: int = FALLBACK_CHARS) -> tuple[str, str]:
    """(what a fallback shows at once, the rest behind "Show the rest"); rest is "" when the
    text is short enough to show whole.

    The cut is the last paragraph break before `limit`, else the last line break outside a
    code fence or table, else a line break inside one: the fence is closed and opened again
    in the rest, a table's header is repeated there, so both halves render alike. Each only
    if it keeps at least half of `limit`; failing all, the last space, and only a run
    without any space is cut mid-word. Nothing is lost: shown + rest hold every character
    of `text` (plus, at most, the repeated fence or table header).
    """
    if len(text) <= limit + FALLBACK_SLACK:
        return text, ""
    lowest = limit // 2
    paragraph = line = None  # the best cut positions so far (line starts)
    inside: tuple[int, str, str] | None = None  # (position, closing text, reopening text)
    fence = opener = header = ""  # the open fence's marker and first line; a table's header
    pos, previous = 0, ""
    for current in text.splitlines(keepends=True):
        if pos > limit:
            break
        row = _table_row(current)
        if header and not row:
            header = ""
        if pos >= lowest:
            if fence:
                inside = (pos, fence + "\n", opener)
            elif header:
                inside = (pos, "", header)
            elif not previous.strip() and current.strip():
                paragraph = pos
            elif not (_table_row(previous) and row) and not _RULE_OR_UNDERLINE.match(current):
                line = pos
        match = _FENCE.match(current)
        if not fence and match:
            fence, opener = match.group(1), current
        elif fence and _closes(current, fence):
            fence = ""
        elif not fence and row and _table_row(previous) and _TABLE_DELIMITER.match(current):
            header = previous + current
        pos += len(current)
        previous = current
    for cut in (paragraph, line):
        if cut is not None:
            return text[:cut], text[cut:]
    if inside is not None:
        cut, closing, reopening = inside
        return text[:cut] + closing, reopening + text[cut:]
    space = text.rfind(" ", lowest, limit)
    cut = space if space > 0 else limit
    return text[:cut].rstrip(), text[cut:].lstrip()


def _closes(line: str, fence: str) -> bool:
    mark = line.strip()
    return bool(mark) and set(mark) == {fence[0]} and len(mark) >= len(fence)


def _table_row(line: str) -> bool:
    return line.lstrip().startswith("|")
