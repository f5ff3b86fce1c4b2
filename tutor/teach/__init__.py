"""Teaching: checks of understanding (the JUDGE contract and the built-in judge), retrieval
over a module's sources, and verification of quoted citations. Also, for a turn (used by
tutor.teaching): what a learner's message is (`intent`), the check's form and the score's
callout (`feedback`), and the judge as a model call (`judge_call`).

The module format for checks and sources lives in `tutor.material`; this package builds on
it and never imports `tutor.modules` at run time.
"""

from tutor.teach.builtin_judge import judge_builtin
from tutor.teach.judge import (
    JUDGE_CONTRACT,
    JUDGE_SCHEMA,
    JudgeResult,
    is_mastered,
    judge_messages,
    judge_schema,
    validate_judge,
)
from tutor.teach.quotes import Citation, VerifiedQuote, module_sources, verify_quote
from tutor.teach.retrieval import Index, Passage, retrieve

__all__ = [
    "JUDGE_CONTRACT",
    "JUDGE_SCHEMA",
    "Citation",
    "Index",
    "JudgeResult",
    "Passage",
    "VerifiedQuote",
    "is_mastered",
    "judge_builtin",
    "judge_messages",
    "judge_schema",
    "module_sources",
    "retrieve",
    "validate_judge",
    "verify_quote",
]
