"""Screening one learner turn, and the reply a risk gets.

The engine screens every stored learner message before anything else happens to it:

- the offline screen always runs, both layers (phrases and meaning, tutor.risk.offline),
  on the typed text or on each free-text form answer (evidence offsets are into that
  stored text or answer) — `screen_offline`;
- the model screen (seed 003's contract, tutor.risk.model_screen) runs too wherever a
  model backend is configured, unless the operator turned it off — `screen_with_model`.
  The engine runs it alongside the lesson's reply and waits for it before the reply is
  stored, so an ordinary turn does not wait for it. Its flags count from `min_confidence`
  up (lower ones go to review only). A model screen that cannot answer fails closed: the
  turn goes to the review list (`needs_review`, `screen_failed`) and the lesson goes on
  under the offline screen's verdict — only a flag changes what the learner sees.

A risk is answered with the author's reply for each label and severity (`safety_reply`),
at once and with no model call; the lesson waits until the learner writes again.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from typing import Any

from tutor.contract import TutorResponse
from tutor.i18n import supported, translator
from tutor.llm.base import LearnerInput, Provider
from tutor.llm.config import LLMSettings
from tutor.llm.policy import AttemptRecord
from tutor.render.callouts import CALLOUT_LABELS, callout_title
from tutor.risk.config import SafetyConfig
from tutor.risk.offline import offline_screen_async
from tutor.risk.screen import RiskFlag
from tutor.risk.semantic import SemanticScreen
from tutor.settings import ConfigError, EnvReader

__all__ = ["FAILED_LABEL", "SafetySettings", "ScreenedFlag", "TurnScreen", "safety_reply", "screen_offline",
           "screen_with_model", "start_model_screen"]

FAILED_LABEL = "screen_failed"  # a model screen with no valid answer: the turn waits for review


@dataclass(frozen=True)
class SafetySettings:
    # None: on wherever a model backend is configured — TUTOR_SAFETY_MODEL_SCREEN=auto, what
    # from_env (and so the app and `tutor chat`) gives by default. False here: an engine made
    # in code without settings (tools, tests) makes no screen calls it was not asked for.
    model_screen: bool | None = False
    min_confidence: float = 0.5
    deadline_s: float = 20.0

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> SafetySettings:
        env = EnvReader(os.environ if environ is None else environ)
        raw = (env.text("TUTOR_SAFETY_MODEL_SCREEN") or "auto").lower()
        choices = {"auto": None, "on": True, "1": True, "true": True, "off": False, "0": False, "false": False}
        if raw not in choices:
            raise ConfigError(f"TUTOR_SAFETY_MODEL_SCREEN must be auto, on or off (got {raw!r})")
        return cls(
            model_screen=choices[raw],
            min_confidence=env.number("TUTOR_SAFETY_MIN_CONFIDENCE", 0.5, low=0.0, high=1.0),
            deadline_s=env.number("TUTOR_SAFETY_SCREEN_TIMEOUT", 20.0, low=0.1, high=600.0),
        )

    def model_screen_for(self, provider_name: str) -> bool:
        """Whether the model screen runs with this backend (never with the built-in tutor)."""
        if provider_name == "builtin":
            return False
        return True if self.model_screen is None else self.model_screen


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
    failed: bool = False  # the model screen could not answer: review, the lesson goes on
    attempts: list[AttemptRecord] = field(default_factory=list)
    problem: str | None = None  # for the operator log
    offline_ms: float = 0.0

    @property
    def labels(self) -> list[str]:
        """Labels the learner is answered for, first seen first."""
        return list(dict.fromkeys(f.flag.label for f in self.flags if f.shown))

    @property
    def imminent(self) -> bool:
        return any(f.shown and f.flag.severity == "imminent" for f in self.flags)

    @property
    def answers_with_safety(self) -> bool:
        return bool(self.labels)

    def turn_flags(self) -> list[str]:
        flags = [f"risk:{label}" for label in self.labels]
        if self.imminent:
            flags.append("risk_imminent")
        if self.failed:
            flags += ["needs_review", FAILED_LABEL]
        return flags

    def with_model(self, model: TurnScreen) -> TurnScreen:
        return TurnScreen([*self.flags, *model.flags], model.failed, [*self.attempts, *model.attempts],
                          model.problem, self.offline_ms)


def texts_of(learner_input: LearnerInput, stored_text: str) -> list[tuple[str | None, str]]:
    """What is screened: the stored typed text, or each free-text answer of a form."""
    if not learner_input.is_form:
        return [(None, stored_text)]
    return [(key, value) for key, value in (learner_input.answers or {}).items()
            if isinstance(value, str) and value.strip()]


async def screen_offline(learner_input: LearnerInput, stored_text: str, config: SafetyConfig,
                         semantic: SemanticScreen | None) -> TurnScreen:
    result = TurnScreen()
    started = time.perf_counter()
    for field_id, text in texts_of(learner_input, stored_text):
        result.flags += [ScreenedFlag(f, field_id, True) for f in await offline_screen_async(text, config, semantic)]
    result.offline_ms = (time.perf_counter() - started) * 1000
    return result


async def screen_with_model(learner_input: LearnerInput, stored_text: str, config: SafetyConfig,
                            settings: SafetySettings, provider: Provider, llm_settings: LLMSettings) -> TurnScreen:
    from tutor.risk.model_screen import model_screen

    result = TurnScreen()
    for field_id, text in texts_of(learner_input, stored_text):
        try:
            outcome = await model_screen(provider, llm_settings, text, config, deadline_s=settings.deadline_s)
        except Exception as exc:  # noqa: BLE001 - our bug must not cost the learner the lesson
            result.failed, result.problem = True, f"risk_screen crashed: {type(exc).__name__}"
            continue
        result.attempts += outcome.attempts
        if outcome.failed:
            result.failed, result.problem = True, outcome.problem
            continue
        result.flags += [ScreenedFlag(f, field_id, f.confidence >= settings.min_confidence)
                         for f in outcome.flags]
    return result


def start_model_screen(learner_input: LearnerInput, stored_text: str, config: SafetyConfig, settings: SafetySettings,
                       provider: Provider, llm_settings: LLMSettings) -> asyncio.Task[TurnScreen] | None:
    """The model screen started in the background (None where it does not run: the
    built-in tutor, or turned off); the engine awaits it before a reply is kept."""
    if not settings.model_screen_for(provider.name):
        return None
    return asyncio.get_running_loop().create_task(
        screen_with_model(learner_input, stored_text, config, settings, provider, llm_settings))


def _titled(block: dict[str, Any], said: str, page: str) -> dict[str, Any]:
    """A callout of a reply in another language than the page's (a learner writing Vietnamese
    in an English module) labelled in the reply's ("**Lưu ý:** …", not the page's "Warning");
    an author's own title is kept."""
    kind, content = block.get("type"), str(block.get("content") or "")
    if supported(said) == supported(page) or kind not in CALLOUT_LABELS or callout_title(content)[0]:
        return block
    label = translator(said).page(CALLOUT_LABELS[kind])
    return {**block, "content": f"**{label}:** {content}"}


def safety_reply(config: SafetyConfig, screened: TurnScreen, language: str) -> TutorResponse:
    """The author's reply for each label shown — its emergency-first reply when a flag of it
    is imminent — imminent labels first, then in the configuration's order; the author's
    check-in when there is none. Each reply is in the language of the words that matched (a
    learner writing Vietnamese in an English module is answered in Vietnamese), else in the
    module's `language`."""
    blocks: list[dict[str, Any]] = []
    shown = [f.flag for f in screened.flags if f.shown]
    spoken = {f.label: f.language for f in reversed(shown) if f.language}
    imminent = {f.label for f in shown if f.severity == "imminent"}
    labels = sorted((label for label in config.labels if label in screened.labels),
                    key=lambda label: label not in imminent)
    for label in labels:
        severity = "imminent" if label in imminent else "serious"
        said = spoken.get(label, language)
        blocks += [_titled(b.model_dump(exclude_none=True), said, language)
                   for b in config.reply_for(label, said, severity)]
    if not blocks:
        blocks = [b.model_dump(exclude_none=True) for b in config.check_in_for(language)]
    unique = list({(b["type"], b["content"]): b for b in blocks}.values())
    return TutorResponse.model_validate({
        "content": {"text_blocks": unique},
        "meta": {"response_type": "conversational", "emotion": "supportive"},
    })
