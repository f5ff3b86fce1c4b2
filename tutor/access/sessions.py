"""Sign-in sessions: a random token in an HttpOnly cookie, only its SHA-256 in the database.

Plain Python. `tutor.access.accounts` decides who may sign in; this module keeps them signed in:
making, finding (sliding expiry), and ending sessions, and the cookie's exact flags. The
per-username-and-address limit on failed sign-ins is `tutor.access.signin_limit` (also importable
from here as FailureLimit and FailureLimitFromEnv).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone

from sqlmodel import delete, select

from tutor.access.signin_limit import FailureLimit, FailureLimitFromEnv  # noqa: F401  (importable from here too)
from tutor.storage.store import Account, AuthSession, Learner, Store, utcnow

COOKIE_NAME = "tutor_session"
# The sliding expiry is written back at most this often, not on every page load.
TOUCH_EVERY = timedelta(minutes=1)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _aware(moment: datetime) -> datetime:
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment


def create_session(store: Store, account_id: int, *, days: float, now: datetime | None = None) -> str:
    """A new session for the account; returns the token (the cookie's value). Only its hash
    is stored, so a copy of the database signs nobody in. A session starting is a sign-in
    (the sign-in form's, or sign-up's automatic one): the account's last sign-in is now."""
    now = now or utcnow()
    token = secrets.token_urlsafe(32)
    with store.session() as s:
        s.add(AuthSession(token_hash=token_hash(token), account_id=account_id, created_at=now,
                          expires_at=now + timedelta(days=days), last_seen_at=now))
        account = s.get(Account, account_id)
        if account is not None:
            account.last_sign_in_at = now
            s.add(account)
        s.commit()
    return token


def account_for_token(store: Store, token: str, *, days: float, now: datetime | None = None) -> Account | None:
    """The account a session token belongs to, or None (unknown, expired, disabled). Use
    slides the expiry forward, written at most once a minute."""
    found = session_account(store, token, days=days, now=now)
    return found[0] if found is not None else None


def session_account(store: Store, token: str, *, days: float,
                    now: datetime | None = None) -> tuple[Account, str] | None:
    """The live session's account and its learner's key, in one indexed read: None for an
    unknown, expired or signed-out token or a disabled account. Every event of an open tab
    asks this (tutor.web.auth_state), so a sign-out, an expiry, a disabled account or a changed
    role is seen at the very next event, by every worker: the row is the truth, nothing
    cached can outlive it. Use slides the expiry forward, written at most once a minute."""
    if not token or len(token) > 256:
        return None
    now = now or utcnow()
    digest = token_hash(token)
    with store.session() as s:
        row = s.exec(select(AuthSession, Account, Learner.key)
                     .join(Account, Account.id == AuthSession.account_id)
                     .join(Learner, Learner.id == Account.learner_id)
                     .where(AuthSession.token_hash == digest)).first()
        if row is None:
            return None
        session, account, learner_key = row
        if _aware(session.expires_at) <= now:
            s.delete(session)
            s.commit()
            return None
        if account.disabled:
            return None
        if now - _aware(session.last_seen_at) >= TOUCH_EVERY:
            session.last_seen_at = now
            session.expires_at = now + timedelta(days=days)
            s.add(session)
            s.commit()
        return account, learner_key


def end_session(store: Store, token: str) -> None:
    """Sign-out: the row goes, so the token is worthless even if a copy survives."""
    if not token:
        return
    with store.session() as s:
        s.exec(delete(AuthSession).where(AuthSession.token_hash == token_hash(token)))
        s.commit()


def end_all_sessions(store: Store, account_id: int) -> int:
    with store.session() as s:
        result = s.exec(delete(AuthSession).where(AuthSession.account_id == account_id))
        s.commit()
        return result.rowcount or 0


# ------------------------------------------------------------------ cookies


def cookie_value(cookie_header: str, name: str = COOKIE_NAME) -> str:
    """One cookie's value from a Cookie header (a malformed neighbour does not hide it)."""
    for part in (cookie_header or "").split(";"):
        key, sep, value = part.strip().partition("=")
        if sep and key.strip() == name:
            return value.strip().strip('"')
    return ""


def is_https(headers: Mapping[str, str], scheme: str = "http") -> bool:
    proto = (headers.get("x-forwarded-proto") or "").split(",")[0].strip().lower()
    return scheme == "https" or proto == "https"


# The browser keeps the cookie this long (browsers cap it at 400 days); the server decides
# when the session ends (TUTOR_SESSION_DAYS after its last use), since only the server sees
# each use: pages and the event socket cannot set a cookie again on every visit.
COOKIE_MAX_AGE_DAYS = 400


def session_cookie(token: str, *, days: float, secure: bool) -> str:
    """The Set-Cookie value: not readable by page scripts (HttpOnly), not sent by other
    sites' forms or images (SameSite=Lax), over https only when the page came over https."""
    max_age = int(max(days, COOKIE_MAX_AGE_DAYS) * 86400)
    flags = f"{COOKIE_NAME}={token}; Path=/; Max-Age={max_age}; HttpOnly; SameSite=Lax"
    return flags + ("; Secure" if secure else "")


def cleared_cookie(*, secure: bool) -> str:
    flags = f"{COOKIE_NAME}=; Path=/; Max-Age=0; Expires=Thu, 01 Jan 1970 00:00:00 GMT; HttpOnly; SameSite=Lax"
    return flags + ("; Secure" if secure else "")
