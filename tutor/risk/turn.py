"""Screening one learner turn, and the reply a risk gets.

The engine calls `screen_turn` on every stored learner message before anything else
happens to it (topic evidence, prompts, model calls):

- the offline screen always runs, on the typed text or on each free-text form answer
  (evidence offsets are into that stored text or answer);
- the model screen runs too when the operator turned it on (`SafetySettings`); its flags
  count from `min_confidence` up, and lower ones are kept for review only;
- a model screen that cannot give a valid answer fails closed (`failed`).

A risk is answered with the author's reply for each label (`safety_reply`), at once and
with no model call; the lesson waits until the learner writes again.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from tutor.contract import TutorResponse
from tutor.llm.base import LearnerInput, Provider
from tutor.llm.config import LLMSettings
from tutor.llm.policy import AttemptRecord
from tutor.risk.config import SafetyConfig
from tutor.risk.screen import RiskFlag, screen
from tutor.settings import ConfigError, EnvReader

__all__ = ["FAILED_LABEL", "SafetySettings", "ScreenedFlag", "TurnScreen", "safety_reply", "screen_turn"]

FAILED_LABEL = "screen_failed"  # a model screen with no valid answer: the turn waits for review


@dataclass(frozen=True)
class SafetySettings:
    model_screen: bool = False
    min_confidence: float = 0.5
    deadline_s: float = 20.0

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> SafetySettings:
        env = EnvReader(os.environ if environ is None else environ)
        raw = (env.text("TUTOR_SAFETY_MODEL_SCREEN") or "off").lower()
        if raw not in ("on", "off", "1", "0", "true", "false"):
            raise ConfigError(f"TUTOR_SAFETY_MODEL_SCREEN must be on or off (got {raw!r})")
        return cls(
            model_screen=raw in ("on", "1", "true"),
            min_confidence=env.number("TUTOR_SAFETY_MIN_CONFIDENCE", 0.5, low=0.0, high=1.0),
            deadline_s=env.number("TUTOR_SAFETY_SCREEN_TIMEOUT", 20.0, low=0.1, high=600.0),
        )


@dataclass(frozen=True)
class ScreenedFlag:
    flag: RiskFlag
    field: str | None  # the form field whose answer holds the evidence; None: typed text
    shown: bool  # answered with the safety reply (below min_confidence: review only)

    def evidence_dicts(self) -> list[dict[str, Any]]:
        return [{"field": self.field, **e.to_dict()} for e in self.flag.evidence]


@dataclass
class TurnScreen:
    flags: list[ScreenedFlag] = field(default_factory=list)
    failed: bool = False
    attempts: list[AttemptRecord] = field(default_factory=list)
    problem: str | None = None  # for the operator log
    offline_ms: float = 0.0

    @property
    def labels(self) -> list[str]:
        """Labels the learner is answered for, first seen first."""
        return list(dict.fromkeys(f.flag.label for f in self.flags if f.shown))

    @property
    def answers_with_safety(self) -> bool:
        return bool(self.labels) or self.failed

    def turn_flags(self) -> list[str]:
        flags = [f"risk:{label}" for label in self.labels]
        if self.failed:
            flags += ["needs_review", FAILED_LABEL]
        return flags


def texts_of(learner_input: LearnerInput, stored_text: str) -> list[tuple[str | None, str]]:
    """What is screened: the stored typed text, or each free-text answer of a form."""
    if not learner_input.is_form:
        return [(None, stored_text)]
    return [(key, value) for key, value in (learner_input.answers or {}).items()
            if isinstance(value, str) and value.strip()]


async def screen_turn(
    learner_input: LearnerInput,
    stored_text: str,
    config: SafetyConfig,
    settings: SafetySettings,
    provider: Provider | None = None,
    llm_settings: LLMSettings | None = None,
) -> TurnScreen:
    parts = texts_of(learner_input, stored_text)
    result = TurnScreen()
    started = time.perf_counter()
    for field_id, text in parts:
        result.flags += [ScreenedFlag(f, field_id, True) for f in screen(text, config)]
    result.offline_ms = (time.perf_counter() - started) * 1000
    if settings.model_screen and provider is not None and llm_settings is not None:
        from tutor.risk.model_screen import model_screen  # only when the operator turned it on

        for field_id, text in parts:
            outcome = await model_screen(provider, llm_settings, text, config, deadline_s=settings.deadline_s)
            result.attempts += outcome.attempts
            if outcome.failed:
                result.failed, result.problem = True, outcome.problem
                continue
            result.flags += [ScreenedFlag(f, field_id, f.confidence >= settings.min_confidence)
                             for f in outcome.flags]
    return result


def safety_reply(config: SafetyConfig, screened: TurnScreen, language: str) -> TutorResponse:
    """The author's reply for each label shown (in the configuration's order), or the
    author's check-in when the screen failed closed. Each reply is in the language of the
    words that matched (a learner writing Vietnamese in an English module is answered in
    Vietnamese), else in the module's `language`."""
    blocks: list[dict[str, Any]] = []
    spoken = {f.flag.label: f.flag.language for f in reversed(screened.flags) if f.shown and f.flag.language}
    labels = [label for label in config.labels if label in screened.labels]
    for label in labels:
        blocks += [b.model_dump(exclude_none=True) for b in config.reply_for(label, spoken.get(label, language))]
    if not blocks:
        blocks = [b.model_dump(exclude_none=True) for b in config.check_in_for(language)]
    unique = list({(b["type"], b["content"]): b for b in blocks}.values())
    return TutorResponse.model_validate({
        "content": {"text_blocks": unique},
        "meta": {"response_type": "conversational", "emotion": "supportive"},
    })
