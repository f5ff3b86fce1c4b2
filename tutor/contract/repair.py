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

__all__ = ["Repaired", "lex_flags", "repair_region"]

_TOKENS = re.compile(
    r"""
    (?P<str>"(?:[^"\\]|\\.)*(?:"|\\?\Z))          # a string, maybe cut off by the end of text
    |(?P<lc>//[^\n]*)                             # // comment
    |(?P<bc>/\*.*?(?:\*/|\Z))                     # /* comment */
    |(?P<tc>,(?=\s*[}\]]))                        # trailing comma
    |(?P<open>[{\[])
    |(?P<close>[}\]])
    |(?P<sq>(?<=[{\[,:])\s*')                     # single-quote delimiter
    |(?P<smart>[\u201c\u201d\u2018\u2019])         # smart quote outside a string: a delimiter
    |(?P<py>\b(?:True|False|None)\b)
    |(?P<key>(?<=[{,])\s*[A-Za-z_][\w-]*\s*(?=:))  # unquoted key
    """,
    re.S | re.X,
)
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.|\Z)", re.S)
_INVALID_ESCAPE = re.compile(r'\\(?:[^"\\/bfnrtu]|u(?![0-9a-fA-F]{4}))')
_CONTROL = re.compile(r"[\x00-\x1f]")
_AFTER_STRING = re.compile(r"\s*(.)", re.S)
_NAMES = {"lc": "comment", "bc": "comment", "tc": "trailing_comma", "sq": "single_quotes",
          "smart": "smart_quotes", "py": "python_literal", "key": "unquoted_key"}


@dataclass
class Lexed:
    text: str  # the region with impossible escapes made literal
    flags: list[str] = field(default_factory=list)
    truncated: bool = False


def lex_flags(region: str) -> Lexed:
    """One pass: repair names, bracket balance (truncation), literal-backslash rewrite."""
    flags: dict[str, None] = {}
    depth = 0
    pieces: list[str] = []
    last = 0
    truncated = False
    for m in _TOKENS.finditer(region):
        kind = m.lastgroup
        if kind == "str":
            token = m.group()
            if len(token) == 1 or not token.endswith('"') or token.endswith('\\"') and _odd_tail(token):
                truncated = True
            if "\\" in token and _INVALID_ESCAPE.search(token):
                flags["invalid_escape"] = None
                pieces.append(region[last:m.start()])
                pieces.append(_literal_backslashes(token))
                last = m.end()
            if _CONTROL.search(token):
                flags["raw_newline"] = None
            nxt = _AFTER_STRING.match(region, m.end())
            if nxt and nxt.group(1) not in ":,}]" and not truncated:
                flags["unescaped_quote"] = None
        elif kind == "open":
            depth += 1
        elif kind == "close":
            depth -= 1
        else:
            flags[_NAMES[kind]] = None
            if kind == "bc" and not m.group().endswith("*/"):
                truncated = True
    if depth > 0:
        truncated = True
    if truncated:
        flags["truncated"] = None
    if pieces:
        pieces.append(region[last:])
        region = "".join(pieces)
    return Lexed(region, list(flags), truncated)


def _odd_tail(token: str) -> bool:
    """True when the closing quote of ``token`` is itself escaped (string never closed)."""
    backslashes = len(token) - 1 - len(token[:-1].rstrip("\\"))
    return backslashes % 2 == 1


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


_LENIENT = json.JSONDecoder(strict=False)


@dataclass
class Repaired:
    value: Any
    flags: list[str]
    truncated: bool
    used_library: bool


def repair_region(region: str) -> Repaired:
    """Parse a region the strict decoder rejected. The library runs at most once."""
    lexed = lex_flags(region)
    text = lexed.text
    # Fixing escapes alone (or raw control characters in strings) often suffices; the
    # standard decoder is much cheaper than the repair library.
    try:
        value, end = _LENIENT.raw_decode(text)
    except (json.JSONDecodeError, RecursionError):
        pass
    else:
        if not text[end:].strip():
            return Repaired(value, lexed.flags, lexed.truncated, used_library=False)
    try:
        value = json_repair.repair_json(text, return_objects=True, skip_json_loads=True)
    except (ValueError, RecursionError):
        value = None
    flags = lexed.flags or ["syntax_repair"]
    return Repaired(value, flags, lexed.truncated, used_library=True)
