"""Teaching material in the module format: checks of understanding and source documents.

A topic may declare `checks` (a question, a rubric of named criteria with key points, an
example answer, a mastery threshold) and `sources` (references ``source_id#section_id`` to
the sections that back it). A module may declare `sources`: markdown or text files beside
the module file, whose sections are their ``## `` headings.

This module is a leaf (models, source parsing and the rules pydantic cannot see), so that
`tutor.content.modules` can import it and `tutor.teach` (judging, retrieval, quotes) can build on
both without import circles.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from tutor.contract.models import SNAKE_CASE
from tutor.text import words

if TYPE_CHECKING:  # pragma: no cover
    from tutor.content.modules import Module

__all__ = [
    "DEFAULT_THRESHOLD",
    "MODULE_SOURCE_ID",
    "SOURCE_SUFFIXES",
    "Check",
    "Criterion",
    "KeyPoint",
    "Misconception",
    "Rubric",
    "Source",
    "SourceFile",
    "SourceSection",
    "load_sources",
    "material_findings",
    "parse_source",
    "slugify",
]

DEFAULT_THRESHOLD = 7
# The module's own authored topic content is citable too, as this (reserved) source id.
MODULE_SOURCE_ID = "module"
SOURCE_SUFFIXES = (".md", ".markdown", ".txt")
# A key point may end a word with '*' to accept any ending ("breath*"): at least 3 letters first.
_WILDCARD = re.compile(r"\w{3,}\*$")
_HEADING = re.compile(r"^##[ \t]+(.+?)[ \t]*#*[ \t]*$")
_EXPLICIT_ID = re.compile(r"\s*\{#([^}\s]*)\}\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_TITLE = re.compile(r"^#[ \t]+\S")

Id = Annotated[str, Field(pattern=SNAKE_CASE, description="stable snake_case id")]
Text = Annotated[str, Field(min_length=1)]
SourceRef = Annotated[
    str,
    Field(pattern=r"^[a-z][a-z0-9_]*(#[a-z][a-z0-9_]*)?$",
          description="'source_id#section_id', or 'source_id' for the whole source"),
]
Loc = tuple[str | int, ...]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class KeyPoint(_Strict):
    phrase: Text = Field(description="words or a phrase a good answer contains; a word may end in '*'")
    alternatives: list[Text] = Field(default_factory=list, description="other accepted phrasings")

    @property
    def phrasings(self) -> tuple[str, ...]:
        return (self.phrase, *self.alternatives)


class Criterion(_Strict):
    name: Id = Field(description="canonical label: the only key a judge may score (seed 003)")
    description: Text = Field(
        description="what a good answer does, said to the learner: 'You explained <description>'"
    )
    weight: float = Field(default=1.0, gt=0, le=100, description="relative weight in the score")
    key_points: list[Text | KeyPoint] = Field(
        min_length=1,
        description="phrases matched as whole words, ignoring case and accents; a string or "
        "{phrase, alternatives}",
    )
    needs: int | None = Field(
        default=None, ge=1, description="key points needed for full credit (default: all of them)"
    )
    hint: str | None = Field(default=None, description="a nudge for the learner when this is missing")

    @property
    def points(self) -> list[KeyPoint]:
        return [KeyPoint(phrase=p) if isinstance(p, str) else p for p in self.key_points]

    @property
    def required(self) -> int:
        return min(self.needs or len(self.key_points), len(self.key_points))


class Rubric(_Strict):
    criteria: list[Criterion] = Field(min_length=1)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.criteria)


class Misconception(_Strict):
    phrases: list[Text] = Field(min_length=1, description="phrasings of a common wrong idea")
    feedback: Text = Field(description="a kind correction shown when the answer states it")


class Check(_Strict):
    """A question that checks understanding of its topic, and how answers are judged."""

    id: Id
    question: Text
    rubric: Rubric
    example_answer: Text = Field(description="an answer that deserves full marks, for judges and authors")
    threshold: int = Field(
        default=DEFAULT_THRESHOLD, ge=1, le=10, description="score (0-10) at or above which the topic is mastered"
    )
    misconceptions: list[Misconception] = Field(default_factory=list)


class SourceFile(_Strict):
    id: Id
    title: Text
    file: Text = Field(
        description="path relative to the module file, e.g. my_module/sources/guide.md (.md, .markdown or .txt)"
    )


# --- loaded sources -----------------------------------------------------------------------


@dataclass(frozen=True)
class SourceSection:
    id: str
    title: str
    text: str  # the body, verbatim from the file (the heading line is not part of it)
    line: int  # 1-based line of the heading in the file (of the first body line for "intro")


@dataclass(frozen=True)
class Source:
    id: str
    title: str
    file: str  # as declared in the module
    text: str
    sections: tuple[SourceSection, ...]

    def section(self, section_id: str) -> SourceSection | None:
        return next((s for s in self.sections if s.id == section_id), None)


def slugify(heading: str) -> str:
    """'How the body's alarm works' -> 'how_the_body_s_alarm_works' (case and accents folded)."""
    return "_".join(words(heading))


def parse_source(
    text: str, source_id: str, title: str, file: str = ""
) -> tuple[Source, list[tuple[int, str]]]:
    """Split a source into its ``## `` sections; problems are (line in the file, message).

    Text before the first ``## `` heading (a ``# Title`` line aside) is the section "intro".
    A heading may set its id explicitly: ``## A long heading {#short_id}``. ``###`` and
    deeper headings, and anything inside code fences, stay in their section.
    """
    problems: list[tuple[int, str]] = []
    lines = text.splitlines(keepends=True)
    heads: list[tuple[int, str, str]] = []  # (line index, id, title)
    fenced = False
    for i, line in enumerate(lines):
        if _FENCE.match(line):
            fenced = not fenced
        match = None if fenced else _HEADING.match(line.rstrip("\r\n"))
        if match is None:
            continue
        heading = match.group(1)
        explicit = _EXPLICIT_ID.search(heading)
        if explicit:
            heading = heading[: explicit.start()].strip()
        section_id = explicit.group(1) if explicit else slugify(heading)
        if not re.fullmatch(SNAKE_CASE, section_id):
            hint = "give it an explicit id: '## Heading {#some_id}'"
            problems.append((i + 1, f"section id {section_id!r} is not a snake_case id ({hint})"))
        heads.append((i, section_id, heading or section_id))
    sections: list[SourceSection] = []
    first = heads[0][0] if heads else len(lines)
    intro = [ln for ln in lines[:first] if not _TITLE.match(ln)]
    if "".join(intro).strip():
        start = next(i for i, ln in enumerate(lines[:first]) if ln.strip() and not _TITLE.match(ln))
        sections.append(SourceSection("intro", title, "".join(lines[start:first]).strip(), start + 1))
    seen: set[str] = {s.id for s in sections}
    for n, (i, section_id, heading) in enumerate(heads):
        end = heads[n + 1][0] if n + 1 < len(heads) else len(lines)
        body = "".join(lines[i + 1:end]).strip()
        if section_id in seen:
            problems.append((i + 1, f"duplicate section id {section_id!r} (set one with '{{#other_id}}')"))
        elif not body:
            problems.append((i + 1, f"section {section_id!r} is empty"))
        seen.add(section_id)
        sections.append(SourceSection(section_id, heading, body, i + 1))
    if not any(s.text for s in sections):
        problems.append((1, "the source has no text"))
    return Source(source_id, title, file, text, tuple(sections)), problems


# --- checking and loading -----------------------------------------------------------------


def load_sources(module: Module, base_dir: Path) -> tuple[dict[str, Source], list[tuple[Loc, str]]]:
    """Read every declared source once, relative to `base_dir` (the module file's folder).

    A file that is missing, unreadable, outside the modules folder or not .md/.txt is a
    problem reported at its `file:` line, never an exception.
    """
    loaded: dict[str, Source] = {}
    problems: list[tuple[Loc, str]] = []
    root = base_dir.resolve()
    for i, declared in enumerate(getattr(module, "sources", None) or []):
        where: Loc = ("sources", i, "file")
        name = declared.file
        relative = PurePosixPath(name.replace("\\", "/"))
        if relative.is_absolute() or ".." in relative.parts or re.match(r"^[A-Za-z]:", name):
            problems.append((where, f"source file {name!r} must be a relative path inside the modules folder"))
            continue
        if relative.suffix.lower() not in SOURCE_SUFFIXES:
            problems.append((where, f"source file {name!r} must be markdown or text ({', '.join(SOURCE_SUFFIXES)})"))
            continue
        path = root / relative
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            problems.append((where, f"source file not found: {name!r} (expected at {path})"))
            continue
        except (OSError, UnicodeDecodeError) as exc:
            problems.append((where, f"cannot read source file {name!r}: {exc}"))
            continue
        source, found = parse_source(text, declared.id, declared.title, name)
        problems += [(where, f"{name}:{line}: {message}") for line, message in found]
        loaded[declared.id] = source
    return loaded, problems


def material_findings(module: Module, loaded: dict[str, Source] | None) -> list[tuple[Loc, str]]:
    """Rules for sources and checks that pydantic cannot see. With `loaded` None (the text
    was checked without its folder), section references are not checked."""
    found: list[tuple[Loc, str]] = []
    declared: set[str] = set()
    for i, source in enumerate(getattr(module, "sources", None) or []):
        if source.id == MODULE_SOURCE_ID:
            found.append((("sources", i, "id"), f"source id {MODULE_SOURCE_ID!r} is reserved for the topics' own content"))
        elif source.id in declared:
            found.append((("sources", i, "id"), f"duplicate source id {source.id!r}"))
        declared.add(source.id)
    check_ids: set[str] = set()
    for path, topic in _topics_with_paths(module):
        for r, ref in enumerate(topic.sources):
            source_id, _, section_id = ref.partition("#")
            where = (*path, "sources", r)
            if source_id not in declared:
                known = ", ".join(sorted(declared)) or "none declared"
                found.append((where, f"topic {topic.id!r} points at unknown source {source_id!r} (sources: {known})"))
            elif section_id and loaded is not None and source_id in loaded:
                source = loaded[source_id]
                if source.section(section_id) is None:
                    ids = ", ".join(s.id for s in source.sections)
                    found.append((where, f"source {source_id!r} has no section {section_id!r} (sections: {ids})"))
        found += _next_topic_findings(module, topic, path)
        for c, check in enumerate(topic.checks):
            cpath = (*path, "checks", c)
            if check.id in check_ids:
                found.append(((*cpath, "id"), f"duplicate check id {check.id!r}"))
            check_ids.add(check.id)
            found += _check_findings(check, cpath)
    return found


def _next_topic_findings(module: Module, topic: Any, path: Loc) -> list[tuple[Loc, str]]:
    """A form option's `next_topic` must name a topic of the module."""
    if topic.form is None:
        return []
    found = []
    known = set(module.topic_ids)
    for f, field in enumerate(topic.form.fields):
        for o, option in enumerate(field.options or ()):
            target = getattr(option, "next_topic", None)
            if target is not None and target not in known:
                where = (*path, "form", "fields", f, "options", o, "next_topic")
                found.append((where, f"option {option.value!r} leads to unknown topic {target!r}"))
    return found


def _check_findings(check: Check, path: Loc) -> list[tuple[Loc, str]]:
    found: list[tuple[Loc, str]] = []
    names: set[str] = set()
    for k, criterion in enumerate(check.rubric.criteria):
        cpath = (*path, "rubric", "criteria", k)
        if criterion.name in names:
            found.append(((*cpath, "name"), f"duplicate criterion name {criterion.name!r} in check {check.id!r}"))
        names.add(criterion.name)
        if criterion.needs is not None and criterion.needs > len(criterion.key_points):
            message = f"criterion {criterion.name!r} needs {criterion.needs} key points but lists {len(criterion.key_points)}"
            found.append(((*cpath, "needs"), message))
        for p, point in enumerate(criterion.key_points):
            ppath = (*cpath, "key_points", p)
            if isinstance(point, str):
                found += _phrase_findings([(ppath, point)], "key point")
            else:
                pairs = [((*ppath, "phrase"), point.phrase)]
                pairs += [((*ppath, "alternatives", a), alt) for a, alt in enumerate(point.alternatives)]
                found += _phrase_findings(pairs, "key point")
    for m, wrong in enumerate(check.misconceptions):
        pairs = [((*path, "misconceptions", m, "phrases", i), v) for i, v in enumerate(wrong.phrases)]
        found += _phrase_findings(pairs, "misconception phrase")
    return found


def _phrase_findings(pairs: Iterable[tuple[Loc, str]], kind: str) -> list[tuple[Loc, str]]:
    found = []
    for where, phrase in pairs:
        if not words(phrase):
            found.append((where, f"{kind} {phrase!r} has no letters or digits to match"))
            continue
        for token in phrase.split():
            if "*" in token and not _WILDCARD.search(token.rstrip(".,;:!?")):
                found.append((where, f"{kind} {phrase!r}: '*' may only end a word of 3 or more letters"))
                break
    return found


def _topics_with_paths(module: Module) -> Iterable[tuple[Loc, Any]]:
    for p, phase in enumerate(module.phases):
        for s, section in enumerate(phase.sections):
            for t, topic in enumerate(section.topics):
                yield ("phases", p, "sections", s, "topics", t), topic
