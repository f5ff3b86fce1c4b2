"""Reading a YAML document once: its nodes (for ``file:line`` messages and duplicate keys)
and its data from one parse, with libyaml's parser when PyYAML has it. The module files,
the safety file and its exemplar bank are read at every start and by `tutor modules` and
`tutor safety` commands; the pure-Python parser, run twice per file, took most of a 25 s
`tutor modules list` (measured: 14 s of it in the safety bank's files)."""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["compose_and_load", "invalid_yaml"]

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def compose_and_load(text: str) -> tuple[yaml.Node | None, Any]:
    """(root node, data) of the one document in `text`, as yaml.compose and yaml.safe_load
    give them. Raises yaml.YAMLError (with `problem_mark`) for text that is not YAML."""
    loader = _LOADER(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()
    return node, data


def invalid_yaml(exc: yaml.YAMLError, source: str) -> str:
    """The ``source:line: invalid YAML: reason`` message for a parse error."""
    mark = getattr(exc, "problem_mark", None)
    line = mark.line + 1 if mark is not None else 1
    reason = getattr(exc, "problem", None) or str(exc)
    return f"{source}:{line}: invalid YAML: {reason}"
