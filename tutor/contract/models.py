"""RESPONSE_SCHEMA (seed 002) as pydantic v2 models: the one definition of a tutor reply.

Optional fields default to None (not to the seed's defaults) so that a reply dumped with
``exclude_unset`` round-trips exactly as the model wrote it; readers use the ``*_or_default``
helpers or treat None as the seed default.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tutor.contract.safety import is_safe_media_src

BlockType = Literal["paragraph", "heading", "list", "quote", "info", "warning", "success", "tip"]
FieldType = Literal["radio", "checkbox", "select", "text", "textarea", "number"]
MediaType = Literal["image", "video", "audio"]
ResponseType = Literal["educational", "conversational", "assessment", "summary", "error"]
Emotion = Literal["neutral", "encouraging", "celebratory", "supportive", "informative"]
Milestone = Literal["25%", "50%", "75%", "100%"]

BLOCK_TYPES: tuple[str, ...] = BlockType.__args__  # type: ignore[attr-defined]
FIELD_TYPES: tuple[str, ...] = FieldType.__args__  # type: ignore[attr-defined]
CHOICE_FIELD_TYPES = frozenset({"radio", "checkbox", "select"})
RESPONSE_TYPES: tuple[str, ...] = ResponseType.__args__  # type: ignore[attr-defined]
EMOTIONS: tuple[str, ...] = Emotion.__args__  # type: ignore[attr-defined]
MILESTONES: tuple[str, ...] = Milestone.__args__  # type: ignore[attr-defined]

SNAKE_CASE = r"^[a-z][a-z0-9_]*$"


class _Model(BaseModel):
    # Unknown keys are tolerated (the seed schema allows them) and not kept.
    model_config = ConfigDict(extra="ignore")


class TextBlock(_Model):
    type: BlockType
    content: str
    level: int | None = Field(default=None, ge=1, le=6, description="Heading level (type=heading)")


class FieldOption(_Model):
    value: str
    label: str


class FormField(_Model):
    id: str = Field(pattern=SNAKE_CASE, description="Field identifier (snake_case)")
    type: FieldType
    label: str
    required: bool | None = None
    options: list[FieldOption] | None = None
    placeholder: str | None = None
    help_text: str | None = None
    min: float | None = None
    max: float | None = None

    @model_validator(mode="after")
    def _choices_need_options(self) -> FormField:
        if self.type in CHOICE_FIELD_TYPES and not self.options:
            raise ValueError(f"field {self.id!r} of type {self.type} needs a non-empty options list")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"field {self.id!r} has min {self.min} greater than max {self.max}")
        return self

    @property
    def is_required(self) -> bool:
        return bool(self.required)


CHECK_FORM_PREFIX = "check-"  # a check of understanding the server asks: "check-<check id>"


class Form(_Model):
    id: str = Field(min_length=1)
    title: str | None = None
    description: str | None = None
    fields: list[FormField]
    submit_label: str | None = None
    optional: bool | None = None

    @model_validator(mode="after")
    def _unique_field_ids(self) -> Form:
        ids = [f.id for f in self.fields]
        if len(ids) != len(set(ids)):
            raise ValueError(f"form {self.id!r} repeats a field id")
        return self

    @property
    def submit_label_or_default(self) -> str:
        return self.submit_label or "Submit"

    @property
    def is_optional(self) -> bool:
        return self.optional is not False

    @property
    def is_check(self) -> bool:
        """The server's check of understanding (tutor.teach.feedback.check_form)."""
        return self.id.startswith(CHECK_FORM_PREFIX)


class Media(_Model):
    type: MediaType
    src: str
    alt: str | None = None
    caption: str | None = None

    @field_validator("src")
    @classmethod
    def _safe_src(cls, src: str) -> str:
        if not is_safe_media_src(src):
            raise ValueError("media src must be an app asset (/media/...) or on a host in TUTOR_MEDIA_HOSTS")
        return src


class NextStep(_Model):
    prompt: str | None = None
    suggestions: list[str] | None = None
    can_skip: bool | None = None


class Progress(_Model):
    percentage: float | None = Field(default=None, ge=0, le=100)
    covered_topics: list[str] | None = None
    newly_covered: list[str] | None = None
    remaining_topics: int | None = None
    # Seed 002's own example sends null here; null means "no milestone".
    milestone: Milestone | None = None


class ModuleState(_Model):
    current_phase: str | None = None
    current_section: str | None = None
    sections_completed: int | None = None
    total_sections: int | None = None


class Meta(_Model):
    response_type: ResponseType
    progress: Progress | None = None
    module_state: ModuleState | None = None
    emotion: Emotion | None = None


class Citation(_Model):
    """A reply's claim that one of the module's sources says something (optional). The
    server keeps it only if `quote` is verbatim in that source (tutor.teach.quotes)."""

    source_id: str = Field(min_length=1, description="a source id from the passages' headers")
    quote: str = Field(min_length=1, description="text copied word for word from that source")
    location: str | None = Field(default=None, description="the section's id or title")


class Content(_Model):
    text_blocks: list[TextBlock]
    forms: list[Form] | None = None
    media: list[Media] | None = None
    next_step: NextStep | None = None
    citations: list[Citation] | None = None


class TutorResponse(_Model):
    """One tutor turn: what the learner sees (content) and what it means (meta)."""

    content: Content
    meta: Meta

    def to_json_dict(self) -> dict:
        """The reply as plain JSON data, with only the fields that were set."""
        return self.model_dump(mode="json", exclude_unset=True)
