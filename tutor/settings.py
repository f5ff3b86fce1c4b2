"""Where the app keeps its data; read from the environment in one place.

`EnvReader` reads TUTOR_* numbers and switches for every part of the app (the model
backend, the database, usage limits, the safety screen). It lives here, below all of
them, so none has to import another's package for it. Every problem raises ConfigError
with a message that names the variable and shows a value that would work, so an operator
can fix the environment without reading code.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("TUTOR_DATA_DIR", REPO_ROOT / "data"))

# Learner text longer than this is refused with a message (nothing is stored).
MAX_MESSAGE_CHARS = int(os.environ.get("TUTOR_MAX_MESSAGE_CHARS", "4000"))

# The language of pages that belong to no module (the start page lists modules in several
# languages); a chat page speaks its module's language. A tag with a catalogue in
# tutor/locales ("en", "vi"); others fall back to English.
LANGUAGE = os.environ.get("TUTOR_LANGUAGE", "").strip() or "en"


# Hosts (comma-separated, e.g. "cdn.example.org, .school.example") from which a model's
# media and markdown images may load, besides the app's own /media/ assets. Default: none,
# so a reply cannot make the learner's browser call any other server. A leading dot allows
# subdomains too. Read on each call so tests and a restarted worker see the current value.
def media_hosts() -> tuple[str, ...]:
    raw = os.environ.get("TUTOR_MEDIA_HOSTS", "")
    return tuple(h.strip().lower().removeprefix("*") for h in raw.split(",") if h.strip())


# Seconds a worker's claim on answering a message lasts without renewal (tutor.turns.claims): a
# turn a dead worker held is taken over by another worker this long after its last beat.
REPLY_LEASE_S = float(os.environ.get("TUTOR_REPLY_LEASE", "20"))


def database_url() -> str:
    """TUTOR_DATABASE_URL, or a SQLite file in the data directory."""
    url = os.environ.get("TUTOR_DATABASE_URL", "").strip()
    if url:
        return url
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{DATA_DIR / 'tutor.db'}"


class ConfigError(ValueError):
    """Configuration that cannot work; the message says which variable to set."""


class EnvReader:
    """Typed reads of environment variables; empty strings count as unset."""

    def __init__(self, env: Mapping[str, str]):
        self.env = env

    def text(self, name: str) -> str | None:
        value = self.env.get(name)
        value = value.strip() if value is not None else None
        return value or None

    def number(self, name: str, default, *, low: float | None = None, high: float | None = None):
        raw = self.text(name)
        if raw is None:
            return default
        try:
            value = float(raw)
        except ValueError:
            raise ConfigError(f"{name}={raw!r} is not a number: set e.g. {name}={_example(name)}") from None
        _check_range(name, raw, value, low, high)
        return value

    def integer(self, name: str, default, *, low: int | None = None, high: int | None = None):
        raw = self.text(name)
        if raw is None:
            return default
        try:
            value = int(raw.replace("_", ""))
        except ValueError:
            raise ConfigError(
                f"{name}={raw!r} is not a whole number: set e.g. {name}={_example(name)}"
            ) from None
        _check_range(name, raw, value, low, high)
        return value

    def flag(self, name: str, *, default: bool = False) -> bool:
        raw = (self.text(name) or ("1" if default else "0")).lower()
        if raw in ("1", "true", "yes", "on"):
            return True
        if raw in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{name}={raw!r} is not a switch: set {name}=1 or {name}=0")


def _check_range(name: str, raw: str, value: float, low, high) -> None:
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"at least {low}" if high is None else f"between {low} and {high}"
        raise ConfigError(f"{name}={raw} is out of range: set {name} to a value {bounds}, "
                          f"e.g. {name}={_example(name)}")


# A value that works, for each variable read through EnvReader (the messages show it).
_EXAMPLES = {
    "TUTOR_SAFETY_MIN_CONFIDENCE": "0.5",
    "TUTOR_SAFETY_SCREEN_TIMEOUT": "20",
    "TUTOR_LLM_TEMPERATURE": "0.7",
    "TUTOR_LLM_MAX_TOKENS": "2048",
    "TUTOR_LLM_TIMEOUT": "60",
    "TUTOR_LLM_DEADLINE": "90",
    "TUTOR_LLM_MAX_RETRIES": "2",
    "TUTOR_TURN_TOKEN_BUDGET": "16000",
    "TUTOR_CONVERSATION_TOKEN_BUDGET": "400000",
    "TUTOR_LLM_CONTEXT": "8192",
    "TUTOR_PRICE_INPUT_PER_MTOK": "0.15",
    "TUTOR_PRICE_OUTPUT_PER_MTOK": "0.60",
    "TUTOR_LLM_MAX_CONNECTIONS": "1000",
    "TUTOR_TURNS_PER_MINUTE": "30 (0: no limit)",
    "TUTOR_DAILY_TOKENS": "200000 (0: no limit)",
    "TUTOR_CONVERSATIONS_PER_DAY": "20 (0: no limit)",
    "TUTOR_ANONYMOUS_LEARNERS_PER_ADDRESS": "30",
    "TUTOR_SIGNIN_FAILURES": "10",
    "TUTOR_SIGNIN_ACCOUNT_FAILURES": "50",
    "TUTOR_SIGNUPS_PER_DAY": "5",
    "TUTOR_MODEL_CALLS_IN_FLIGHT": "4 (what the model server runs at once; 0: no cap)",
    "TUTOR_DB_THREADS": "8",
    "TUTOR_EMBED_THREADS": "2",
}


def _example(name: str) -> str:
    return _EXAMPLES.get(name, "1")
