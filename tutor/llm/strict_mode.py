"""Rewriting a JSON Schema into the forms structured-output modes accept.

OpenAI's strict `json_schema` mode (and servers imitating it) accepts a subset of JSON
Schema: every object closed (`additionalProperties: false`), every property listed in
`required` (optional ones become nullable instead), no `default`, and only a few keywords.
These functions know nothing of the tutor's reply: tutor.llm.schema applies them to
TutorResponse (strict, tool and bounded schemas). Each returns a new tree and leaves its
input alone.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["STRICT_KEYWORDS", "close_objects", "drop_keywords", "inline_refs", "is_nullable",
           "make_nullable", "make_strict"]

# Keywords every strict-mode implementation we target understands.
STRICT_KEYWORDS = frozenset(
    {"type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf", "description"}
)


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


def make_strict(node: Any, keep: frozenset[str] = STRICT_KEYWORDS) -> Any:
    if isinstance(node, list):
        return [make_strict(item, keep) for item in node]
    if not isinstance(node, dict):
        return node
    out = {
        k: ({n: make_strict(s, keep) for n, s in v.items()} if k == "properties" else make_strict(v, keep))
        for k, v in node.items()
        if k in keep
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


def drop_keywords(node: Any, drop: frozenset[str]) -> Any:
    if isinstance(node, list):
        return [drop_keywords(item, drop) for item in node]
    if not isinstance(node, dict):
        return node
    # "properties" maps names to schemas: a property may be called "title" or "default".
    return {
        k: ({n: drop_keywords(s, drop) for n, s in v.items()} if k == "properties" else drop_keywords(v, drop))
        for k, v in node.items()
        if k == "properties" or k not in drop
    }


def close_objects(node: Any) -> Any:
    if isinstance(node, list):
        return [close_objects(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {k: ({n: close_objects(s) for n, s in v.items()} if k == "properties" else close_objects(v))
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
