"""Syntax repair: name what is wrong with a JSON-ish region, then let json-repair fix it.

json-repair does the repairing but its log does not name most repairs (a trailing comma
is fixed silently), so one linear regex pass over the region names them here. The same
pass rewrites backslashes that cannot be JSON escapes (Windows paths, LaTeX) so that they
survive as written instead of being "normalised" into tabs and backspaces.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import json_repair

__all__ = ["MAX_DEPTH", "Repaired", "escape_inner_quotes", "lex_flags", "repair_region"]

# Terminated double-quoted strings. Replacing each by "" leaves a skeleton in which the
# structure and every repair that lives outside strings can be found with plain searches.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_SKELETON_FLAGS = (
    ("trailing_comma", re.compile(r",\s*[}\]]")),
    ("comment", re.compile(r"//|/\*")),
    ("single_quotes", re.compile(r"[{\[,:]\s*'")),
    ("smart_quotes", re.compile("[\u201c\u201d\u2018\u2019]")),
    ("python_literal", re.compile(r"\b(?:True|False|None)\b")),
    ("unquoted_key", re.compile(r"[{,]\s*[A-Za-z_][\w-]*\s*:")),
    ("unescaped_quote", re.compile(r'""[ \t]*[^\s:,}\]"/]')),
)
_UNTERMINATED = re.compile(r'(?<!")"(?:[^"\\]|\\.)*\Z', re.S)
_BRACKETS = re.compile(r"[{}\[\]]")
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.|\Z)", re.S)
_INVALID_ESCAPE = re.compile(r'\\(?:[^"\\/bfnrtu]|u(?![0-9a-fA-F]{4}))')
_CONTROL_CHARS = "\n\r\t"
# A reply nests about ten levels deep (content > forms > fields > options). json-repair
# is quadratic or worse on deeply nested garbage ('{' * 20_000 takes seconds), so a
# region nested deeper than this is not handed to it.
MAX_DEPTH = 64


@dataclass
class Lexed:
    text: str  # the region with impossible escapes made literal
    flags: list[str] = field(default_factory=list)
    truncated: bool = False
    after: str = ""  # what follows the region's first complete structure (strings as "")
    depth: int = 0  # deepest bracket nesting seen (counting stops past MAX_DEPTH)


def lex_flags(region: str) -> Lexed:
    """Name the repairs a region needs, detect truncation, make literal backslashes literal.

    Linear: a few C-level regex passes, no per-character Python loop.
    """
    flags: list[str] = []
    if "\\" in region and _INVALID_ESCAPE.search(region):
        fixed = _STRING.sub(_fix_string, region)
        if fixed != region:
            flags.append("invalid_escape")
            region = fixed
    skeleton = _STRING.sub('""', region)
    if sum(region.count(c) for c in _CONTROL_CHARS) > sum(skeleton.count(c) for c in _CONTROL_CHARS):
        flags.append("raw_newline")  # control characters inside strings
    for name, pattern in _SKELETON_FLAGS:
        if pattern.search(skeleton):
            flags.append(name)
    depth = deepest = 0
    end = None
    for m in _BRACKETS.finditer(skeleton):
        depth += 1 if m.group() in "{[" else -1
        deepest = max(deepest, depth)
        if depth <= 0 and end is None:
            end = m.end()
        if deepest > MAX_DEPTH:
            break
    truncated = end is None or bool(_UNTERMINATED.search(skeleton))
    if truncated:
        flags.append("truncated")
    return Lexed(region, flags, truncated, skeleton[end:] if end is not None else "", deepest)


def _fix_string(m: re.Match[str]) -> str:
    token = m.group()
    if "\\" in token and _INVALID_ESCAPE.search(token):
        return _literal_backslashes(token)
    return token


def _literal_backslashes(token: str) -> str:
    """Double backslashes that the writer meant literally, in a string that has at least
    one escape JSON cannot have (so its writer was not escaping backslashes).

    ``\\b`` and ``\\f`` before a letter are LaTeX (``\\beta``, ``\\frac``); ``\\n``, ``\\r``,
    ``\\t`` before a lowercase letter are LaTeX or path parts (``\\nabla``, ``\\theta``,
    ``C:\\new``). ``\\"``, ``\\\\``, ``\\/`` and ``\\uXXXX`` keep their JSON meaning.
    """

    def fix(m: re.Match[str]) -> str:
        esc = m.group(1)
        end = m.end()
        following = token[end] if end < len(token) else ""
        if esc == "" or esc in '"\\/' or (len(esc) == 5):
            return m.group()
        if esc in "bf" and following.isalpha():
            return "\\" + m.group()
        if esc in "nrt" and following.islower():
            return "\\" + m.group()
        if esc in "bfnrt":
            return m.group()
        return "\\" + m.group()

    return _ESCAPE.sub(fix, token)


# A string in which a quote ends the string only if what follows can follow a JSON
# string: a delimiter (: } ] or , before another value), a next key, or the end.
_STRING_INNER_QUOTES = re.compile(
    r"""
    "((?:[^"\\]|\\.|"(?!\s*(?:[:}\]]|,\s*(?:["{\[\]}\d-]|true\b|false\b|null\b)|"\s*:|\Z)))*)"
    """,
    re.S | re.X,
)
_BODY_TOKENS = re.compile(r'\\.|"|[^"\\]+', re.S)


def escape_inner_quotes(text: str) -> str:
    """Escape quotes that cannot be closing quotes (``"the "fight or flight" response"``).

    json-repair guesses here too, but may silently drop the rest of the sentence
    (``"He said "no, never" and left"`` -> ``"He said "``); deciding by what follows each
    quote keeps the whole sentence.
    """

    def one(m: re.Match[str]) -> str:
        body = m.group(1)
        if '"' not in body:
            return m.group()
        fixed = "".join('\\"' if tok == '"' else tok for tok in _BODY_TOKENS.findall(body))
        return f'"{fixed}"'

    return _STRING_INNER_QUOTES.sub(one, text)


_LENIENT = json.JSONDecoder(strict=False)


@dataclass
class Repaired:
    value: Any
    flags: list[str]
    truncated: bool
    after: str  # text after the repaired structure (strings shown as "")
    used_library: bool


def repair_region(region: str) -> Repaired:
    """Parse a region (starting at '{' or '[') that the strict decoder rejected.

    The repair library runs at most once; fixing escapes or accepting raw control
    characters in strings often suffices, and the standard decoder is much cheaper.
    """
    lexed = lex_flags(region)
    text = lexed.text
    if "unescaped_quote" in lexed.flags:
        # Stray quotes also fooled the first pass's view of the structure: look again.
        text = escape_inner_quotes(text)
        again = lex_flags(text)
        flags = [f for f in lexed.flags if f != "truncated"] + (["truncated"] if again.truncated else [])
        lexed = Lexed(text, flags, again.truncated, again.after, max(lexed.depth, again.depth))
    try:
        value, _end = _LENIENT.raw_decode(text)
    except (json.JSONDecodeError, RecursionError):
        pass
    else:
        return Repaired(value, lexed.flags, lexed.truncated, lexed.after, used_library=False)
    if lexed.depth > MAX_DEPTH:
        return Repaired(None, [*lexed.flags, "too_deep"], lexed.truncated, lexed.after, used_library=False)
    try:
        # The leading space is deliberate: json-repair 0.6x runs a per-character Python
        # pre-scan over the whole input when it starts with a bracket at index 0 (twice
        # the cost of the repair itself on big replies); the result is the same.
        value = json_repair.repair_json(" " + text, return_objects=True, skip_json_loads=True)
    except Exception:  # noqa: BLE001 - a heuristic library's crash must not fail a turn
        value = None
    flags = lexed.flags or ["syntax_repair"]
    return Repaired(value, flags, lexed.truncated, lexed.after, used_library=True)
