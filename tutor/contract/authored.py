"""Authored markdown -> RESPONSE_SCHEMA text blocks: the built-in tutor teaches with these,
and the page reads a quote of the author's material with them (tutor.render.quoted).

A callout's title travels in its content as a bold lead-in (`**Good news:** text`), the one
place the reply schema has for it: tutor.render.callouts reads it back as the label."""

from __future__ import annotations

import re

from tutor.contract import TextBlock

__all__ = ["callout_content", "callout_runs", "markdown_blocks"]

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_LIST_ITEM = re.compile(r"^\s*([-*+]|\d+[.)])\s+")
_CALLOUT = re.compile(r"^\s*!!!\s*(info|warning|success|tip)\b[ \t]*(.*)$", re.IGNORECASE)
# MkDocs' admonition title: `!!! success "Good news" Anxiety problems are ...`
_TITLE = re.compile(r'^"([^"\n]{1,60})"[ \t]*')


def callout_content(rest: str) -> str:
    """A callout's text after `!!! kind`: an author's quoted title becomes the bold lead-in."""
    titled = _TITLE.match(rest)
    body = rest[titled.end():].strip() if titled else ""
    if titled is None or not body or not titled.group(1).strip():
        return rest  # a callout that is only a quoted sentence keeps it as its text
    return f"**{titled.group(1).strip().rstrip(':')}:** {body}"


def markdown_blocks(markdown: str) -> list[TextBlock]:
    """Authored markdown -> text blocks: '#' lines become headings, runs of list items a
    list, '> ' lines a quote, a paragraph starting '!!! tip' (info/warning/success) that
    callout (`!!! tip "Title" text` gives it a title), anything else a paragraph. Blank lines
    separate paragraphs."""
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
            body = callout_content(body)
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


def callout_runs(markdown: str) -> list[tuple[str | None, str]]:
    """The author's callouts picked out of markdown that is otherwise left as it is: a list of
    (kind, callout text) and (None, the markdown between them). A callout is read as
    markdown_blocks reads it: from its `!!! kind` line to the next blank line."""
    runs: list[tuple[str | None, str]] = []
    lines = markdown.splitlines()
    plain: list[str] = []
    i = 0
    while i < len(lines):
        callout = _CALLOUT.match(lines[i])
        if callout is None:
            plain.append(lines[i])
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j].strip():
            j += 1
        body = callout_content("\n".join([callout.group(2), *(ln.strip() for ln in lines[i + 1 : j])]).strip())
        if "\n".join(plain).strip():
            runs.append((None, "\n".join(plain).strip("\n")))
        plain = []
        if body:
            runs.append((callout.group(1).lower(), body))
        i = j
    if "\n".join(plain).strip():
        runs.append((None, "\n".join(plain).strip("\n")))
    return runs


def _starts_block(line: str) -> bool:
    return bool(_HEADING.match(line.strip()) or _CALLOUT.match(line) or _LIST_ITEM.match(line)
                or line.lstrip().startswith(">"))
