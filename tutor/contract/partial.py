"""Previews of a reply that is still being written: the growing raw text -> what to show.

While a reply streams, its text is an unfinished JSON object. A partial JSON parser
(pydantic-core's `from_json(..., allow_partial="trailing-strings")`, jiter underneath)
reads it as far as it goes; this module decides what of that may be shown:

- text blocks appear as soon as their type is known, and their text grows;
- media, forms and suggestions appear only once complete and valid;
- nothing else (meta, progress claims) is previewed.

"Complete" needs no guessing: in a cut-off JSON document only the values on the *right
spine* (the last key of each object, the last item of each array, from the root down) can
still be growing, and of those only the containers whose brackets are still open (the
text's bracket depth, counted outside strings, says how many) and a string the text ends
inside. Everything else has been closed by the writer.

A preview is never stored and never trusted: when the stream ends, the whole text goes
through `contract.parse` and the turn policy, and the validated reply replaces it. Every
string here is the model's own, decoded from the raw text; nothing is invented.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from pydantic_core import from_json

from tutor.contract.models import BLOCK_TYPES, Form, Media

__all__ = ["Preview", "PreviewBlock", "preview"]

_THINK_OPEN = re.compile(r"<(think|thinking|reasoning)>", re.IGNORECASE)
_THINK_BLOCK = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class PreviewBlock:
    type: str
    content: str
    level: int | None = None
    complete: bool = False


@dataclass(frozen=True)
class Preview:
    blocks: tuple[PreviewBlock, ...] = ()
    media: tuple[Media, ...] = ()
    forms: tuple[Form, ...] = ()
    suggestions: tuple[str, ...] = ()
    prompt: str = ""


def preview(raw: str, memo: dict | None = None) -> Preview:
    """What may be shown of `raw` so far; an empty Preview when nothing can be.

    `memo`: a dict kept across the reads of one growing reply. A complete media item or
    form is validated once and looked up by its parsed value after that (validating them
    again at every read was ~3% of a busy worker's CPU while replies streamed)."""
    data, spine = _read(raw)
    if not isinstance(data, dict):
        return Preview()
    content = data.get("content")
    if isinstance(content, str):  # a common slip: the content given as one string
        return Preview((PreviewBlock("paragraph", content, None, not spine.open_value(data, "content")),))
    if not isinstance(content, dict):
        return Preview()
    blocks = tuple(_blocks(content.get("text_blocks"), spine))
    memo = {} if memo is None else memo
    media = tuple(_complete_models(content.get("media"), spine, Media, memo))
    forms = tuple(_complete_models(content.get("forms"), spine, Form, memo))
    suggestions: tuple[str, ...] = ()
    prompt = ""
    next_step = content.get("next_step")
    if isinstance(next_step, dict):
        items = next_step.get("suggestions")
        if isinstance(items, list):
            suggestions = tuple(
                s for i, s in enumerate(items)
                if isinstance(s, str) and s.strip() and not (i == len(items) - 1 and spine.open_last_item(items))
            )
        p = next_step.get("prompt")
        if isinstance(p, str) and not spine.open_value(next_step, "prompt"):
            prompt = p
    return Preview(blocks, media, forms, suggestions, prompt)


# A complete JSON string. Removing them all (one C-level pass, no Python per match) leaves
# the brackets outside strings and, when the text ends inside a string, that string's
# opening quote: a quote can remain only there, since every later quote in an unterminated
# string is escaped and so cannot end one started from it.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


class _Spine:
    """Which values of a partially parsed document may still grow.

    Only values on the right spine (the last key of each object, the last item of each
    array, from the root down) can; of those, only the containers the text has not closed
    yet (its bracket depth says how many) and a string the text ends inside.
    """

    def __init__(self, data: Any, text: str) -> None:
        outside = _STRING.sub("", text)
        quote = outside.find('"')
        in_string = quote >= 0  # an unterminated string runs to the end of the text
        if in_string:
            outside = outside[:quote]
        depth = outside.count("{") + outside.count("[") - outside.count("}") - outside.count("]")
        self.open_ids: set[int] = set()
        node: Any = data
        while isinstance(node, (dict, list)) and depth > 0:
            self.open_ids.add(id(node))
            depth -= 1
            if not node:
                break
            node = node[next(reversed(node))] if isinstance(node, dict) else node[-1]
        # The innermost open container's last value is a scalar still being written.
        self.tail_open = in_string

    def open_container(self, node: Any) -> bool:
        return id(node) in self.open_ids

    def open_value(self, obj: dict, key: str) -> bool:
        """The value under `key` may still grow: `obj` is open and `key` is its last key."""
        if id(obj) not in self.open_ids or not obj or next(reversed(obj)) != key:
            return False
        value = obj[key]
        return id(value) in self.open_ids if isinstance(value, (dict, list)) else self.tail_open

    def open_last_item(self, items: list) -> bool:
        if id(items) not in self.open_ids or not items:
            return False
        last = items[-1]
        return id(last) in self.open_ids if isinstance(last, (dict, list)) else self.tail_open


def _read(raw: str) -> tuple[Any, _Spine]:
    """The partially parsed object and what of it may still grow."""
    text = _THINK_BLOCK.sub("", raw) if "<" in raw else raw
    start = -1 if "<" in text and _THINK_OPEN.search(text) else text.find("{")  # still reasoning: nothing yet
    if start < 0:
        return None, _Spine(None, "")
    text = text[start:]
    try:
        data = from_json(text, allow_partial="trailing-strings")
    except (ValueError, TypeError):  # not JSON, or a lone surrogate that cannot be read
        return None, _Spine(None, "")
    return data, _Spine(data, text)


def _blocks(items: Any, spine: _Spine):
    if not isinstance(items, list):
        return
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind not in BLOCK_TYPES or spine.open_value(item, "type"):
            continue  # a type still being written ("para…") is not known yet
        text = item.get("content")
        if not isinstance(text, str):
            continue
        level = item.get("level")
        level = level if isinstance(level, int) and not isinstance(level, bool) and 1 <= level <= 6 else None
        yield PreviewBlock(kind, text, level, not spine.open_container(item))


def _complete_models(items: Any, spine: _Spine, model: type, memo: dict):
    if not isinstance(items, list):
        return
    for item in items:
        if not isinstance(item, dict) or spine.open_container(item):
            continue
        key = (model, repr(item))  # parsed JSON: its repr says all it holds
        if key not in memo:
            try:
                memo[key] = model.model_validate(item)
            except ValidationError:
                memo[key] = None
        if memo[key] is not None:
            yield memo[key]
