"""Author modules: checking module files and loading a directory of them.

A module that fails the check is never served: `load_library()` keeps it out of
`Library.modules` and `Library.get()` raises `ModuleNotServable` with the same messages
`tutor modules check` prints (``file:line: message``). The format itself (pydantic models,
published as JSON Schema at modules/module.schema.json) is `tutor.content.module_format`; its names
are re-exported here.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from tutor.content.material import load_sources, material_findings
from tutor.content.module_format import (
    _CALLOUT,
    ASSETS_DIR,
    CALLOUT_TYPES,
    DEFAULT_MILESTONES,
    NAVIGATION_WORDS,
    REPO_ROOT,
    Module,
    ModuleForm,
    ModuleNotServable,
    Phase,
    Section,
    Topic,
    Variable,
    schema_json,
)
from tutor.contract.models import SNAKE_CASE
from tutor.i18n import available_languages, supported
from tutor.risk.config import (
    DEFAULT_SAFETY_FILE,
    SafetyConfig,
    SafetyConfigError,
    load_safety,
    merged,
    override_findings,
)
from tutor.risk.semantic import BankError, SemanticScreen, semantic_screen
from tutor.text import unresolved_variables, words
from tutor.understand.intent_bank import lesson_talk

log = logging.getLogger(__name__)

__all__ = [
    "ASSETS_DIR",
    "CALLOUT_TYPES",
    "DEFAULT_MILESTONES",
    "REPO_ROOT",
    "CheckResult",
    "Library",
    "Module",
    "ModuleForm",
    "ModuleNotServable",
    "Phase",
    "Section",
    "Topic",
    "Variable",
    "check_file",
    "check_text",
    "public_problem",
    "load_library",
    "modules_dir",
    "schema_json",
]

# --- checking -----------------------------------------------------------------------------

Loc = tuple[str | int, ...]


@dataclass(frozen=True)
class _Finding:
    path: Loc
    message: str
    offset: int = 0  # lines below the start of the value (multi-line text)


@dataclass
class CheckResult:
    module: Module | None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.module is not None and not self.problems


def check_text(
    text: str,
    source: str,
    expected_id: str | None = None,
    assets_dir: Path | None = None,
    base_dir: Path | None = None,
    safety: SafetyConfig | None = None,
) -> CheckResult:
    """Check one module's YAML text; problems read ``source:line: message``. With `base_dir`
    (the module file's folder) its source files are read and checked too."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        reason = getattr(exc, "problem", None) or str(exc)
        return CheckResult(None, [f"{source}:{line}: invalid YAML: {reason}"])
    if not isinstance(data, dict):
        shape = "a module file must be a mapping with id, title, description, language and phases"
        return CheckResult(None, [f"{source}:1: {shape}"])
    lines: dict[Loc, tuple[int, int]] = {}
    findings = _map_nodes(root, (), lines)
    try:
        module: Module | None = Module.model_validate(data)
    except ValidationError as exc:
        findings += [_validation_finding(err) for err in exc.errors()]
        module = None
    if module is not None:
        findings += semantic_findings(module, assets_dir)
        loaded = None
        if base_dir is not None:
            loaded, source_problems = load_sources(module, base_dir)
            findings += [_Finding(where, message) for where, message in source_problems]
            module._loaded_sources = loaded
        findings += [_Finding(where, message) for where, message in material_findings(module, loaded)]
        if safety is not None:  # the global safety configuration this module's `safety:` changes
            findings += [_Finding(("safety", *where), message)
                         for where, message in override_findings(safety, module.safety)]
        if expected_id is not None and module.id != expected_id:
            message = f"module id {module.id!r} must equal the file name {expected_id!r}"
            findings.append(_Finding(("id",), message))
    located = sorted(((_line_of(f, lines), f.message) for f in findings), key=lambda lm: lm[0])
    problems = [f"{source}:{line}: {message}" for line, message in located]
    return CheckResult(module if not problems else None, problems)


def check_file(
    path: str | Path, source: str | None = None, assets_dir: Path | None = None
) -> CheckResult:
    path = Path(path)
    source = source or _display(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return CheckResult(None, [f"{source}:1: cannot read file: {exc}"])
    assets = assets_dir if assets_dir is not None else ASSETS_DIR
    try:
        safety, safety_problems = load_safety(safety_file(path.parent)), []
    except SafetyConfigError as exc:  # no screen, no lesson: the module waits for a sound file
        safety, safety_problems = None, [*str(exc).splitlines(), f"{source}:1: not served until the safety "
                                         f"configuration {_display(safety_file(path.parent))} passes its check"]
    result = check_text(text, source, expected_id=path.stem, assets_dir=assets, base_dir=path.parent, safety=safety)
    if safety_problems:
        return CheckResult(None, [*result.problems, *safety_problems])
    return result


def safety_file(directory: Path) -> Path:
    """The global safety configuration for modules in `directory`: its safety/default.yaml,
    or the one shipped with Tutor."""
    local = directory / DEFAULT_SAFETY_FILE
    return local if local.is_file() else REPO_ROOT / "modules" / DEFAULT_SAFETY_FILE


class _Rules:
    """Rules pydantic cannot see: uniqueness, references, empty parts, template variables,
    words that could never match, callouts and media files."""

    def __init__(self, module: Module, assets_dir: Path | None) -> None:
        self.module, self.assets_dir = module, assets_dir
        self.found: list[_Finding] = []
        self.seen: dict[str, set[str]] = {"phase": set(), "section": set(), "topic": set(), "form": set()}

    def add(self, path: Loc, message: str, offset: int = 0) -> None:
        self.found.append(_Finding(path, message, offset))

    def unique(self, kind: str, value: str, path: Loc) -> None:
        if value in self.seen[kind]:
            self.add(path, f"duplicate {kind} id {value!r}")
        self.seen[kind].add(value)

    def run(self) -> list[_Finding]:
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


def semantic_findings(module: Module, assets_dir: Path | None = None) -> list[_Finding]:
    return _Rules(module, assets_dir).run()


def _map_nodes(node: yaml.Node | None, path: Loc, lines: dict[Loc, tuple[int, int]]) -> list[_Finding]:
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
                out.append(_Finding((*path, name), message))
            keys.add(name)
            out += _map_nodes(value, (*path, name), lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            out += _map_nodes(item, (*path, i), lines)
    return out


def _validation_finding(err: dict[str, Any]) -> _Finding:
    loc: Loc = tuple(err.get("loc", ()))
    kind, value = err.get("type"), err.get("input")
    where = _dotted(loc) or "(module)"
    if kind == "extra_forbidden":
        return _Finding(loc, f"unknown key {loc[-1]!r} in {_dotted(loc[:-1]) or 'the module'}")
    if kind == "missing":
        return _Finding(loc[:-1], f"{_dotted(loc[:-1]) or 'module'}: missing required key {loc[-1]!r}")
    if kind == "string_pattern_mismatch" and err.get("ctx", {}).get("pattern") == SNAKE_CASE:
        rule = "a-z, 0-9, _; starting with a letter"
        return _Finding(loc, f"{where}: {value!r} is not a snake_case id ({rule})")
    message = str(err.get("msg", "invalid")).removeprefix("Value error, ")
    shown = f" (got {value!r})" if isinstance(value, (str, int, float, bool)) or value is None else ""
    return _Finding(loc, f"{where}: {message}{shown}")


def _dotted(loc: Loc) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _line_of(finding: _Finding, lines: dict[Loc, tuple[int, int]]) -> int:
    path = finding.path
    while path and path not in lines:  # a missing key: point at its parent
        path = path[:-1]
    start, text_start = lines.get(path, (1, 1))
    return text_start + finding.offset if finding.offset else start


# --- the library --------------------------------------------------------------------------


@dataclass
class Library:
    """Every module file in a directory: the sound ones, and why the others are refused."""

    directory: Path
    modules: dict[str, Module] = field(default_factory=dict)
    problems: dict[str, list[str]] = field(default_factory=dict)  # file -> messages
    files: dict[str, str] = field(default_factory=dict)  # module id (file stem) -> file
    safety: dict[str, SafetyConfig] = field(default_factory=dict)  # module id -> its screen
    # The safety screen's semantic layer (tutor.risk.semantic), one for the directory's
    # safety file; None when it has no exemplar bank or the embedding model is missing.
    semantic: SemanticScreen | None = None

    def safety_for(self, module_id: str) -> SafetyConfig:
        """The safety configuration a module's learners are screened with: the global file
        with the module's `safety:` changes applied."""
        if module_id not in self.safety:
            self.get(module_id)  # raises ModuleNotServable for an unknown or broken module
        return self.safety[module_id]

    def get(self, module_id: str) -> Module:
        if module_id in self.modules:
            return self.modules[module_id]
        file = self.files.get(module_id)
        if file in self.problems:
            raise ModuleNotServable("\n".join(self.problems[file]))
        known = ", ".join(self.modules) or "none"
        raise ModuleNotServable(f"unknown module {module_id!r} (available: {known})")


def modules_dir() -> Path:
    """TUTOR_MODULES_DIR, or the repository's modules/ directory."""
    configured = os.environ.get("TUTOR_MODULES_DIR", "").strip()
    return Path(configured) if configured else REPO_ROOT / "modules"


def module_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("*.y*ml") if p.suffix in (".yaml", ".yml"))


def load_library(directory: str | Path | None = None, assets_dir: Path | None = None) -> Library:
    directory = Path(directory) if directory is not None else modules_dir()
    library = Library(directory)
    for path in module_files(directory):
        source = _display(path)
        if path.stem in library.files:
            other = library.files[path.stem]
            library.problems[source] = [f"{source}:1: module {path.stem!r} is also defined in {other}"]
            continue
        library.files[path.stem] = source
        result = check_file(path, source, assets_dir)
        if result.ok and result.module is not None:
            library.modules[result.module.id] = result.module
            library.safety[result.module.id] = merged(load_safety(safety_file(directory)), result.module.safety)
        else:
            library.problems[source] = result.problems
    library.semantic = _semantic_layer(safety_file(directory), list(library.modules.values()))
    return library


def course_texts(modules: list[Module]) -> list[str]:
    """What the safety screen learns as ordinary: the modules' own words (topic content,
    checks' questions and example answers) and lesson talk (the intent reader's exemplars:
    answers, questions, requests and shares as learners type them). Without the second, an
    everyday answer about panic or a question about the body's alarm read as a crisis in
    ~7% of the development sets' ordinary lesson messages."""
    out: list[str] = []
    for module in modules:
        for topic in module.topics:
            out += [topic.content or "", *(c.question for c in topic.checks), *(c.example_answer for c in topic.checks)]
    out += lesson_talk()
    return [text for text in out if text.strip()]


def _semantic_layer(path: Path, modules: list[Module]) -> SemanticScreen | None:
    """The semantic layer for the safety file at `path` (its exemplar bank beside it, and
    the served modules' own words as ordinary exemplars). A bank that cannot be used is
    logged with its file:line problems and the phrases screen alone; `tutor safety check`
    reports the same problems with exit status 1."""
    try:
        return semantic_screen(path.parent, list(load_safety(path).labels), course_texts(modules))
    except (BankError, SafetyConfigError) as exc:
        log.error("the safety screen's semantic layer is off: %s", exc)
        return None


# An absolute path of two or more parts not inside a URL ("/srv/tutor/modules/x.yaml",
# "C:\\tutor\\x.yaml"); /media/... asset addresses are what authors wrote and stay.
_ABSOLUTE_PATH = re.compile(r"(?<![\w.~:/\\-])(?:[A-Za-z]:\\|/(?!media/))(?:[^\s/\\'\"`,;()]+[/\\])+"
                            r"(?P<name>[^\s/\\'\"`,;()]*)")


def public_problem(message: str, directory: Path) -> str:
    """A module problem as a learner's page may show it: file paths relative to the modules
    folder (`directory`), any other path on the server cut to its file name. The full
    message goes to the log (tutor.turns.runtime) and to `tutor modules check`."""
    prefixes = {str(directory.resolve()), str(directory.absolute()), _display(directory), str(directory)}
    for prefix in sorted((p.rstrip("/\\") for p in prefixes if p not in ("", ".")), key=len, reverse=True):
        message = message.replace(prefix + os.sep, "").replace(prefix + "/", "")
    return _ABSOLUTE_PATH.sub(lambda m: m.group("name") or "…", message)


def _display(path: Path) -> str:
    """A path as authors expect to see it in messages: relative to the working directory."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
