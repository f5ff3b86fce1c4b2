"""Forms: coerce what is unambiguous, drop a broken field or form, keep the rest of the reply.

A form is optional guidance (seed 002), so losing one broken form costs the learner
little, while showing a radio group without options, or a field whose answers cannot be
keyed, costs a lot. Drops are flagged dropped_field / dropped_form with an error each.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ValidationError

from tutor.contract.coerce_util import Coercion, as_bool, as_number, format_validation_error
from tutor.contract.models import CHOICE_FIELD_TYPES, FIELD_TYPES, Form, FormField

__all__ = ["coerce_forms", "is_legacy_form", "legacy_form"]

_SNAKE = re.compile(r"^[a-z][a-z0-9_]*$")
_FIELD_ALIASES = {
    "dropdown": "select", "multiselect": "checkbox", "multi_select": "checkbox",
    "checkboxes": "checkbox", "single_choice": "radio", "multiple_choice": "radio",
    "choice": "radio", "input": "text", "string": "text", "short_text": "text",
    "long_text": "textarea", "text_area": "textarea", "integer": "number", "float": "number",
}
_TEXT_KEYS = ("title", "description", "submit_label")
_FIELD_TEXT_KEYS = ("placeholder", "help_text")


def is_legacy_form(value: Any) -> bool:
    """Seed 002's legacy shape: ``{"type": "form", "title": ..., "fields": [...]}``."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("type"), str)
        and value["type"].strip().lower() == "form"
        and isinstance(value.get("fields"), list)
    )


def legacy_form(co: Coercion, value: dict) -> list[dict]:
    co.flag("legacy_form")
    return coerce_forms(co, [value], legacy=True)


def coerce_forms(co: Coercion, value: Any, *, legacy: bool = False) -> list[dict]:
    value = co.decode(value)
    if isinstance(value, dict):
        co.flag("single_form")
        value = [value]
    if not isinstance(value, list):
        co.flag("dropped_form", "content.forms: expected a list of forms")
        return []
    out: list[dict] = []
    for i, item in enumerate(value):
        form = _form(co, item, f"content.forms.{i}", legacy=legacy, index=len(out))
        if form is not None:
            out.append(form)
    return out


def _form(co: Coercion, item: Any, where: str, *, legacy: bool, index: int) -> dict | None:
    item = co.decode(item)
    if not isinstance(item, dict):
        co.flag("dropped_form", f"{where}: a form must be an object")
        return None
    out: dict[str, Any] = {}
    form_id = item.get("id")
    if isinstance(form_id, str) and form_id.strip():
        out["id"] = form_id
    elif legacy:
        # The legacy format has no id; one is needed to key answers. It is not shown.
        out["id"] = _slug(item.get("title")) or f"form_{index + 1}"
        co.synthesized.add(("content", "forms", index, "id"))
    else:
        co.flag("dropped_form", f"{where}.id: a form needs a non-empty id")
        return None
    for key in _TEXT_KEYS:
        if isinstance(item.get(key), str):
            out[key] = item[key]
    optional = as_bool(co, item.get("optional"))
    if optional is not None:
        out["optional"] = optional
    raw_fields = co.decode(item.get("fields"))
    if not isinstance(raw_fields, list):
        co.flag("dropped_form", f"{where}.fields: a form needs a list of fields")
        return None
    fields: list[dict] = []
    seen: set[str] = set()
    for j, raw_field in enumerate(raw_fields):
        fd = _field(co, raw_field, f"{where}.fields.{j}")
        if fd is None:
            continue
        if fd["id"] in seen:
            co.flag("dropped_field", f"{where}.fields.{j}.id: repeats field id {fd['id']!r}")
            continue
        seen.add(fd["id"])
        fields.append(fd)
    if not fields:
        co.flag("dropped_form", f"{where}: no usable fields left")
        return None
    out["fields"] = fields
    return _valid_or_dropped(co, Form, out, "dropped_form", where)


def _field(co: Coercion, item: Any, where: str) -> dict | None:
    if not isinstance(item, dict):
        co.flag("dropped_field", f"{where}: a field must be an object")
        return None
    field_id = item.get("id")
    if not isinstance(field_id, str) or not _SNAKE.match(field_id):
        co.flag("dropped_field", f"{where}.id: {field_id!r} is not a snake_case id")
        return None
    ftype = item.get("type")
    if isinstance(ftype, str) and ftype not in FIELD_TYPES:
        folded = ftype.strip().lower().replace("-", "_").replace(" ", "_")
        folded = _FIELD_ALIASES.get(folded, folded)
        if folded in FIELD_TYPES:
            co.flag("field_type_alias")
            ftype = folded
    if ftype not in FIELD_TYPES:
        co.flag("dropped_field", f"{where}.type: unknown field type {ftype!r}")
        return None
    label = item.get("label")
    if not isinstance(label, str) or not label.strip():
        co.flag("dropped_field", f"{where}.label: a field needs a label")
        return None
    out: dict[str, Any] = {"id": field_id, "type": ftype, "label": label}
    required = as_bool(co, item.get("required"))
    if required is not None:
        out["required"] = required
    elif item.get("required") is not None:
        co.flag("dropped_field_attribute", f"{where}.required: not a boolean")
    for key in _FIELD_TEXT_KEYS:
        if isinstance(item.get(key), str):
            out[key] = item[key]
    for key in ("min", "max"):
        if item.get(key) is not None:
            number = as_number(item[key])
            if number is None or isinstance(item[key], str) and item[key].strip().endswith("%"):
                co.flag("dropped_field_attribute", f"{where}.{key}: not a number")
            else:
                out[key] = number
                if isinstance(item[key], str):
                    co.flag("number_string")
    if "min" in out and "max" in out and out["min"] > out["max"]:
        co.flag("dropped_field_attribute", f"{where}: min greater than max")
        del out["min"], out["max"]
    options = _options(co, item.get("options"), where)
    if options:
        out["options"] = options
    if ftype in CHOICE_FIELD_TYPES and not options:
        co.flag("dropped_field", f"{where}.options: {ftype} field {field_id!r} needs options")
        return None
    return _valid_or_dropped(co, FormField, out, "dropped_field", where)


def _valid_or_dropped(
    co: Coercion, model: type[BaseModel], data: dict, flag: str, where: str
) -> dict | None:
    """`data` if it validates as `model`; otherwise None, flagged, with the reasons."""
    try:
        model.model_validate(data)
    except ValidationError as exc:
        co.flag(flag)
        co.errors.extend(format_validation_error(exc, where))
        return None
    return data


def _options(co: Coercion, value: Any, where: str) -> list[dict] | None:
    value = co.decode(value)
    if value is None:
        return None
    if not isinstance(value, list):
        co.flag("dropped_field_attribute", f"{where}.options: expected a list")
        return None
    out: list[dict] = []
    for opt in value:
        if isinstance(opt, str) and opt.strip():
            # A bare string is both the value and the label, as written.
            co.flag("options_coerced")
            out.append({"value": opt, "label": opt})
            continue
        if not isinstance(opt, dict):
            continue
        val, lab = opt.get("value"), opt.get("label")
        if isinstance(val, (int, float)) and not isinstance(val, bool):
            co.flag("options_coerced")
            val = str(val)
        if not isinstance(lab, str) and isinstance(val, str):
            co.flag("options_coerced")
            lab = val
        if isinstance(val, str) and isinstance(lab, str):
            out.append({"value": val, "label": lab})
        else:
            co.flag("dropped_option", f"{where}.options: option without value/label")
    return out


def _slug(title: Any) -> str:
    if not isinstance(title, str):
        return ""
    slug = re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_")
    return slug if slug and slug[0].isalpha() else ""
