"""The module file format as pydantic models (what authors write in YAML), and its JSON
Schema. Checking a file and loading a directory of them live in `tutor.content.modules`, which
re-exports everything here."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from tutor.content.material import Check, Source, SourceFile, SourceRef
from tutor.contract import FieldOption, Form, FormField, Media
from tutor.contract.models import SNAKE_CASE
from tutor.render.reflection import condition_problem, template_problems
from tutor.risk.config import SafetyOverride

REPO_ROOT = Path(__file__).resolve().parents[2]
# The app serves assets/ at the site root, so "/media/<module>/x.svg" must exist here.
ASSETS_DIR = REPO_ROOT / "assets"
DEFAULT_MILESTONES = [25, 50, 75, 100]
# Authored callouts in topic content: a paragraph starting "!!! tip ..." becomes a tip block.
CALLOUT_TYPES = ("info", "warning", "success", "tip")
# The built-in tutor's navigation replies ("Continue", "Next: <title>") must never read as
# evidence for a topic, so these words cannot be a keyword, alias or title on their own.
NAVIGATION_WORDS = frozenset({"continue", "next", "tiep tuc", "tiep theo"})  # and Vietnamese, accents folded
_CALLOUT = re.compile(r"^\s*!!!\s*(\S*)")

Id = Annotated[str, Field(pattern=SNAKE_CASE, description="stable snake_case id")]
Text = Annotated[str, Field(min_length=1)]


class ModuleNotServable(LookupError):
    """A module id that is unknown or whose file fails the check; str() says why."""


class _Strict(BaseModel):
    # Unknown keys are errors: a misspelt `keyword:` would otherwise silently do nothing.
    model_config = ConfigDict(extra="forbid")


class ModuleFieldOption(FieldOption):
    model_config = ConfigDict(extra="forbid")
    next_topic: Id | None = Field(
        default=None, description="the topic the built-in tutor teaches next when the learner picks this option"
    )


class ModuleFormField(FormField):
    model_config = ConfigDict(extra="forbid")
    options: list[ModuleFieldOption] | None = None


class ModuleMedia(Media):
    model_config = ConfigDict(extra="forbid")


class ReflectLine(_Strict):
    text: Text = Field(description="what the built-in tutor says back; {field_id} is the learner's answer")
    when: str | None = Field(
        default=None, description="say it only if this holds: a number field compared with another or a "
        "number, e.g. 'belief_after < belief_before'",
    )


class ModuleForm(Form):
    """A RESPONSE_SCHEMA form plus the topics that answering it covers, and what the
    built-in tutor says back about the answers (tutor.render.reflection)."""

    model_config = ConfigDict(extra="forbid")
    fields: list[ModuleFormField] = Field(min_length=1)
    covers: list[Id] | None = Field(
        default=None, min_length=1, description="topic ids answering covers; default: this topic"
    )
    reflect: list[Text | ReflectLine] = Field(
        default_factory=list,
        description="lines the built-in tutor says after a submission, each only when every field it "
        "names was answered (and its `when` holds); without any, it thanks the learner",
    )

    @model_validator(mode="after")
    def _reflect_names_this_forms_fields(self) -> ModuleForm:
        problems = [p for text, _ in self.reflect_lines for p in template_problems(text, self)]
        problems += [p for _, when in self.reflect_lines if when and (p := condition_problem(when, self))]
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def reflect_lines(self) -> list[tuple[str, str | None]]:
        """(text, when) of each reflect line (a plain string is said whenever it can be filled)."""
        return [(line, None) if isinstance(line, str) else (line.text, line.when) for line in self.reflect]

    @property
    def form(self) -> Form:
        """The form as the contract model, ready to send in a reply."""
        return Form.model_validate(self.model_dump(exclude={"covers", "reflect"}, exclude_none=True))


class Topic(_Strict):
    id: Id
    title: Text
    keywords: list[Text] = Field(
        default_factory=list,
        description="words/phrases whose mention shows engagement; matched as whole words, ignoring "
        "case and accents, so list other word forms too (breath, breathe, breathing)",
    )
    aliases: list[Text] = Field(default_factory=list, description="other names, any language")
    content: str | None = Field(
        default=None,
        description="markdown the built-in tutor teaches: '## ' headings, '-'/'1.' lists, '> ' quotes; "
        "a paragraph starting '!!! info', '!!! warning', '!!! success' or '!!! tip' is a callout",
    )
    form: ModuleForm | None = None
    media: list[ModuleMedia] = Field(default_factory=list)
    suggestions: list[Text] = Field(default_factory=list, description="quick replies")
    checks: list[Check] = Field(default_factory=list, description="questions that check understanding")
    sources: list[SourceRef] = Field(
        default_factory=list, description="source sections that back this topic: 'source_id#section_id'"
    )

    @model_validator(mode="after")
    def _form_covers_this_topic_by_default(self) -> Topic:
        if self.form is not None and self.form.covers is None:
            self.form.covers = [self.id]
        return self


class Section(_Strict):
    id: Id
    title: Text
    topics: list[Topic] = Field(default_factory=list)


class Phase(_Strict):
    id: Id
    title: Text
    practice: bool = Field(
        default=False,
        description="its topics are things to do (skills, exercises, habits): a 'what can I do' question "
        "prefers their passages",
    )
    sections: list[Section] = Field(default_factory=list)


class Variable(_Strict):
    default: str | None = Field(default=None, description="value used unless the app passes one")
    description: str | None = None


class Module(_Strict):
    """One learning module: phases -> sections -> topics, plus how the tutor should teach it."""

    id: Id
    title: Text
    description: Text
    language: str = Field(
        default="en", pattern=r"^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8})*$",
        description="BCP-47 tag; the chat page and the built-in tutor speak it (a catalogue in tutor/locales)",
    )
    mode: Literal["threaded", "stateless"] = "threaded"
    milestones: list[Literal[25, 50, 75, 100]] = Field(default_factory=lambda: list(DEFAULT_MILESTONES))
    variables: dict[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")], Variable] = Field(
        default_factory=dict
    )
    instructions: str = Field(default="", description="persona, tone, goals; may use {{variables}}")
    medical_reply: str | None = Field(
        default=None,
        description="markdown the tutor answers questions about medicines, doses or a diagnosis with "
        "(refer to a doctor or pharmacist); default: the app's own, in the module's language",
    )
    glossary: dict[Text, list[Text]] = Field(
        default_factory=dict,
        description="the module's terms (in its language), each with how learners say it in other languages "
        "or everyday words: a question is read with the module's terms added, so a Vietnamese question "
        "finds an English passage ('heart racing': [tim đập nhanh, hồi hộp]); matched as whole words, "
        "ignoring case and accents",
    )
    not_covered: list[Text] = Field(
        default_factory=list,
        description="questions this module does not answer though they share its words ('how do I put my "
        "laptop to sleep' beside a sleep module), in the learners' languages: a question that reads as one "
        "of them is told plainly that the module doesn't cover it instead of getting an unrelated passage",
    )
    phases: list[Phase] = Field(min_length=1)
    sources: list[SourceFile] = Field(
        default_factory=list, description="markdown or text files beside the module; sections are '## ' headings"
    )
    safety: SafetyOverride | None = Field(
        default=None,
        description="this module's changes to the safety screen (modules/safety/default.yaml): more "
        "phrases, idioms or negations for a label, its own replies or check-in, new labels",
    )
    # Read once by check_file/load_library (relative to the module file), keyed by source id.
    _loaded_sources: dict[str, Source] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _milestones_in_order(self) -> Module:
        self.milestones = sorted(set(self.milestones))
        return self

    # Read a few dozen times a turn: (the phases they were made from, sections, topics, topic
    # ids). A copy with other phases (model_copy(update=...)) makes its own; modules are
    # read-only once loaded.
    _derived: tuple | None = PrivateAttr(default=None)

    def _derive(self) -> tuple:
        sections = tuple(s for p in self.phases for s in p.sections)
        topics = tuple(t for s in sections for t in s.topics)
        derived = (self.phases, sections, topics, tuple(t.id for t in topics))
        self.__pydantic_private__["_derived"] = derived
        return derived

    def _current(self) -> tuple:
        # __pydantic_private__ read directly: `self._derived` goes through BaseModel.__getattr__,
        # which cost more than everything else here.
        derived = self.__pydantic_private__["_derived"]
        return derived if derived is not None and derived[0] is self.phases else self._derive()

    @property
    def topics(self) -> tuple[Topic, ...]:
        return self._current()[2]

    @property
    def topic_ids(self) -> tuple[str, ...]:
        return self._current()[3]

    @property
    def sections(self) -> tuple[Section, ...]:
        return self._current()[1]

    def topic(self, topic_id: str) -> Topic | None:
        return next((t for t in self.topics if t.id == topic_id), None)

    def section_of(self, topic_id: str) -> Section | None:
        return next((s for s in self.sections if any(t.id == topic_id for t in s.topics)), None)

    def phase_of(self, section_id: str) -> Phase | None:
        return next((p for p in self.phases if any(s.id == section_id for s in p.sections)), None)

    def find_form(self, form_id: str) -> ModuleForm | None:
        return next((t.form for t in self.topics if t.form and t.form.id == form_id), None)

    @property
    def loaded_sources(self) -> dict[str, Source]:
        """Declared sources as read at load time (empty for a module checked without its folder)."""
        return self._loaded_sources

    def find_check(self, check_id: str) -> tuple[Topic, Check] | None:
        return next(((t, c) for t in self.topics for c in t.checks if c.id == check_id), None)


def schema_json() -> str:
    """The JSON Schema of the module format, as committed at modules/module.schema.json."""
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", **Module.model_json_schema()}
    schema["title"] = "Tutor module"
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
