"""Schema-aligned coercion: bring a decoded value to the RESPONSE_SCHEMA shape.

Only unambiguous changes are made, each named by a flag; anything that cannot be read is
dropped (with a flag and an error), never invented. A value with no recognisable reply
shape (no ``content``, no blocks, no legacy form) is refused: a reply is never built
around a defaulted ``content``.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from tutor.contract.coerce_forms import coerce_forms, is_legacy_form, legacy_form
from tutor.contract.coerce_meta import coerce_meta
from tutor.contract.coerce_util import (
    Coercion,
    as_bool,
    as_number,
    decode_json_string,
    format_validation_error,
    set_nested,
)
from tutor.contract.models import BLOCK_TYPES, Citation, Media, NextStep
from tutor.contract.safety import is_safe_media_src

__all__ = ["Coercion", "coerce_reply"]

_BLOCK_ALIASES = {
    "text": "paragraph", "p": "paragraph", "markdown": "paragraph", "body": "paragraph",
    "title": "heading", "header": "heading", "subheading": "heading", "h1": "heading",
    "h2": "heading", "h3": "heading", "bullets": "list", "bullet_list": "list",
    "bulleted_list": "list", "numbered_list": "list", "ordered_list": "list",
    "unordered_list": "list", "note": "info", "callout": "info", "caution": "warning",
    "alert": "warning", "blockquote": "quote", "hint": "tip",
}
_CONTENT_KEYS = ("content", "text", "body", "markdown")
_ENVELOPE_DEPTH = 3


def coerce_reply(co: Coercion, value: Any) -> dict | None:
    """The reply as a dict ready for TutorResponse validation, or None (errors in ``co``)."""
    value = co.decode(value)
    value = _unwrap(co, value)
    if isinstance(value, list):
        if not _looks_like_blocks(value):
            co.errors.append("(root): a JSON array that is not a list of text blocks")
            return None
        co.flag("bare_blocks")
        value = {"content": {"text_blocks": value}}
    if not isinstance(value, dict):
        co.errors.append("(root): the reply is not a JSON object")
        return None
    if is_legacy_form(value):
        forms = legacy_form(co, value)
        content: dict[str, Any] = {"text_blocks": []}
        if forms:
            content["forms"] = forms
        return {"content": content, "meta": coerce_meta(co, value.get("meta"), default_type="assessment")}
    if _looks_like_block(value):
        co.flag("bare_blocks")  # one text block on its own
        value = {"content": {"text_blocks": [value]}, "meta": value.get("meta")}
    if "content" not in value and "text_blocks" in value:
        co.flag("flattened_content")
        value = {"content": {k: value[k] for k in ("text_blocks", "forms", "media", "next_step", "citations")
                             if k in value},
                 "meta": value.get("meta")}
    if "content" not in value:
        co.errors.append("content: Field required (the reply has no content object)")
        return None
    content = _content(co, value["content"])
    if content is None:
        return None
    return {"content": content, "meta": coerce_meta(co, value.get("meta"))}


def _looks_like_reply(value: Any) -> bool:
    if isinstance(value, dict):
        return "content" in value or "text_blocks" in value or is_legacy_form(value)
    return isinstance(value, list) and _looks_like_blocks(value)


def _looks_like_block(value: dict) -> bool:
    return (
        isinstance(value.get("type"), str)
        and isinstance(value.get("content"), str)
        and "text_blocks" not in value
    )


def _looks_like_blocks(value: list) -> bool:
    return bool(value) and any(
        isinstance(item, dict) and any(isinstance(item.get(k), str) for k in _CONTENT_KEYS) for item in value
    )


def _unwrap(co: Coercion, value: Any) -> Any:
    """``{"response": {...reply...}}`` -> the reply (single-key envelopes, a few deep).

    Unwrapped only when a reply is found inside: an envelope around anything else is an
    unrelated shape, not a reply.
    """
    inner = value
    decoded_string = False
    for _ in range(_ENVELOPE_DEPTH):
        if not (isinstance(inner, dict) and len(inner) == 1):
            break
        key, child = next(iter(inner.items()))
        if key in ("content", "meta", "text_blocks"):
            break
        inner = decode_json_string(child)
        decoded_string = decoded_string or inner is not child
        if _looks_like_reply(inner):
            co.flag("envelope")
            if decoded_string:
                co.flag("double_encoded")
            return inner
    return value


def _content(co: Coercion, value: Any) -> dict | None:
    value = co.decode(value)
    if isinstance(value, str):
        if not value.strip():
            co.errors.append("content: empty")
            return None
        co.flag("content_string")
        return {"text_blocks": [{"type": "paragraph", "content": value}]}
    if isinstance(value, list):
        co.flag("bare_blocks")
        value = {"text_blocks": value}
    if not isinstance(value, dict):
        co.errors.append("content: expected an object")
        return None
    out: dict[str, Any] = {"text_blocks": _blocks(co, value.get("text_blocks"))}
    if value.get("forms") is not None:
        out["forms"] = coerce_forms(co, value["forms"])
    elif "forms" in value:
        out["forms"] = None
    if value.get("media") is not None:
        out["media"] = _media(co, value["media"])
    elif "media" in value:
        out["media"] = None
    set_nested(co, value, out, "next_step", _next_step)
    if value.get("citations") is not None:
        out["citations"] = _citations(co, value["citations"])
    elif "citations" in value:
        out["citations"] = None
    return out


def _blocks(co: Coercion, value: Any) -> list[dict]:
    value = co.decode(value)
    if value is None:
        co.flag("missing_text_blocks")
        return []
    if isinstance(value, str):
        co.flag("text_blocks_string")
        return [{"type": "paragraph", "content": value}] if value.strip() else []
    if isinstance(value, dict):
        co.flag("single_block")
        value = [value]
    if not isinstance(value, list):
        co.flag("dropped_block", "content.text_blocks: expected a list")
        return []
    out: list[dict] = []
    for i, item in enumerate(value):
        block = _block(co, item, f"content.text_blocks.{i}")
        if block is None:
            continue
        if co.truncated and out and out[-1] == block:
            co.flag("repetition")  # a decoding loop cut at max tokens
            continue
        out.append(block)
    if co.truncated and len(out) >= 2 and _cut_repeat(out[-2]["content"], out[-1]["content"]):
        co.flag("repetition")
        out.pop()
    return out


def _cut_repeat(previous: str, last: str) -> bool:
    """The last item of a cut-off list is a prefix of the one before: a loop, cut."""
    return last != previous and previous.startswith(last)


def _block(co: Coercion, item: Any, where: str) -> dict | None:
    if isinstance(item, str):
        if not item.strip():
            return None
        co.flag("block_string")
        return {"type": "paragraph", "content": item}
    if not isinstance(item, dict):
        co.flag("dropped_block", f"{where}: a block must be an object")
        return None
    content = item.get("content")
    if not isinstance(content, str):
        alias = next((k for k in _CONTENT_KEYS[1:] if isinstance(item.get(k), str)), None)
        if alias is None:
            co.flag("dropped_block", f"{where}.content: a block needs text content")
            return None
        co.flag("block_alias")
        content = item[alias]
    btype = item.get("type")
    if btype not in BLOCK_TYPES:
        folded = btype.strip().lower().replace("-", "_").replace(" ", "_") if isinstance(btype, str) else ""
        if folded in BLOCK_TYPES:
            co.flag("enum_case")
            btype = folded
        elif folded in _BLOCK_ALIASES:
            co.flag("block_alias")
            btype = _BLOCK_ALIASES[folded]
        else:
            co.flag("unknown_block_type")
            btype = "paragraph"
    out: dict[str, Any] = {"type": btype, "content": content}
    if item.get("level") is not None:
        level = as_number(item["level"])
        if level is None or not float(level).is_integer():
            co.flag("heading_level")
        else:
            clamped = min(6, max(1, int(level)))
            if clamped != item["level"]:
                co.flag("heading_level")
            out["level"] = clamped
    elif "level" in item:
        out["level"] = None
    if isinstance(item.get("type"), str) and item["type"].strip().lower() in ("h1", "h2", "h3") and "level" not in out:
        out["level"] = int(item["type"].strip()[1])
    return out


def _media(co: Coercion, value: Any) -> list[dict]:
    value = co.decode(value)
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        co.flag("dropped_media", "content.media: expected a list")
        return []
    out: list[dict] = []
    for i, item in enumerate(value):
        where = f"content.media.{i}"
        if isinstance(item, dict) and isinstance(item.get("src"), str) and not is_safe_media_src(item["src"]):
            co.flag("unsafe_media", f"{where}.src: not an app asset (/media/...) or a host in TUTOR_MEDIA_HOSTS")
            continue
        try:
            media = Media.model_validate(item)
        except ValidationError as exc:
            co.flag("dropped_media")
            co.errors.extend(format_validation_error(exc, where))
            continue
        out.append({k: getattr(media, k) for k in media.model_fields_set})
    return out


def _citations(co: Coercion, value: Any) -> list[dict]:
    """Citations whose shape is right (the server checks their quotes later); a broken
    one is dropped with flag dropped_citation, the reply kept."""
    value = co.decode(value)
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        co.flag("dropped_citation", "content.citations: expected a list")
        return []
    out: list[dict] = []
    for i, item in enumerate(value):
        try:
            citation = Citation.model_validate(item)
        except ValidationError as exc:
            co.flag("dropped_citation")
            co.errors.extend(format_validation_error(exc, f"content.citations.{i}"))
            continue
        out.append({k: getattr(citation, k) for k in citation.model_fields_set})
    return out


def _next_step(co: Coercion, value: Any) -> dict | None:
    if value is None:
        return None
    if isinstance(value, str):
        co.flag("next_step_string")
        return {"prompt": value}
    if not isinstance(value, dict):
        co.flag("dropped_next_step", "content.next_step: expected an object")
        return None
    out: dict[str, Any] = {}
    if isinstance(value.get("prompt"), str) or value.get("prompt", 0) is None:
        out["prompt"] = value["prompt"]
    suggestions = co.decode(value.get("suggestions"))
    if isinstance(suggestions, str):
        co.flag("suggestions_string")
        suggestions = [suggestions]
    if isinstance(suggestions, list):
        kept = [s for s in suggestions if isinstance(s, str) and s.strip()]
        if len(kept) != len(suggestions):
            co.flag("dropped_suggestion")
        if co.truncated:
            deduped = [s for i, s in enumerate(kept) if i == 0 or s != kept[i - 1]]
            if len(deduped) >= 2 and _cut_repeat(deduped[-2], deduped[-1]):
                deduped.pop()
            if len(deduped) != len(kept):
                co.flag("repetition")
            kept = deduped
        out["suggestions"] = kept
    elif "suggestions" in value and suggestions is not None:
        co.flag("dropped_suggestion")
    elif "suggestions" in value:
        out["suggestions"] = None
    if "can_skip" in value:
        can_skip = as_bool(co, value["can_skip"])
        if can_skip is not None or value["can_skip"] is None:
            out["can_skip"] = can_skip
    try:
        NextStep.model_validate(out)
    except ValidationError as exc:  # pragma: no cover - every field is checked above
        co.flag("dropped_next_step")
        co.errors.extend(format_validation_error(exc, "content.next_step"))
        return None
    return out
