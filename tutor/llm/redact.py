"""Secrets kept out of every log line and everything stored or shown: bearer tokens,
provider keys, key-like query parameters and headers, a URL's password, and the values of
environment variables named like keys (`scrub`, `scrub_data`). Every log record is scrubbed
as it is made (`install_log_scrubber`, installed on import; tutor.llm.errors imports this
module, so every path to a model has it)."""

from __future__ import annotations

import logging
import os
import re
from typing import Any

__all__ = ["install_log_scrubber", "register_secret", "scrub", "scrub_data"]

# Secrets that must never reach a log line: bearer tokens, provider keys, key-like query
# parameters and headers, and the password part of a URL (user:password@host). Each pattern
# comes with the words it cannot match without (as _folded writes them): a text holding none
# of them is not searched with it. A streamed reply is scrubbed each time the page's preview
# reads it, and most text holds none of them.
_SECRETS = [
    (re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?)(?:(?:basic|bearer)\s+)?[A-Za-z0-9._~+/=-]+"),
     r"\1***", ("authorization",)),
    (re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{6,}"), "Bearer ***", ("bearer",)),
    (re.compile(r"\b(sk|rk)-(?:ant-|proj-|or-)?[A-Za-z0-9_-]{6,}"), r"\1-***", ("sk-", "rk-")),
    (re.compile(r"(?i)\b((?:x-)?api[-_]?key|access[-_]?token|auth[-_]?token|client[-_]?secret|secret|"
                r"password|passwd|token)(\s*[=:]\s*|[\"']\s*:\s*[\"'])([^\s&\"',;]{3,})"), r"\1\2***",
     ("api", "access", "auth", "secret", "passw", "token")),
    (re.compile(r"(?i)([?&](?:key|token|sig|signature)=)[^&\s#\"']+"), r"\1***",
     ("key=", "token=", "sig=", "signature=")),
    # Greedy to the last "@" of the authority: a password may itself hold an "@".
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]*):[^/\s]+@"), r"\1:***@", ("://",)),
]

# Environment variables whose values are secrets wherever they turn up, e.g. an endpoint
# that echoes TUTOR_LLM_API_KEY back in its 401 body whatever the key looks like.
_SECRET_NAMES = re.compile(r"(?i)(?:^|_)(?:API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD)$")
_MIN_SECRET = 6  # shorter values ("none", "x") are not worth hiding and would garble text
_registered: set[str] = set()


def register_secret(value: str | None) -> None:
    """Scrub `value` (a key given in code rather than the environment) from now on."""
    if value and len(value.strip()) >= _MIN_SECRET:
        _registered.add(value.strip())


_secret_names: tuple[int, list[str]] = (-1, [])


def _known_secrets() -> list[str]:
    # Which variables are secrets is found again only when the environment grows or
    # shrinks (scanning it all on every audit row cost more than the row); their values
    # are read afresh each time.
    global _secret_names
    if _secret_names[0] != len(os.environ):
        _secret_names = (len(os.environ), [name for name in os.environ if _SECRET_NAMES.search(name)])
    values = set(_registered)
    for name in _secret_names[1]:
        value = (os.environ.get(name) or "").strip()
        if len(value) >= _MIN_SECRET:
            values.add(value)
    return sorted(values, key=len, reverse=True)  # a key containing another goes first


def scrub(text: str, secrets: list[str] | None = None) -> str:
    """`text` with keys, bearer tokens and URL passwords replaced by ***."""
    for secret in _known_secrets() if secrets is None else secrets:
        if secret in text:
            text = text.replace(secret, "***")
    folded = _folded(text)
    for pattern, replacement, needs in _SECRETS:
        if any(word in folded for word in needs):
            replaced = pattern.sub(replacement, text)
            if replaced != text:  # folded again only when a secret was masked
                text, folded = replaced, _folded(replaced)
    return text


def _folded(text: str) -> str:
    """`text` as the patterns' case-blind matching sees it, for the words they need: every
    character a pattern matches as "s" or "k" ("ſ", the kelvin sign) folds to it, and so do
    "İ" and "ı" to "i"."""
    return text.casefold().replace("\u0307", "").replace("\u0131", "i")


def scrub_data(value: Any, secrets: list[str] | None = None) -> Any:
    """`scrub` applied to every string in JSON-like data (dict keys are left as they are)."""
    if secrets is None:
        secrets = _known_secrets()
    if isinstance(value, str):
        return scrub(value, secrets)
    if isinstance(value, dict):
        return {k: scrub_data(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub_data(v, secrets) for v in value]
    return value


def install_log_scrubber() -> None:
    """Scrub every log record as it is made, whoever logs it (ours, httpx, Reflex): its
    message and its traceback. Idempotent. Installed when this module is imported, which
    every path to a model does, so no secret of ours reaches a log handler."""
    previous = logging.getLogRecordFactory()
    if getattr(previous, "_tutor_scrubs", False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # a malformed call: logging reports it as usual, later
            return record
        clean = scrub(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[0] is not None:
            record.exc_text = scrub(logging.Formatter().formatException(record.exc_info))
        return record

    factory._tutor_scrubs = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)


install_log_scrubber()
