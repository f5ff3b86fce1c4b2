"""Settings -> the one Provider the app talks to."""

from __future__ import annotations

import httpx

from tutor.llm.base import Provider
from tutor.llm.config import ConfigError, LLMSettings


def make_provider(settings: LLMSettings, *, client: httpx.AsyncClient | None = None) -> Provider:
    """The configured backend. `client` lets a caller share one httpx client (HTTP backends)."""
    if settings.provider == "builtin":
        # Imported here so the HTTP backends never pay for (or depend on) the offline tutor.
        from tutor.llm.builtin import BuiltinTutor

        return BuiltinTutor()
    if settings.provider == "openai":
        from tutor.llm.openai import OpenAIProvider

        return OpenAIProvider(settings, client=client)
    if settings.provider == "anthropic":
        from tutor.llm.anthropic import AnthropicProvider

        return AnthropicProvider(settings, client=client)
    raise ConfigError(
        f"TUTOR_LLM_PROVIDER={settings.provider!r} is not a backend: set it to builtin, openai or anthropic"
    )
