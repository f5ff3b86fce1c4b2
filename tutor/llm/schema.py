"""RESPONSE_SCHEMA as JSON Schema, adapted to what provider-side enforcement accepts.

OpenAI's strict `json_schema` mode (and servers imitating it) accepts a subset of JSON
Schema: every object closed (`additionalProperties: false`), every property listed in
`required` (optional ones become nullable instead), no `default`, and only a few keywords.
Constraints we drop here (patterns, bounds) are still enforced when the reply is parsed,
so nothing is lost: the provider guarantees the shape, the contract checks the rest.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from typing import Any

from pydantic import BaseModel

from tutor.contract import TutorResponse

SCHEMA_NAME = "tutor_response"

# Keywords every strict-mode implementation we target understands.
_STRICT_KEYWORDS = frozenset(
    {"type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf", "description"}
)
# For a tool's input_schema (Anthropic) constraints help the model, so only noise goes.
_NOISE_KEYWORDS = frozenset({"title", "default", "$schema", "examples"})


def strict_schema(model: type[BaseModel] = TutorResponse) -> dict[str, Any]:
    """A fresh copy of the strict-mode schema for `model` (callers may mutate it)."""
    return copy.deepcopy(_strict_cached(model))


def tool_schema(model: type[BaseModel] = TutorResponse) -> dict[str, Any]:
    """A self-contained (no $ref) schema for a tool's input, optional fields left optional."""
    return copy.deepcopy(_tool_cached(model))


@lru_cache(maxsize=8)
def _strict_cached(model: type[BaseModel]) -> dict[str, Any]:
    return _make_strict(inline_refs(model.model_json_schema()))


@lru_cache(maxsize=8)
def _tool_cached(model: type[BaseModel]) -> dict[str, Any]:
    return _close_objects(_drop_keywords(inline_refs(model.model_json_schema()), _NOISE_KEYWORDS))


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """Replace every local `$ref` with the definition it names; drop `$defs`.

    Inlining is the most portable form: llama.cpp's grammar converter and some proxies
    handle `$ref` poorly, and TutorResponse has no recursive types.
    """
    defs = schema.get("$defs", {})

    def resolve(node: Any, seen: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [resolve(item, seen) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref.removeprefix("#/$defs/")
            if name in seen:
                raise ValueError(f"recursive schema reference {ref} cannot be inlined")
            target = resolve(copy.deepcopy(defs[name]), seen + (name,))
            siblings = {k: resolve(v, seen) for k, v in node.items() if k != "$ref"}
            return {**target, **siblings}
        return {k: resolve(v, seen) for k, v in node.items() if k != "$defs"}

    return resolve(schema, ())


def _make_strict(node: Any) -> Any:
    if isinstance(node, list):
        return [_make_strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {
        k: ({n: _make_strict(s) for n, s in v.items()} if k == "properties" else _make_strict(v))
        for k, v in node.items()
        if k in _STRICT_KEYWORDS
    }
    if "properties" in out:
        originally_required = set(node.get("required", ()))
        props = out["properties"]
        for name, sub in list(props.items()):
            if name not in originally_required and not is_nullable(sub):
                props[name] = make_nullable(sub)
        out["type"] = "object"
        out["required"] = list(props)
        out["additionalProperties"] = False
    elif out.get("type") == "object":
        out["additionalProperties"] = False
    return out


def _drop_keywords(node: Any, drop: frozenset[str]) -> Any:
    if isinstance(node, list):
        return [_drop_keywords(item, drop) for item in node]
    if not isinstance(node, dict):
        return node
    # "properties" maps names to schemas: a property may be called "title" or "default".
    return {
        k: ({n: _drop_keywords(s, drop) for n, s in v.items()} if k == "properties" else _drop_keywords(v, drop))
        for k, v in node.items()
        if k == "properties" or k not in drop
    }


def _close_objects(node: Any) -> Any:
    if isinstance(node, list):
        return [_close_objects(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {k: ({n: _close_objects(s) for n, s in v.items()} if k == "properties" else _close_objects(v))
           for k, v in node.items()}
    if "properties" in out:
        out["additionalProperties"] = False
    return out


def is_nullable(node: dict[str, Any]) -> bool:
    kind = node.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    return any(is_nullable(alt) for alt in node.get("anyOf", ()) if isinstance(alt, dict))


def make_nullable(node: dict[str, Any]) -> dict[str, Any]:
    if "anyOf" in node:
        return {**node, "anyOf": [*node["anyOf"], {"type": "null"}]}
    kind = node.get("type")
    if isinstance(kind, str) and kind not in ("object", "array"):
        out = {**node, "type": [kind, "null"]}
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
        return out
    return {"anyOf": [node, {"type": "null"}]}
