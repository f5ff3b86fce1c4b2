"""Authored markdown -> RESPONSE_SCHEMA text blocks (the built-in tutor teaches with these)."""

from __future__ import annotations

import re

from tutor.contract import TextBlock

__all__ = ["markdown_blocks"]

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_LIST_ITEM = re.compile(r"^\s*([-*+]|\d+[.)])\s+")
_CALLOUT = re.compile(r"^\s*!!!\s*(info|warning|success|tip)\b[ \t]*(.*)$", re.IGNORECASE)


def markdown_blocks(markdown: str) -> list[TextBlock]:
    """Authored markdown -> text blocks: '#' lines become headings, runs of list items a
    list, '> ' lines a quote, a paragraph starting '!!! tip' (info/warning/success) that
    callout, anything else a paragraph. Blank lines separate paragraphs."""
    blocks: list[TextBlock] = []
    lines = markdown.strip("\n").splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        if heading := _HEADING.match(line.strip()):
            blocks.append(TextBlock(type="heading", content=heading.group(2), level=len(heading.group(1))))
            i += 1
            continue
        j = i + 1
        if callout := _CALLOUT.match(line):
            while j < len(lines) and lines[j].strip():
                j += 1
            body = "\n".join([callout.group(2), *(ln.strip() for ln in lines[i + 1 : j])]).strip()
            if body:
                blocks.append(TextBlock(type=callout.group(1).lower(), content=body))
        elif _LIST_ITEM.match(line):
            while j < len(lines) and (_LIST_ITEM.match(lines[j]) or lines[j][:1] in (" ", "\t")) and lines[j].strip():
                j += 1
            blocks.append(TextBlock(type="list", content="\n".join(lines[i:j]).strip()))
        elif line.lstrip().startswith(">"):
            while j < len(lines) and lines[j].lstrip().startswith(">"):
                j += 1
            quoted = "\n".join(re.sub(r"^\s*>\s?", "", ln) for ln in lines[i:j]).strip()
            if quoted:
                blocks.append(TextBlock(type="quote", content=quoted))
        else:
            while j < len(lines) and lines[j].strip() and not _starts_block(lines[j]):
                j += 1
            blocks.append(TextBlock(type="paragraph", content="\n".join(lines[i:j]).strip()))
        i = j
    return blocks


def _starts_block(line: str) -> bool:
    return bool(_HEADING.match(line.strip()) or _CALLOUT.match(line) or _LIST_ITEM.match(line)
                or line.lstrip().startswith(">"))
