"""Backend settings from the environment (TUTOR_LLM_*), checked once at start-up."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass


class ConfigError(ValueError):
    """Configuration that cannot work; the message says which variable to set."""


@dataclass(frozen=True)
class LLMSettings:
    provider: str = "builtin"
    base_url: str | None = None
    api_key: str | None = None
    model: str = "builtin-tutor"
    strategy: str = "prompt"
    temperature: float = 0.7
    max_tokens: int = 2048
    timeout_s: float = 60.0

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> LLMSettings:
        env = os.environ if env is None else env
        provider = env.get("TUTOR_LLM_PROVIDER", "builtin").strip().lower() or "builtin"
        if provider != "builtin":
            raise ConfigError(f"TUTOR_LLM_PROVIDER={provider!r} is not available yet; unset it")
        return cls()
