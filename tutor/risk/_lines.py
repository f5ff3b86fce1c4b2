"""YAML locations for author-facing messages: a path into the data -> its line in the file.
(The same approach as tutor/content/modules.py, kept separate so tutor.risk does not import it.)"""

from __future__ import annotations

from typing import Any

import yaml

from tutor.yaml_text import compose_and_load, invalid_yaml

Loc = tuple[str | int, ...]
KEY = "[key]"  # as pydantic marks a mapping key: (*path, name, KEY) is the key's own line


def parse_yaml(text: str, source: str) -> tuple[Any, dict[Loc, int], list[str]]:
    """(data, path -> 1-based line, problems). Duplicate keys are problems: YAML would
    silently keep the last one."""
    try:
        root, data = compose_and_load(text)
    except yaml.YAMLError as exc:
        return None, {}, [invalid_yaml(exc, source)]
    lines: dict[Loc, int] = {}
    problems: list[tuple[int, str]] = []
    _walk(root, (), lines, problems)
    return data, lines, [f"{source}:{line}: {message}" for line, message in sorted(problems)]


def _walk(node: yaml.Node | None, path: Loc, lines: dict[Loc, int], problems: list[tuple[int, str]]) -> None:
    if node is None:
        return
    lines[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else str(key.start_mark.line)
            if name in seen:
                problems.append((key.start_mark.line + 1, f"duplicate key {name!r} (YAML keeps only the last one)"))
            seen.add(name)
            lines[(*path, name, KEY)] = key.start_mark.line + 1
            _walk(value, (*path, name), lines, problems)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, (*path, i), lines, problems)


def line_of(path: Loc, lines: dict[Loc, int]) -> int:
    while path and path not in lines:  # a missing key: point at its parent
        path = path[:-1]
    return lines.get(path, 1)


def dotted(path: Loc) -> str:
    out = ""
    for part in path:
        if part == KEY:
            continue
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
