"""Where the app keeps its data; read from the environment in one place."""

from __future__ import annotations

import os
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


# Seconds a worker's claim on answering a message lasts without renewal (tutor.claims): a
# turn a dead worker held is taken over by another worker this long after its last beat.
REPLY_LEASE_S = float(os.environ.get("TUTOR_REPLY_LEASE", "20"))


def database_url() -> str:
    """TUTOR_DATABASE_URL, or a SQLite file in the data directory."""
    url = os.environ.get("TUTOR_DATABASE_URL", "").strip()
    if url:
        return url
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{DATA_DIR / 'tutor.db'}"
