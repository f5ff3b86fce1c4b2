"""The reply contract: RESPONSE_SCHEMA models, the raw-text -> ParsedReply ladder, and authored
markdown read into text blocks (authored)."""

from tutor.contract.models import (
    BLOCK_TYPES,
    CHOICE_FIELD_TYPES,
    EMOTIONS,
    FIELD_TYPES,
    MILESTONES,
    RESPONSE_TYPES,
    Citation,
    Content,
    FieldOption,
    Form,
    FormField,
    Media,
    Meta,
    ModuleState,
    NextStep,
    Progress,
    TextBlock,
    TutorResponse,
)
from tutor.contract.parsing import Outcome, ParsedReply, has_content, parse
from tutor.contract.safety import is_safe_link, is_safe_media_src

__all__ = [
    "BLOCK_TYPES",
    "CHOICE_FIELD_TYPES",
    "EMOTIONS",
    "FIELD_TYPES",
    "MILESTONES",
    "RESPONSE_TYPES",
    "Citation",
    "Content",
    "FieldOption",
    "Form",
    "FormField",
    "Media",
    "Meta",
    "ModuleState",
    "NextStep",
    "Outcome",
    "ParsedReply",
    "Progress",
    "TextBlock",
    "TutorResponse",
    "has_content",
    "is_safe_link",
    "is_safe_media_src",
    "parse",
]
