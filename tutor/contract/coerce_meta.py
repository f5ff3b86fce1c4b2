"""Meta: the reply's metadata is advisory (the server owns progress), so it is coerced
generously and a field that cannot be read is dropped rather than failing the reply."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from tutor.contract.coerce_util import Coercion, as_number, set_nested
from tutor.contract.models import EMOTIONS, MILESTONES, RESPONSE_TYPES, Meta

__all__ = ["DEFAULT_RESPONSE_TYPE", "coerce_meta"]

DEFAULT_RESPONSE_TYPE = "conversational"
_MODULE_STATE_TEXT = ("current_phase", "current_section")
_MODULE_STATE_INTS = ("sections_completed", "total_sections")


def coerce_meta(co: Coercion, value: Any, *, default_type: str = DEFAULT_RESPONSE_TYPE) -> dict:
    value = co.decode(value)
    if not isinstance(value, dict):
        co.flag("defaulted_meta")
        return {"response_type": default_type}
    out: dict[str, Any] = {}
    rtype = _enum(co, value.get("response_type"), RESPONSE_TYPES)
    if rtype is None:
        co.flag("defaulted_meta")
        rtype = default_type
    out["response_type"] = rtype
    if "emotion" in value and value["emotion"] is not None:
        emotion = _enum(co, value["emotion"], EMOTIONS)
        if emotion is None:
            co.flag("dropped_meta_field", f"meta.emotion: {value['emotion']!r} is not an emotion")
        else:
            out["emotion"] = emotion
    elif "emotion" in value:
        out["emotion"] = None
    set_nested(co, value, out, "progress", _progress)
    set_nested(co, value, out, "module_state", _module_state)
    try:
        Meta.model_validate(out)
    except ValidationError:
        co.flag("dropped_meta_field", "meta: could not be read; kept response_type only")
        return {"response_type": rtype}
    return out


def _enum(co: Coercion, value: Any, allowed: tuple[str, ...]) -> str | None:
    if not isinstance(value, str):
        return None
    if value in allowed:
        return value
    folded = value.strip().lower()
    if folded in allowed:
        co.flag("enum_case")
        return folded
    return None


def _progress(co: Coercion, value: Any) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        co.flag("dropped_meta_field", "meta.progress: expected an object")
        return None
    out: dict[str, Any] = {}
    if value.get("percentage") is not None:
        raw = value["percentage"]
        number = as_number(raw)
        if number is None or not 0 <= number <= 100:
            co.flag("dropped_meta_field", f"meta.progress.percentage: {raw!r} is not 0-100")
        else:
            if isinstance(raw, str):
                co.flag("percentage_string")
            out["percentage"] = number
    elif "percentage" in value:
        out["percentage"] = None
    for key in ("covered_topics", "newly_covered"):
        if key not in value:
            continue
        topics = value[key]
        if isinstance(topics, str):
            co.flag("topics_string")
            topics = [topics]
        if topics is None or isinstance(topics, list) and all(isinstance(t, str) for t in topics):
            out[key] = topics
        else:
            co.flag("dropped_meta_field", f"meta.progress.{key}: expected a list of strings")
    if value.get("remaining_topics") is not None:
        remaining = _whole(value["remaining_topics"])
        if remaining is not None:
            out["remaining_topics"] = remaining
            if isinstance(value["remaining_topics"], str):
                co.flag("number_string")
        else:
            co.flag("dropped_meta_field", "meta.progress.remaining_topics: not a whole number")
    elif "remaining_topics" in value:
        out["remaining_topics"] = None
    if "milestone" in value:
        milestone = _milestone(co, value["milestone"])
        if milestone is not None or value["milestone"] is None:
            out["milestone"] = milestone
    return out


def _milestone(co: Coercion, value: Any) -> str | None:
    if value is None or value in MILESTONES:
        return value
    number = as_number(value)
    if number is not None and float(number).is_integer():
        candidate = f"{int(number)}%"
        if candidate in MILESTONES:
            co.flag("milestone_format")
            return candidate
    co.flag("dropped_meta_field", f"meta.progress.milestone: {value!r} is not a milestone")
    return None


def _module_state(co: Coercion, value: Any) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        co.flag("dropped_meta_field", "meta.module_state: expected an object")
        return None
    out: dict[str, Any] = {}
    for key in _MODULE_STATE_TEXT:
        if isinstance(value.get(key), str) or key in value and value[key] is None:
            out[key] = value[key]
    for key in _MODULE_STATE_INTS:
        if key not in value:
            continue
        if value[key] is None:
            out[key] = None
            continue
        number = _whole(value[key])
        if number is not None:
            out[key] = number
        else:
            co.flag("dropped_meta_field", f"meta.module_state.{key}: not a whole number")
    return out


def _whole(value: Any) -> int | None:
    number = as_number(value)
    if number is None or number < 0 or not float(number).is_integer():
        return None
    return int(number)
