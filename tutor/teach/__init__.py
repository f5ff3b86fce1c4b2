"""Teaching: what a learner's message is doing (intent, by meaning), the passage that
answers it (hybrid retrieval), checks of understanding (the JUDGE contract and the built-in
judge), verification of quoted citations, mastery and progress, and the teaching steps of a
turn (`teaching`: called by tutor.turns.engine). For a turn: what a learner's message is
(`intent`, `understanding`), which check to ask (`check_plan`), the check's form and the
score's callout (`feedback`), and the judge as a model call (`judge_call`).

May import understand, content, render, llm, contract and storage; never turns or web. The
module format for checks and sources lives in `tutor.content.material`.
"""

from tutor.teach.builtin_judge import judge_builtin
from tutor.teach.judge import (
    JUDGE_SCHEMA,
    JudgeResult,
    is_mastered,
    judge_contract,
    judge_messages,
    judge_schema,
    validate_judge,
)
from tutor.teach.quotes import Citation, VerifiedQuote, module_sources, verify_quote
from tutor.teach.retrieval import Index, Passage, retrieve

__all__ = [
    "JUDGE_SCHEMA",
    "Citation",
    "Index",
    "JudgeResult",
    "Passage",
    "VerifiedQuote",
    "is_mastered",
    "judge_builtin",
    "judge_contract",
    "judge_messages",
    "judge_schema",
    "module_sources",
    "retrieve",
    "validate_judge",
    "verify_quote",
]
