"""Lossless extraction: find the JSON a model meant, without changing a single character of it.

Everything here only removes wrapping (reasoning blocks, BOM, fences, prose) or locates
values with a real JSON decoder; no value is rewritten. Syntax repair lives in repair.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Cleaned",
    "Found",
    "Scan",
    "clean",
    "outside_text_flags",
    "scan_values",
    "structural_depths",
]

# Reasoning models wrap their thoughts in tags; some emit only the closing tag
# (the opening one was part of the prompt template).
_THINK_PAIR = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.S | re.I)
_THINK_CLOSE = re.compile(r"</(?:think|thinking|reasoning)>", re.I)
_THINK_OPEN = re.compile(r"<(?:think|thinking|reasoning)>", re.I)
# BOM, zero-width space and word joiner carry no meaning anywhere in a reply. ZWJ/ZWNJ are
# kept: they are part of emoji sequences and of some scripts.
_INVISIBLE = re.compile("[\ufeff\u200b\u2060\u180e]")
_OPEN_FENCE = re.compile(r"\A```[ \t]*[A-Za-z0-9_+.-]*[ \t]*\r?\n?")
_FENCE_MARK = re.compile(r"```[A-Za-z0-9_+.-]*")
_VALUE_START = re.compile(r"[{\[]")
_DECODER = json.JSONDecoder()
# Strict JSON after '{' is '"' or '}'; after '[' a value or ']'.
_PLAUSIBLE = re.compile(r'\{\s*["}]|\[\s*[\]\[{"\-0-9tfn]')
# Each failed decode costs a line count from the start of the text (in JSONDecodeError).
_MAX_DECODE_FAILURES = 512


@dataclass
class Cleaned:
    text: str
    flags: list[str] = field(default_factory=list)


def clean(raw: str) -> Cleaned:
    """Strip reasoning blocks, invisible characters and a whole-message code fence."""
    flags: list[str] = []
    text = raw
    if "<" in text:
        # Many unclosed openings would make the pair search quadratic; the cut at the
        # last closing tag below handles reasoning-first replies on its own.
        few = len(_THINK_OPEN.findall(text)) <= 16
        stripped = _THINK_PAIR.sub("", text) if few and _THINK_CLOSE.search(text) else text
        closes = list(_THINK_CLOSE.finditer(stripped))
        if closes:
            stripped = stripped[closes[-1].end():]
        else:
            # An unclosed opening tag: drop the tag only; the decoder finds what follows.
            stripped = _THINK_OPEN.sub("", stripped)
        if stripped != text:
            flags.append("think_block")
            text = stripped
    invisible = False
    if "\ufeff" in text:
        flags.append("bom")
        invisible = True
    if "\u200b" in text or "\u2060" in text or "\u180e" in text:
        flags.append("zero_width")
        invisible = True
    if invisible:
        text = _INVISIBLE.sub("", text)
    text = text.strip()
    # A whole-message fence: only the opening line and the final ``` are removed, so a
    # fence inside a JSON string (a code sample in a block) is never cut.
    opening = _OPEN_FENCE.match(text)
    if opening:
        text = text[opening.end():]
        if text.endswith("```"):
            text = text[:-3]
        text = text.strip()
        flags.append("fence")
    return Cleaned(text, flags)


@dataclass
class Found:
    start: int
    end: int
    value: Any


@dataclass
class Scan:
    values: list[Found]
    failures: list[tuple[int, int]]  # (start, position of the decode error)
    exhausted: bool = False  # the scan budget ran out before the end of the text


def scan_values(text: str, *, budget_factor: int = 4) -> Scan:
    """Every JSON object/array the strict decoder can read, left to right.

    A decoded value is skipped over as a whole, so values nested in it are not revisited.
    A failed attempt moves on by one character: a broken outer object may still contain
    whole inner values (kept as fallbacks). Failed attempts can each read to the end of
    the text, which is quadratic on big broken inputs; the characters read are bounded by
    ``budget_factor`` times the text length.
    """
    values: list[Found] = []
    failures: list[tuple[int, int]] = []
    budget = budget_factor * len(text) + 8192
    spent = 0
    decode_failures = 0
    pos = 0
    search = _VALUE_START.search
    while True:
        m = search(text, pos)
        if m is None:
            return Scan(values, failures)
        start = m.start()
        if not _PLAUSIBLE.match(text, start):
            # Cannot be strict JSON ("{curly braces}", "{'a': 1}"): fails at once, and the
            # decoder's error (which counts lines from the start of the text) is skipped.
            failures.append((start, start + 1))
            pos = start + 1
            continue
        try:
            value, end = _DECODER.raw_decode(text, start)
        except json.JSONDecodeError as exc:
            failures.append((start, exc.pos))
            spent += exc.pos - start + 1
            decode_failures += 1
            pos = start + 1
        except RecursionError:
            failures.append((start, start + 1))
            spent += len(text) - start
            pos = start + 1
        else:
            values.append(Found(start, end, value))
            spent += end - start
            pos = end
        if spent > budget or decode_failures > _MAX_DECODE_FAILURES:
            return Scan(values, failures, exhausted=True)


# Structure outside strings; at depth 0 quotes are prose (apostrophes, quotations), so
# strings are only tokenised inside brackets.
_STRUCT = re.compile(r'"(?:[^"\\]|\\.)*(?:"|\Z)|[{}\[\]]', re.S)
_BRACKET = re.compile(r"[{}\[\]]")


def structural_depths(text: str, positions: list[int]) -> list[int]:
    """Bracket depth (outside JSON strings) just before each of the sorted ``positions``."""
    out: list[int] = []
    targets = iter(positions)
    target = next(targets, None)
    depth = 0
    pos = 0
    while target is not None:
        m = (_STRUCT if depth else _BRACKET).search(text, pos)
        if m is None:
            break
        while target is not None and target <= m.start():
            out.append(depth)
            target = next(targets, None)
        tok = m.group()
        if tok in "{[":
            depth += 1
        elif tok in "}]":
            depth = max(0, depth - 1)
        pos = m.end()
    while target is not None:
        out.append(depth)
        target = next(targets, None)
    return out


def outside_text_flags(before: str, after: str) -> list[str]:
    """Flags for what surrounds the chosen value: fence markers and/or prose."""
    outside = before + "\n" + after
    flags: list[str] = []
    if "```" in outside:
        flags.append("fence")
        outside = _FENCE_MARK.sub("", outside)
    if outside.strip():
        flags.append("prose_around")
    return flags
