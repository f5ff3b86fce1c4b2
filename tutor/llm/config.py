"""Backend settings from the environment (TUTOR_LLM_*), checked once at start-up.

Every problem raises ConfigError with a message that names the variable and shows a value
that would work, so an operator can fix the environment without reading code.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

# EnvReader and ConfigError live in tutor.settings (the database and usage limits read
# their numbers with them too); they stay importable from here.
from tutor.llm.markers import FAMILIES
from tutor.settings import ConfigError, EnvReader

PROVIDERS = ("builtin", "openai", "anthropic")
STRATEGIES = ("prompt", "json_object", "json_schema")
DEFAULT_BASE_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
EXAMPLE_MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-sonnet-4-5"}
BUILTIN_MODEL = "builtin-tutor"
MIN_CONTEXT = 512  # tokens: less cannot hold the system prompt and a reply


@dataclass(frozen=True)
class LLMSettings:
    provider: str = "builtin"
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)  # never in logs or reprs
    model: str = BUILTIN_MODEL
    strategy: str = "prompt"
    temperature: float = 0.7
    max_tokens: int = 2048
    timeout_s: float = 60.0
    max_retries: int = 2  # extra tries per call for timeouts, connection errors, 429, 5xx
    retry_base_delay_s: float = 0.5  # first backoff; doubles per try, with jitter
    retry_max_delay_s: float = 20.0  # cap for backoff and for a server's Retry-After
    # One deadline for a turn's model work: every try, its backoff, the re-ask. Timeouts are
    # per read, so without it a trickling or silent server could hold a turn for minutes.
    deadline_s: float = 90.0
    stream: bool = False  # turns are streamed (the default for HTTP backends: TUTOR_LLM_STREAM=1)
    turn_token_budget: int | None = None  # per model call: estimated prompt + max_tokens
    conversation_token_budget: int | None = None  # tokens spent over a whole conversation
    context_window: int | None = None  # the model's context in tokens; None: ask the server
    price_input_per_mtok: float | None = None  # currency units per million input tokens
    price_output_per_mtok: float | None = None
    reask_output_chars: int = 1500  # how much of a failed reply the re-ask quotes back
    # The model's chat-template family (tutor.llm.markers.FAMILIES): its end-of-turn markers
    # are sent as stop sequences (prompt, json_object). None: as the server's /props says.
    chat_template: str | None = None
    anthropic_version: str = "2023-06-01"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> LLMSettings:
        env = os.environ if env is None else env
        get = EnvReader(env)
        provider = (get.text("TUTOR_LLM_PROVIDER") or "builtin").lower()
        if provider not in PROVIDERS:
            raise ConfigError(
                f"TUTOR_LLM_PROVIDER={provider!r} is not a backend: set TUTOR_LLM_PROVIDER to "
                "builtin (default, offline), openai (any OpenAI-compatible server) or anthropic"
            )
        strategy = (get.text("TUTOR_LLM_STRATEGY") or "prompt").lower()
        if strategy not in STRATEGIES:
            raise ConfigError(
                f"TUTOR_LLM_STRATEGY={strategy!r} is not a strategy: set TUTOR_LLM_STRATEGY to "
                "prompt, json_object or json_schema"
            )
        max_temp = 1.0 if provider == "anthropic" else 2.0
        chat_template = (get.text("TUTOR_LLM_CHAT_TEMPLATE") or "").lower() or None
        if chat_template is not None and chat_template not in FAMILIES:
            raise ConfigError(
                f"TUTOR_LLM_CHAT_TEMPLATE={chat_template!r} is not a template family: set TUTOR_LLM_CHAT_TEMPLATE "
                f"to one of {', '.join(FAMILIES)} (or leave it unset: llama.cpp's server says which it uses)"
            )
        common = dict(
            strategy=strategy,
            temperature=get.number("TUTOR_LLM_TEMPERATURE", 0.7, low=0.0, high=max_temp),
            max_tokens=get.integer("TUTOR_LLM_MAX_TOKENS", 2048, low=16),
            timeout_s=get.number("TUTOR_LLM_TIMEOUT", 60.0, low=0.001),
            max_retries=get.integer("TUTOR_LLM_MAX_RETRIES", 2, low=0, high=10),
            retry_base_delay_s=get.number("TUTOR_LLM_RETRY_BASE_DELAY", 0.5, low=0.0),
            retry_max_delay_s=get.number("TUTOR_LLM_RETRY_MAX_DELAY", 20.0, low=0.0),
            deadline_s=get.number("TUTOR_LLM_DEADLINE", 90.0, low=1.0),
            # Streaming is the default for HTTP backends: the learner sees the reply as it
            # is written, and Stop and the repetition watcher can cut it short.
            stream=get.flag("TUTOR_LLM_STREAM", default=provider != "builtin"),
            turn_token_budget=get.integer("TUTOR_TURN_TOKEN_BUDGET", None, low=1),
            conversation_token_budget=get.integer("TUTOR_CONVERSATION_TOKEN_BUDGET", None, low=1),
            context_window=get.integer("TUTOR_LLM_CONTEXT", None, low=MIN_CONTEXT),
            price_input_per_mtok=get.number("TUTOR_PRICE_INPUT_PER_MTOK", None, low=0.0),
            price_output_per_mtok=get.number("TUTOR_PRICE_OUTPUT_PER_MTOK", None, low=0.0),
            chat_template=chat_template,
        )
        _check_context(common["context_window"], common["max_tokens"])
        if provider == "builtin":
            return cls(provider="builtin", model=BUILTIN_MODEL, **common)

        base_url = _base_url(get.text("TUTOR_LLM_BASE_URL") or DEFAULT_BASE_URLS[provider], provider)
        model = get.text("TUTOR_LLM_MODEL")
        if not model:
            raise ConfigError(
                f"TUTOR_LLM_MODEL is not set: set TUTOR_LLM_MODEL={EXAMPLE_MODELS[provider]} "
                "(the model name your endpoint serves)"
            )
        api_key = get.text("TUTOR_LLM_API_KEY")
        if not api_key and provider == "anthropic":
            raise ConfigError(
                "TUTOR_LLM_API_KEY is not set: the Anthropic API needs a key; "
                "set TUTOR_LLM_API_KEY=sk-ant-... (from console.anthropic.com)"
            )
        if not api_key and urlsplit(base_url).hostname == "api.openai.com":
            raise ConfigError(
                "TUTOR_LLM_API_KEY is not set: api.openai.com needs a key; set TUTOR_LLM_API_KEY=sk-... "
                "(local OpenAI-compatible servers need none: set TUTOR_LLM_BASE_URL, e.g. "
                "http://127.0.0.1:11434/v1 for Ollama)"
            )
        return cls(provider=provider, base_url=base_url, api_key=api_key, model=model, **common)

    @property
    def prices_configured(self) -> bool:
        return self.price_input_per_mtok is not None or self.price_output_per_mtok is not None

    def cost(self, tokens_in: int, tokens_out: int) -> float | None:
        """What these tokens cost at the configured prices; None when no price is set."""
        if not self.prices_configured:
            return None
        return (
            tokens_in * (self.price_input_per_mtok or 0.0)
            + tokens_out * (self.price_output_per_mtok or 0.0)
        ) / 1_000_000

    def describe(self) -> str:
        """One line for logs and the eval header; the key is never shown."""
        where = f" at {self.base_url}" if self.base_url else ""
        key = " (key set)" if self.api_key else ""
        return f"{self.provider}{where} model={self.model} strategy={self.strategy}{key}"


def _check_context(context: int | None, max_tokens: int) -> None:
    """The reply allowance must leave room for the prompt inside the context window (the
    budget lowers it per call when a long prompt needs the room; this catches the hopeless)."""
    if context is not None and max_tokens >= context:
        raise ConfigError(
            f"TUTOR_LLM_MAX_TOKENS={max_tokens} leaves no room for the prompt in "
            f"TUTOR_LLM_CONTEXT={context}: set TUTOR_LLM_MAX_TOKENS={max(context // 4, 16)} or less, "
            "or set TUTOR_LLM_CONTEXT to the server's real context size (llama-server -c)"
        )


def _base_url(value: str, provider: str) -> str:
    url = value.strip().rstrip("/")
    parts = urlsplit(url)
    example = DEFAULT_BASE_URLS[provider] if provider == "anthropic" else "http://127.0.0.1:11434/v1"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"TUTOR_LLM_BASE_URL={value!r} is not an http(s) URL: set e.g. TUTOR_LLM_BASE_URL={example}"
        )
    for suffix in ("/chat/completions", "/messages"):
        if parts.path.endswith(suffix):
            raise ConfigError(
                f"TUTOR_LLM_BASE_URL={value!r} includes the endpoint path: set "
                f"TUTOR_LLM_BASE_URL={url[: -len(suffix)]} (we append {suffix} ourselves)"
            )
    if provider == "anthropic" and parts.path.endswith("/v1"):
        url = url[: -len("/v1")]  # we call {base}/v1/messages, as Anthropic's SDKs do
    return url
