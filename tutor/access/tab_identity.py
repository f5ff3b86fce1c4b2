"""Whose data a tab's state holds. Plain Python (the Reflex glue is tutor/web/auth_state.py).

A tab's state belongs to one identity: the credential the browser presented (the session
cookie's token, the trusted proxy's header, or this browser's own key in anonymous mode)
and the person it named then, with their role. `binding` says both in one string; when an
event's binding differs from the one the tab's state was built for, the state is reset
before anything is served. The credential part needs no database: a tab reconnecting
with another cookie (signed out, somebody else signed in) is told apart even while the
database cannot say who the new cookie names.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from tutor.access import sessions
from tutor.access.accounts import AuthSettings, Identity

__all__ = ["binding", "credential_of", "credential_part"]


def credential_of(settings: AuthSettings, headers: Mapping[str, str], local_key: str = "") -> str:
    """A digest of what names the person on this connection ("" when nothing does)."""
    if settings.mode == "anonymous":
        raw = (local_key or "").strip()
    elif settings.mode == "header":
        named = [v for k, v in headers.items() if k.lower() == settings.header]
        raw = "\n".join(named)
    else:
        cookie = next((v for k, v in headers.items() if k.lower() == "cookie"), "")
        raw = sessions.cookie_value(cookie)
    return hashlib.sha256(f"{settings.mode}\n{raw}".encode()).hexdigest()[:32] if raw else ""


def binding(credential: str, who: Identity | None) -> str:
    """The tab's owner: the credential and who it named, with their role ("" for nobody).
    A changed role is a new owner too (an operator made a learner sees no console data)."""
    if who is None:
        return ""
    return f"{credential}|{who.account_id or '-'}|{who.learner_key}|{who.role}"


def credential_part(bound: str) -> str:
    return bound.partition("|")[0]
