"""Shared bookkeeping for schema-aligned coercion: every change gets a name."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

__all__ = ["Coercion", "as_bool", "as_number", "decode_json_string", "format_validation_error"]


class Coercion:
    """Collects flags (one short name per kind of change), errors, and synthesized paths."""

    def __init__(self, *, truncated: bool = False) -> None:
        self._flags: dict[str, None] = {}
        self.errors: list[str] = []
        # Paths of string values coercion created rather than copied from the reply
        # (a legacy form's id); the honesty guard skips exactly these.
        self.synthesized: set[tuple] = set()
        self.truncated = truncated

    @property
    def flags(self) -> list[str]:
        return list(self._flags)

    def flag(self, name: str, error: str | None = None) -> None:
        self._flags[name] = None
        if error:
            self.errors.append(error)

    def decode(self, value: Any) -> Any:
        """A JSON string holding an object or array is decoded once (flag double_encoded)."""
        decoded = decode_json_string(value)
        if decoded is not value:
            self.flag("double_encoded")
        return decoded


def decode_json_string(value: Any) -> Any:
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
            try:
                decoded = json.loads(stripped)
            except (ValueError, RecursionError):
                return value
            if isinstance(decoded, (dict, list)):
                return decoded
    return value


def as_number(value: Any) -> float | int | None:
    """A finite number from a number or a numeric string ("45", " 45.5 ", "45%")."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        text = value.strip().rstrip("%").strip()
        try:
            number = float(text)
        except ValueError:
            return None
        if not math.isfinite(number):
            return None
        return int(number) if number.is_integer() and "." not in text else number
    return None


def as_bool(co: Coercion, value: Any) -> bool | None:
    """A boolean, or "true"/"false" written as a string (flag bool_string); else None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        co.flag("bool_string")
        return value.strip().lower() == "true"
    return None


def set_nested(
    co: Coercion,
    value: dict,
    out: dict,
    key: str,
    coerce: Callable[[Coercion, Any], dict | None],
) -> None:
    """Coerce the optional sub-object `value[key]` into `out[key]`: left out when it could
    not be read, kept as null when the model wrote null."""
    if key in value:
        coerced = coerce(co, co.decode(value[key]))
        if coerced is not None or value[key] is None:
            out[key] = coerced


def format_validation_error(exc: ValidationError, prefix: str = "") -> list[str]:
    out = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in (prefix, *err.get("loc", ())) if p != "") or "(root)"
        msg = err.get("msg", "invalid")
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, "):]
        out.append(f"{loc}: {msg}")
    return out
