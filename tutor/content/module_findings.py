"""What a module file's check finds and where (tutor.content.modules.check_text): the rules
pydantic cannot see (uniqueness, references, empty parts, template variables, words that
could never match, callouts and media files), pydantic's own errors and YAML's duplicate
keys, each as a finding at a path in the file, and the line each path is on."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from tutor.content.module_format import _CALLOUT, CALLOUT_TYPES, NAVIGATION_WORDS
from tutor.contract.models import SNAKE_CASE
from tutor.i18n import available_languages, supported
from tutor.text import unresolved_variables, words

if TYPE_CHECKING:  # pragma: no cover
    from tutor.content.module_format import Module, Topic

__all__ = ["Finding", "Loc", "line_of", "map_nodes", "semantic_findings", "validation_finding"]

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class Finding:
    path: Loc
    message: str
    offset: int = 0  # lines below the start of the value (multi-line text)


class _Rules:
    """Rules pydantic cannot see: uniqueness, references, empty parts, template variables,
    words that could never match, callouts and media files."""

    def __init__(self, module: Module, assets_dir: Path | None) -> None:
        self.module, self.assets_dir = module, assets_dir
        self.found: list[Finding] = []
        self.seen: dict[str, set[str]] = {"phase": set(), "section": set(), "topic": set(), "form": set()}

    def add(self, path: Loc, message: str, offset: int = 0) -> None:
        self.found.append(Finding(path, message, offset))

    def unique(self, kind: str, value: str, path: Loc) -> None:
        if value in self.seen[kind]:
            self.add(path, f"duplicate {kind} id {value!r}")
        self.seen[kind].add(value)

    def run(self) -> list[Finding]:
        language = self.module.language
        if supported(language) == "en" and language.split("-")[0].lower() != "en":
            self.add(("language",), f"language {language!r} has no message catalogue (use one of "
                     f"{', '.join(available_languages())}, or add tutor/locales/<language>/LC_MESSAGES/tutor.po)")
        for p, phase in enumerate(self.module.phases):
            self.unique("phase", phase.id, ("phases", p, "id"))
            if not phase.sections:
                self.add(("phases", p), f"phase {phase.id!r} has no sections")
            for s, section in enumerate(phase.sections):
                where: Loc = ("phases", p, "sections", s)
                self.unique("section", section.id, (*where, "id"))
                if not section.topics:
                    self.add(where, f"section {section.id!r} has no topics")
                for t, topic in enumerate(section.topics):
                    self.topic(topic, (*where, "topics", t))
        defaults = {name: var.default for name, var in self.module.variables.items()}
        for name, offset in unresolved_variables(self.module.instructions, defaults):
            hint = "declare it under variables: with a default"
            self.add(("instructions",), f"unresolved variable '{{{{{name}}}}}' ({hint})", offset)
        return self.found

    def topic(self, topic: Topic, path: Loc) -> None:
        self.unique("topic", topic.id, (*path, "id"))
        phrases = [("title", (*path, "title"), topic.title)]
        phrases += [("keyword", (*path, "keywords", i), v) for i, v in enumerate(topic.keywords)]
        phrases += [("alias", (*path, "aliases", i), v) for i, v in enumerate(topic.aliases)]
        for kind, where, value in phrases:
            if not words(value):
                self.add(where, f"{kind} {value!r} has no letters or digits to match")
            elif " ".join(words(value)) in NAVIGATION_WORDS:
                self.add(where, f"{kind} {value!r} is reserved for navigation and cannot mark a topic")
        if topic.form is not None:
            self.unique("form", topic.form.id, (*path, "form", "id"))
            for i, covered in enumerate(topic.form.covers or ()):
                if covered not in self.module.topic_ids:
                    message = f"form {topic.form.id!r} covers unknown topic {covered!r}"
                    self.add((*path, "form", "covers", i), message)
        for offset, line in enumerate((topic.content or "").splitlines()):
            match = _CALLOUT.match(line)
            if match and match.group(1).lower() not in CALLOUT_TYPES:
                allowed = ", ".join(f"!!! {kind}" for kind in CALLOUT_TYPES)
                self.add((*path, "content"), f"unknown callout {line.strip()!r} (use {allowed})", offset)
        for i, item in enumerate(topic.media):
            self.media(item.src, (*path, "media", i, "src"))

    def media(self, src: str, path: Loc) -> None:
        if self.assets_dir is None or not src.startswith("/media/"):
            return
        prefix = f"/media/{self.module.id}/"
        if not src.startswith(prefix):
            self.add(path, f"media {src!r} must live under {prefix}")
        elif not (self.assets_dir / src.lstrip("/")).is_file():
            self.add(path, f"media file not found: {src!r} (expected in assets{src})")


def semantic_findings(module: Module, assets_dir: Path | None = None) -> list[Finding]:
    return _Rules(module, assets_dir).run()


def map_nodes(node: yaml.Node | None, path: Loc, lines: dict[Loc, tuple[int, int]]) -> list[Finding]:
    """path -> (line of the value, line where its text starts), 1-based; and duplicate keys,
    which YAML itself silently resolves to the last one."""
    if node is None:
        return []
    start = node.start_mark.line + 1
    block = isinstance(node, yaml.ScalarNode) and node.style in ("|", ">")
    lines[path] = (start, start + 1 if block else start)
    out = []
    if isinstance(node, yaml.MappingNode):
        keys: set[str] = set()
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else str(key.start_mark.line)
            if name in keys:
                message = f"duplicate key {name!r} (YAML keeps only the last one)"
                out.append(Finding((*path, name), message))
            keys.add(name)
            out += map_nodes(value, (*path, name), lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            out += map_nodes(item, (*path, i), lines)
    return out


def validation_finding(err: dict[str, Any]) -> Finding:
    loc: Loc = tuple(err.get("loc", ()))
    kind, value = err.get("type"), err.get("input")
    where = _dotted(loc) or "(module)"
    if kind == "extra_forbidden":
        return Finding(loc, f"unknown key {loc[-1]!r} in {_dotted(loc[:-1]) or 'the module'}")
    if kind == "missing":
        return Finding(loc[:-1], f"{_dotted(loc[:-1]) or 'module'}: missing required key {loc[-1]!r}")
    if kind == "string_pattern_mismatch" and err.get("ctx", {}).get("pattern") == SNAKE_CASE:
        rule = "a-z, 0-9, _; starting with a letter"
        return Finding(loc, f"{where}: {value!r} is not a snake_case id ({rule})")
    message = str(err.get("msg", "invalid")).removeprefix("Value error, ")
    shown = f" (got {value!r})" if isinstance(value, (str, int, float, bool)) or value is None else ""
    return Finding(loc, f"{where}: {message}{shown}")


def _dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def line_of(finding: Finding, lines: dict[Loc, tuple[int, int]]) -> int:
    path = finding.path
    while path and path not in lines:  # a missing key: point at its parent
        path = path[:-1]
    start, text_start = lines.get(path, (1, 1))
    return text_start + finding.offset if finding.offset else start
