"""Learner safety: a deterministic offline screen run on every learner message before any
model call, its authored configuration (modules/safety/default.yaml, extended per module
under `safety:`), and helpers to map a model screen's evidence snippets to offsets.

    config = load_safety()                      # compiled once, cached per file
    flags = screen(text, config)                # [] or RiskFlag(label, confidence, evidence)
    blocks = config.reply_for(flags[0].label, module.language)

No Reflex, no engine, no model: this package imports only tutor.text and tutor.contract.
"""

from tutor.risk.config import (
    LabelOverride,
    LanguageSignals,
    RiskLabel,
    SafetyConfig,
    SafetyConfigError,
    SafetyOverride,
    Vocabulary,
    check_safety_text,
    default_safety_path,
    load_safety,
    merged,
    override_findings,
)
from tutor.risk.phrases import PhraseError
from tutor.risk.screen import Evidence, RiskFlag, locate_evidence, screen, span_hash

__all__ = [
    "Evidence",
    "LabelOverride",
    "LanguageSignals",
    "PhraseError",
    "RiskFlag",
    "RiskLabel",
    "SafetyConfig",
    "SafetyConfigError",
    "SafetyOverride",
    "Vocabulary",
    "check_safety_text",
    "default_safety_path",
    "load_safety",
    "locate_evidence",
    "merged",
    "override_findings",
    "screen",
    "span_hash",
]
