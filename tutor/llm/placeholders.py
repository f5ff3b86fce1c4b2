"""What placeholder text looks like, for every gate that refuses it: a model's reply
(tutor.llm.usable, `placeholder_text`) and a model judge's feedback
(tutor.teach.judge_verdict, `judge_template_feedback`).

- `is_placeholder(text)`: the whole text stands for text: "...", "…", "string", "<text>",
  "[topic]", "lorem ipsum", "TODO" and the like (an ellipsis inside a sentence is fine);
- `has_placeholder(text)`: a placeholder inside a text: an ellipsis, a name in brackets,
  or the built-in judge's rule wording "explained X ... Y" — for a short text, such as a
  judge's feedback, where any of them means the template was copied.
"""

from __future__ import annotations

import re

from tutor.text import words

__all__ = ["has_placeholder", "is_placeholder"]

_PLACEHOLDER_WORDS = frozenset({
    "string", "str", "text", "content", "markdown", "paragraph", "heading", "title", "label", "value",
    "prompt", "suggestion", "suggestions", "example", "placeholder", "todo", "tbd", "fixme", "xxx", "null",
    "undefined", "your text here", "text here", "insert text here", "your text", "quick reply",
    "quick replies", "short quick replies", "topic id", "topic_id", "etc", "lorem", "lorem ipsum",
    "description", "help text", "caption", "alt",
})
# A name in brackets standing for text: <name>, [name], {name} (empty brackets too).
_BRACKETED_NAME = r"<[^<>]{0,40}>|\[[^\[\]]{0,40}\]|\{[^{}]{0,40}\}"
_LOREM = re.compile(r"^\W*lorem\s+ipsum\b", re.IGNORECASE)
_BRACKETED = re.compile(rf"^\s*(?:{_BRACKETED_NAME})\s*$")
_EDGES = re.compile(r"^[\s\W_]+|[\s\W_]+$")
# Inside a text: ellipses, a bracketed name, and the built-in judge's rules' own "You explained X ... Y".
_PLACEHOLDER_IN = re.compile(rf"\.\.\.|…|{_BRACKETED_NAME}|\b(?:explained|about|mention|covered)\s+[XY]\b")


def is_placeholder(text: str) -> bool:
    """The whole of `text` is a placeholder (blank text is not: that is empty, not a placeholder)."""
    if not text.strip():
        return False  # blank: empty_text
    if not words(text):
        return True  # punctuation only: "...", "…", "—", "?!"
    if _LOREM.match(text) or _BRACKETED.match(text):
        return True
    core = _EDGES.sub("", text).casefold().replace("_", " ")
    return core in _PLACEHOLDER_WORDS or core.replace(" ", "_") in _PLACEHOLDER_WORDS


def has_placeholder(text: str) -> bool:
    """`text` holds a placeholder anywhere: an ellipsis, a bracketed name, "explained X"."""
    return _PLACEHOLDER_IN.search(text) is not None
