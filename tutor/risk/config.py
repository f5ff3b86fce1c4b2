"""The safety file: canonical risk labels, what signals them per language, and the authored
replies. The shipped default is modules/safety/default.yaml; a module may extend it under
`safety:` (SafetyOverride). File format, in short:

    languages: [en, vi]                 # the first is the fallback for replies
    vocabulary:                         # per language, optional
      en:
        equivalents: [[do not, dont], [want to, wanna]]    # same meaning in every phrase
        groups: {person: [him, her, "my (dad|mom)"]}       # used in phrases as {person}
        negators: ["(never|dont) (even|)"]             # a listed phrase right after one is denied
    labels:
      self_harm:                        # canonical label id, snake_case
        title: Suicide or self-harm
        signals:
          en:
            phrases: [kill* myself]     # direct statements       -> confidence 0.9
            patterns: ['end(ing)? it all']  # regex, folded text  -> 0.8
            indirect: [better off without me]                  # -> 0.7
            idioms: [cut myself a]      # a match inside one of these is not a crisis
            negations: [never (hurt|kill) myself]              # same effect; kept apart to read
        reply:                          # per language, or a plain list for every language
          en: [{type: paragraph, content: "..."}]
        supersedes: []                  # labels whose matches inside this label's are dropped
    check_in: {en: [...], vi: [...]}    # shown when a screen fails closed

Phrase syntax: tutor/risk/phrases.py. How matches become flags: tutor/risk/matcher.py.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr,
                      ValidationError, ValidationInfo, model_validator)

from tutor.contract.models import SNAKE_CASE, TextBlock
from tutor.risk._lines import Loc, dotted, line_of, parse_yaml
from tutor.risk.phrases import PhraseError, compile_pattern, parse_phrase
from tutor.risk.rules import ANY_LANGUAGE, PHRASE_KINDS, phrase_problem, pydantic_findings, rule_findings

if TYPE_CHECKING:
    from tutor.risk.matcher import Matcher

__all__ = [
    "DEFAULT_SAFETY_FILE",
    "LabelOverride",
    "LanguageSignals",
    "RiskLabel",
    "SafetyConfig",
    "SafetyConfigError",
    "SafetyOverride",
    "Vocabulary",
    "check_safety_text",
    "default_safety_path",
    "load_safety",
    "merged",
    "override_findings",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_SAFETY_FILE = Path("safety") / "default.yaml"
_DEFER = "defer_rules"  # validation context: check_safety_text reports the rules with lines


class SafetyConfigError(ValueError):
    """A safety file or override is unusable. `problems` are (path, message) pairs."""

    def __init__(self, message: str, problems: list[tuple[Loc, str]] | None = None) -> None:
        super().__init__(message)
        self.problems = problems or []


def _phrase(value: str) -> str:
    try:
        parse_phrase(value)
    except PhraseError as exc:
        raise ValueError(f"phrase {value!r}: {exc}") from None
    return value


def _pattern(value: str) -> str:
    try:
        compile_pattern(value)
    except PhraseError as exc:
        raise ValueError(f"pattern {value!r}: {exc}") from None
    return value


def _as_replies(value: Any) -> Any:
    return {ANY_LANGUAGE: value} if isinstance(value, list) else value


LabelId = Annotated[str, Field(pattern=SNAKE_CASE, description="canonical label id, snake_case")]
Language = Annotated[str, Field(pattern=r"^([a-z]{2,3}(-[A-Za-z0-9]{2,8})*|\*)$")]
GroupName = Annotated[str, Field(pattern=SNAKE_CASE)]
Phrase = Annotated[str, AfterValidator(_phrase)]
Pattern = Annotated[str, AfterValidator(_pattern)]
# {language: blocks}; a plain list of blocks is stored under "*" (every language).
Replies = Annotated[dict[Language, list[TextBlock]], BeforeValidator(_as_replies)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LanguageSignals(_Strict):
    """What signals a label in one language (phrase syntax: tutor/risk/phrases.py)."""

    phrases: list[Phrase] = Field(default_factory=list, description="direct statements (0.9)")
    patterns: list[Pattern] = Field(default_factory=list, description="regexes over folded text (0.8)")
    indirect: list[Phrase] = Field(default_factory=list, description="indirect statements (0.7)")
    idioms: list[Phrase] = Field(default_factory=list, description="not a crisis: drops a match inside")
    negations: list[Phrase] = Field(default_factory=list, description="not a crisis: drops a match inside")

    def signal_count(self) -> int:
        return len(self.phrases) + len(self.patterns) + len(self.indirect)


class Vocabulary(_Strict):
    equivalents: list[list[str]] = Field(default_factory=list, description="word sequences that mean the same")
    groups: dict[GroupName, list[Phrase]] = Field(default_factory=dict, description="{name} in phrases")
    negators: list[Phrase] = Field(default_factory=list, description=(
        "words that deny what follows: a signal matched right after one is not a crisis "
        "('I don't want to die', 'I've never self-harmed'); a phrase that holds the denial itself "
        "('don't want to live') is untouched"))


class RiskLabel(_Strict):
    title: str = Field(min_length=1)
    signals: dict[Language, LanguageSignals]
    reply: Replies
    # The emergency-first reply for an imminent flag (a plan, means, a time, an attempt under
    # way, danger now); `reply` when the author wrote none.
    imminent_reply: Replies | None = None
    supersedes: list[LabelId] = Field(default_factory=list)


class SafetyConfig(_Strict):
    languages: list[Language] = Field(min_length=1)
    vocabulary: dict[Language, Vocabulary] = Field(default_factory=dict)
    labels: dict[LabelId, RiskLabel] = Field(min_length=1)
    check_in: Replies
    _matcher: Matcher | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _rules(self, info: ValidationInfo) -> SafetyConfig:
        if not (info.context or {}).get(_DEFER):
            findings = rule_findings(self)
            if findings:
                raise ValueError("; ".join(f"{dotted(p) or 'safety'}: {m}" for p, m in findings))
        return self

    def reply_for(self, label: str, language: str | None = None, severity: str = "") -> list[TextBlock]:
        """The label's reply (its imminent_reply for severity "imminent", if written) in
        `language` (or its primary subtag: vi-VN -> vi), else the reply for every language,
        else the file's first language's."""
        risk = self.labels[label]
        if severity == "imminent" and risk.imminent_reply:
            return _pick(risk.imminent_reply, language, self.languages)
        return _pick(risk.reply, language, self.languages)

    def check_in_for(self, language: str | None = None) -> list[TextBlock]:
        return _pick(self.check_in, language, self.languages)

    def matcher(self) -> Matcher:
        """Everything compiled once; screen() calls this."""
        if self._matcher is None:
            from tutor.risk.matcher import Matcher

            self._matcher = Matcher(self)
        return self._matcher


def _pick(replies: dict[str, list[TextBlock]], language: str | None, languages: list[str]) -> list[TextBlock]:
    wanted = []
    if language:
        wanted += [language.lower(), language.lower().replace("_", "-").split("-")[0]]
    wanted += [ANY_LANGUAGE, *languages]
    for key in wanted:
        if replies.get(key):
            return list(replies[key])
    return list(next(iter(replies.values()), []))


# --- files --------------------------------------------------------------------------------


def default_safety_path() -> Path:
    """TUTOR_MODULES_DIR/safety/default.yaml when that file exists, else the repository's."""
    configured = os.environ.get("TUTOR_MODULES_DIR", "").strip()
    if configured and (Path(configured) / DEFAULT_SAFETY_FILE).is_file():
        return Path(configured) / DEFAULT_SAFETY_FILE
    return REPO_ROOT / "modules" / DEFAULT_SAFETY_FILE


def check_safety_text(text: str, source: str) -> tuple[SafetyConfig | None, list[str]]:
    """Check a safety file's text; problems read ``source:line: message``."""
    data, lines, problems = parse_yaml(text, source)
    if data is None and problems:
        return None, problems
    if not isinstance(data, dict):
        return None, [f"{source}:1: a safety file is a mapping with languages, labels and check_in"]
    located: list[tuple[int, str]] = []
    config = None
    try:
        config = SafetyConfig.model_validate(data, context={_DEFER: True})
    except ValidationError as exc:
        located += [(line_of(loc, lines), message) for loc, message in pydantic_findings(exc)]
    if config is not None:
        located += [(line_of(loc, lines), f"{dotted(loc)}: {m}") for loc, m in rule_findings(config)]
    problems += [f"{source}:{line}: {message}" for line, message in sorted(located, key=lambda lm: lm[0])]
    return (config if not problems else None), problems


_cache: dict[Path, tuple[tuple[int, int], SafetyConfig]] = {}


def load_safety(path: Path | str | None = None) -> SafetyConfig:
    """Load and compile a safety file (default: default_safety_path()). Raises
    SafetyConfigError with ``file:line: message`` lines. The result is cached per file
    until the file changes: treat it as read-only."""
    path = Path(path) if path is not None else default_safety_path()
    try:
        stat = path.stat()
        key = (stat.st_mtime_ns, stat.st_size)
        cached = _cache.get(path.resolve())
        if cached is not None and cached[0] == key:
            return cached[1]
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SafetyConfigError(f"{path}:1: cannot read safety file: {exc}") from None
    config, problems = check_safety_text(text, str(path))
    if config is None:
        raise SafetyConfigError("\n".join(problems))
    config.matcher()
    _cache[path.resolve()] = (key, config)
    return config


# --- module overrides ---------------------------------------------------------------------


class LabelOverride(_Strict):
    """A module's change to one label. For a label the default file has: `signals` are
    ADDED to the default's (phrases, idioms, negations ... per language), `reply` REPLACES
    the reply in the languages given (a plain list replaces it in every language), `title`
    replaces the title, `supersedes` is added. For a new label, title, signals and reply are
    all required. Labels cannot be removed: to stop a phrase firing in your module, add an
    idiom or negation that covers it."""

    title: str | None = Field(default=None, min_length=1)
    signals: dict[Language, LanguageSignals] = Field(default_factory=dict)
    reply: Replies | None = None
    supersedes: list[LabelId] = Field(default_factory=list)


class SafetyOverride(_Strict):
    """What a module may write under `safety:`. Everything is optional:

        safety:
          labels:
            self_harm:
              signals: {en: {phrases: ["want to (vanish|disappear) forever"]}}
            exam_crisis:                      # a new label of this module
              title: Exam crisis
              signals: {en: {phrases: ["going to fail everything and (die|end it)"]}}
              reply: [{type: paragraph, content: "..."}]
          check_in: {en: [{type: paragraph, content: "..."}]}

    `languages` are added to the default's; `vocabulary` equivalents and negators are added and
    word groups extended; `check_in` replaces the default's in the languages given (a plain
    list: in every language). A language you add needs a check_in in it, and every label
    with phrases in it a reply in it (or a plain list for every language)."""

    languages: list[Language] = Field(default_factory=list)
    vocabulary: dict[Language, Vocabulary] = Field(default_factory=dict)
    labels: dict[LabelId, LabelOverride] = Field(default_factory=dict)
    check_in: Replies | None = None


def _merged_data(base: SafetyConfig, override: SafetyOverride) -> tuple[dict[str, Any], list[tuple[Loc, str]]]:
    data = base.model_dump(exclude_none=True)
    found: list[tuple[Loc, str]] = []
    extra = override.model_dump(exclude_none=True, exclude_unset=False)
    data["languages"] += [lang for lang in override.languages if lang not in data["languages"]]
    for lang, vocabulary in extra["vocabulary"].items():
        target = data["vocabulary"].setdefault(lang, {"equivalents": [], "groups": {}, "negators": []})
        target["equivalents"] += vocabulary["equivalents"]
        target["negators"] += [n for n in vocabulary["negators"] if n not in target["negators"]]
        for name, members in vocabulary["groups"].items():
            group = target["groups"].setdefault(name, [])
            group += [m for m in members if m not in group]
    for label_id, change in extra["labels"].items():
        where: Loc = ("labels", label_id)
        if label_id not in data["labels"]:
            missing = [k for k in ("title", "reply") if change.get(k) is None] + ([] if change["signals"] else ["signals"])
            if missing:
                found.append((where, f"new label {label_id!r} needs {', '.join(missing)}"))
                continue
            data["labels"][label_id] = {k: change[k] for k in ("title", "signals", "reply", "supersedes")}
            continue
        label = data["labels"][label_id]
        if change.get("title"):
            label["title"] = change["title"]
        for lang, signals in change["signals"].items():
            target = label["signals"].setdefault(lang, {})
            for kind, items in signals.items():
                current = target.setdefault(kind, [])
                current += [item for item in items if item not in current]
        if change.get("reply") is not None:
            label["reply"] = _merge_replies(label["reply"], change["reply"])
        label["supersedes"] += [s for s in change["supersedes"] if s not in label["supersedes"]]
    if extra.get("check_in") is not None:
        data["check_in"] = _merge_replies(data["check_in"], extra["check_in"])
    return data, found


def _merge_replies(current: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    return dict(change) if ANY_LANGUAGE in change else {**current, **change}


def override_findings(base: SafetyConfig, override: SafetyOverride | None) -> list[tuple[Loc, str]]:
    """Problems of `override` on top of `base`, as (path inside the override, message):
    a module check can put them on the lines of its `safety:` block."""
    if override is None:
        return []
    data, found = _merged_data(base, override)
    if found:
        return found
    try:
        config = SafetyConfig.model_validate(data, context={_DEFER: True})
    except ValidationError as exc:
        return pydantic_findings(exc)
    # The override's phrases, checked against the merged vocabulary, at their own paths;
    # the default's phrases were checked with the default file.
    for label_id, change in override.labels.items():
        for lang, signals in change.signals.items():
            for kind in PHRASE_KINDS:
                for i, phrase in enumerate(getattr(signals, kind)):
                    problem = phrase_problem(phrase, config, lang)
                    if problem:
                        found.append((("labels", label_id, "signals", lang, kind, i), problem))
    found += [(loc, m) for loc, m in rule_findings(config) if not _is_phrase_path(loc)]
    return found


def _is_phrase_path(loc: Loc) -> bool:
    return len(loc) == 6 and loc[0] == "labels" and loc[2] == "signals"


def merged(base: SafetyConfig, override: SafetyOverride | None) -> SafetyConfig:
    """The base configuration with a module's override applied (see SafetyOverride).
    Raises SafetyConfigError listing the override's problems."""
    if override is None:
        return base
    found = override_findings(base, override)
    if found:
        lines = "\n".join(f"safety.{dotted(loc)}: {message}" if loc else f"safety: {message}" for loc, message in found)
        raise SafetyConfigError(f"the module's safety override is invalid:\n{lines}", found)
    data, _ = _merged_data(base, override)
    config = SafetyConfig.model_validate(data)
    config.matcher()
    return config
