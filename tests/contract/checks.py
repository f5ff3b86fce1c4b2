"""Checks shared by the contract tests, written independently of tutor.contract.honesty
so that the guard is tested against a second implementation, not against itself."""

from __future__ import annotations

import re
from collections.abc import Iterator

from tutor.contract import ParsedReply

# Enum-valued keys: vocabulary the schema checks, which coercion may set (not prose).
VOCABULARY = {"type", "response_type", "emotion", "milestone"}
_INVISIBLE = dict.fromkeys(map(ord, "\ufeff\u200b\u2060\u180e"))
_SIMPLE = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "'": "'"}


def squash(text: str) -> str:
    return " ".join(text.translate(_INVISIBLE).split())


def _json_unescape(text: str) -> str:
    def one(m: re.Match[str]) -> str:
        esc = m.group(1)
        if len(esc) == 5:
            return chr(int(esc[1:], 16))
        return _SIMPLE.get(esc, m.group())

    decoded = re.sub(r"\\(u[0-9a-fA-F]{4}|.)", one, text, flags=re.S)
    return decoded.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def raw_forms(raw: str) -> list[str]:
    forms = [raw]
    for _ in range(2):
        forms.append(_json_unescape(forms[-1]))
    return [squash(f) for f in forms]


def strings(value: object, path: tuple = ()) -> Iterator[tuple[tuple, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key in VOCABULARY:
                continue
            yield from strings(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from strings(item, (*path, i))


def invented_strings(parsed: ParsedReply) -> list[str]:
    """Strings of the accepted response that the raw reply does not contain."""
    if parsed.response is None:
        return []
    data = parsed.response.to_json_dict()
    forms = raw_forms(parsed.raw)
    legacy = "legacy_form" in parsed.flags
    bad = []
    for path, text in strings(data):
        if legacy and len(path) == 4 and path[:2] == ("content", "forms") and path[3] == "id":
            continue  # the legacy format has no form id; one is made up to key answers
        needle = squash(text)
        if needle and not any(needle in form for form in forms):
            bad.append(f"{'.'.join(map(str, path))}: {text!r}")
    return bad
