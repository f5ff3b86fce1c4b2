"""Author modules: checking module files and loading a directory of them.

A module that fails the check is never served: `load_library()` keeps it out of
`Library.modules` and `Library.get()` raises `ModuleNotServable` with the same messages
`tutor modules check` prints (``file:line: message``). The format itself (pydantic models,
published as JSON Schema at modules/module.schema.json) is `tutor.content.module_format`; its names
are re-exported here. What a check finds, and on which line, is `tutor.content.module_findings`.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from pydantic import ValidationError

from tutor.content.material import load_sources, material_findings
from tutor.content.module_findings import Finding, Loc, line_of, map_nodes, semantic_findings, validation_finding
from tutor.content.module_format import (
    ASSETS_DIR,
    CALLOUT_TYPES,
    DEFAULT_MILESTONES,
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
from tutor.risk.config import (
    DEFAULT_SAFETY_FILE,
    SafetyConfig,
    SafetyConfigError,
    load_safety,
    merged,
    override_findings,
)
from tutor.risk.semantic import BankError, SemanticScreen, semantic_screen
from tutor.understand.intent_bank import lesson_talk
from tutor.yaml_text import compose_and_load, invalid_yaml

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
    "add_semantic",
    "check_file",
    "check_text",
    "public_problem",
    "load_library",
    "modules_dir",
    "schema_json",
]

# --- checking -----------------------------------------------------------------------------


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
        root, data = compose_and_load(text)
    except yaml.YAMLError as exc:
        return CheckResult(None, [invalid_yaml(exc, source)])
    if not isinstance(data, dict):
        shape = "a module file must be a mapping with id, title, description, language and phases"
        return CheckResult(None, [f"{source}:1: {shape}"])
    lines: dict[Loc, tuple[int, int]] = {}
    findings = map_nodes(root, (), lines)
    try:
        module: Module | None = Module.model_validate(data)
    except ValidationError as exc:
        findings += [validation_finding(err) for err in exc.errors()]
        module = None
    if module is not None:
        findings += semantic_findings(module, assets_dir)
        loaded = None
        if base_dir is not None:
            loaded, source_problems = load_sources(module, base_dir)
            findings += [Finding(where, message) for where, message in source_problems]
            module._loaded_sources = loaded
        findings += [Finding(where, message) for where, message in material_findings(module, loaded)]
        if safety is not None:  # the global safety configuration this module's `safety:` changes
            findings += [Finding(("safety", *where), message)
                         for where, message in override_findings(safety, module.safety)]
        if expected_id is not None and module.id != expected_id:
            message = f"module id {module.id!r} must equal the file name {expected_id!r}"
            findings.append(Finding(("id",), message))
    located = sorted(((line_of(f, lines), f.message) for f in findings), key=lambda lm: lm[0])
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


def load_library(directory: str | Path | None = None, assets_dir: Path | None = None, *,
                 semantic: bool = True) -> Library:
    """Every module file in `directory`, checked. `semantic`: with the safety screen's
    semantic layer (add_semantic); a command that only lists or refuses modules goes without
    it, since a new set of modules trains it (minutes on a new machine)."""
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
    return add_semantic(library) if semantic else library


def add_semantic(library: Library) -> Library:
    """`library` with the safety screen's semantic layer, for its safety file and its
    modules' words (trained once per content and model, then read from the disk cache)."""
    library.semantic = _semantic_layer(safety_file(library.directory), list(library.modules.values()))
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
