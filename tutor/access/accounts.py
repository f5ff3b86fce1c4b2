"""Who is signed in: accounts, passwords, roles and the identity of a request.

Plain Python (no Reflex): the sign-in routes (tutor/web/auth_routes.py), the Reflex state and
`tutor users` all call these. Three ways to know a person (TUTOR_AUTH):

- accounts (default): username + password (argon2id, argon2-cffi), a session cookie;
- header: a trusted reverse proxy names the person (TUTOR_AUTH_HEADER), accepted only from
  TUTOR_TRUSTED_PROXIES; an account is made on first sight, with no password;
- anonymous: the browser's own random key (kiosks, demos), today's behaviour.
"""

from __future__ import annotations

import ipaddress
import os
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache, lru_cache
from urllib.parse import urlsplit

import sqlalchemy
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from sqlmodel import select

from tutor.access import sessions
from tutor.access.passwords import PASSWORD_MAX, PASSWORD_MIN, password_problem
from tutor.access.usage import in_words
from tutor.i18n import N_, Phrase
from tutor.storage.store import Account, Learner, Store

MODES = ("accounts", "header", "anonymous")
USERNAME_RE = re.compile(r"[a-z0-9._-]{3,32}")
HEADER_USERNAME_RE = re.compile(r"[a-z0-9._@+-]{1,64}")  # proxies name people by e-mail too

# What the sign-in and sign-up pages say for each error code (?error=CODE); the pages show
# them in TUTOR_LANGUAGE (tutor/locales).
MESSAGES = {
    "credentials": N_("That username and password don't match. Check them and try again."),
    "missing": N_("Enter your username and password."),
    "username_invalid": N_("Usernames are 3–32 characters: letters, digits, dots, dashes or underscores."),
    "username_taken": N_("That username is taken. Please choose another one."),
    "password_short": N_("Passwords need at least {least} characters."),
    "password_long": N_("Passwords can have at most {most} characters."),
    "password_blank": N_("A password can't be only spaces."),
    "password_common": N_("That password is one of the most commonly used, so it is easy to guess. Please choose "
                          "another one: a few words that don't belong together make a good password."),
    "disabled": N_("This account is switched off. Please ask whoever runs this Tutor."),
    "throttled": N_("Too many attempts — try again in {minutes} minutes."),
    "account_locked": N_("This account had too many wrong passwords, so signing in to it is paused for "
                         "{minutes} minutes to keep it safe. If it is yours, try again then — the password "
                         "still protects it."),
    "signups": N_("Too many accounts have been created from this network today. You can create one in {wait}."),
    "unavailable": N_("Tutor is unavailable right now. Please try again in a few minutes."),
    "proxy": N_("This Tutor signs people in through your organisation's sign-in service, and this "
                "visit did not come through it. Please open Tutor from its usual address."),
}


def message_for(code: str, minutes: int = 15) -> str:
    """The words for an error code, in English (a Phrase: `localize` words it in a language)."""
    text = MESSAGES.get(code, "")
    minutes = max(1, minutes)
    return Phrase(text, minutes=minutes, wait=in_words(minutes * 60), least=PASSWORD_MIN,
                  most=PASSWORD_MAX) if text else ""


class AccountError(Exception):
    """A refusal the person can act on; `code` names it (see MESSAGES)."""

    def __init__(self, code: str, minutes: int = 0) -> None:
        super().__init__(message_for(code, minutes) or code)
        self.code, self.minutes = code, minutes


@dataclass(frozen=True)
class Identity:
    learner_key: str
    username: str  # "" when anonymous
    role: str  # "learner" | "operator"
    account_id: int | None = None

    @property
    def is_operator(self) -> bool:
        return self.role == "operator"


@dataclass(frozen=True)
class AuthSettings:
    mode: str = "accounts"
    header: str = "x-forwarded-user"  # lower-case, as headers are compared
    # TUTOR_TRUSTED_PROXIES: the only peers whose X-Forwarded-For / -Host and identity
    # header are believed. Default none, in every mode: loopback is not special (another
    # program on the same machine, or a proxy that passes the client's own headers on).
    trusted_proxies: tuple[str, ...] = ()
    operators: frozenset[str] = field(default_factory=frozenset)
    session_days: float = 14.0
    # TUTOR_PUBLIC_URL: the addresses learners open the app at, for a proxy that does not pass
    # the Host they asked for; pages of these origins may use the event socket and post forms.
    public_origins: tuple[str, ...] = ()

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> AuthSettings:
        env = os.environ if env is None else env
        mode = (env.get("TUTOR_AUTH") or "accounts").strip().lower()
        if mode not in MODES:
            raise ValueError(f"TUTOR_AUTH={mode!r} is not one of {', '.join(MODES)}: set e.g. TUTOR_AUTH=accounts")
        raw_days = (env.get("TUTOR_SESSION_DAYS") or "14").strip()
        try:
            days = float(raw_days)
        except ValueError:
            days = 0.0
        if not 0 < days <= 3650:
            raise ValueError(f"TUTOR_SESSION_DAYS={raw_days!r} is not a number of days: set e.g. TUTOR_SESSION_DAYS=14")
        proxies = tuple(p.strip() for p in (env.get("TUTOR_TRUSTED_PROXIES") or "").split(",") if p.strip())
        for proxy in proxies:
            try:
                ipaddress.ip_network(proxy, strict=False)
            except ValueError:
                raise ValueError(f"TUTOR_TRUSTED_PROXIES has {proxy!r}, which is not an address or network: "
                                 "set e.g. TUTOR_TRUSTED_PROXIES=127.0.0.1,10.0.0.0/8") from None
        if mode == "header" and not proxies:
            raise ValueError("TUTOR_AUTH=header believes TUTOR_AUTH_HEADER only from TUTOR_TRUSTED_PROXIES, which "
                             "is empty: set it to your sign-in proxy's address, e.g. TUTOR_TRUSTED_PROXIES=127.0.0.1")
        operators = frozenset(n.strip().lower() for n in (env.get("TUTOR_OPERATORS") or "").split(",") if n.strip())
        header = (env.get("TUTOR_AUTH_HEADER") or "X-Forwarded-User").strip().lower()
        public = tuple(_origin(url) for url in (env.get("TUTOR_PUBLIC_URL") or "").split(",") if url.strip())
        # TUTOR_SESSION_RECHECK is gone: every event of an open tab checks its session.
        return cls(mode, header, proxies, operators, days, public)

    def trusts(self, client_host: str) -> bool:
        return _trusted(self.trusted_proxies, client_host)

    def client_address(self, forwarded_for: str, direct: str) -> str:
        """Where a request came from: the direct peer, or — when the peer is a trusted proxy —
        the nearest X-Forwarded-For address that is not one of the trusted proxies (each
        proxy appends the address it saw; anything further left the client may have written)."""
        if not self.trusts(direct):
            return direct
        for hop in reversed([a.strip() for a in (forwarded_for or "").split(",") if a.strip()]):
            if not self.trusts(hop):
                try:
                    return ipaddress.ip_address(hop.removeprefix("[").removesuffix("]")).compressed
                except ValueError:
                    return direct  # not an address: not a proxy's entry
        return direct

    def origin_allowed(self, origin: str, host: str, forwarded_host: str, client_host: str) -> bool:
        """Whether a page of `origin` is this site's own: the host the browser asked for (the
        Host header, or a trusted proxy's X-Forwarded-Host), or one of TUTOR_PUBLIC_URL. The
        one rule for the event socket and the sign-in posts; no Origin is not this site."""
        if not origin or origin == "null":
            return False
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False
        hosts = {host.lower()}
        if self.trusts(client_host):
            hosts.add(forwarded_host.split(",")[0].strip().lower())
        own = f"{parts.scheme}://{parts.netloc}".lower()
        return parts.netloc.lower() in hosts - {""} or own in self.public_origins


def _origin(url: str) -> str:
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"TUTOR_PUBLIC_URL has {url.strip()!r}, which is not an http(s) address: set e.g. "
                         "TUTOR_PUBLIC_URL=https://tutor.example.org (several: comma-separated)")
    return f"{parts.scheme}://{parts.netloc}".lower()


@cache
def auth_settings() -> AuthSettings:
    """AuthSettings.from_env(), read once per process: a tab's every event asks who is
    signed in, and the environment does not change under a running server (an operator
    restarts it). A test that changes TUTOR_AUTH* in its own process calls
    `auth_settings.cache_clear()`. A wrong setting is not cached: it raises each time."""
    return AuthSettings.from_env()


@lru_cache(maxsize=64)
def _networks(proxies: tuple[str, ...]) -> tuple[ipaddress._BaseNetwork, ...]:
    return tuple(ipaddress.ip_network(p, strict=False) for p in proxies)


def _trusted(proxies: tuple[str, ...], client_host: str) -> bool:
    try:
        address = ipaddress.ip_address((client_host or "").strip().removeprefix("[").removesuffix("]"))
    except ValueError:
        return False
    if getattr(address, "ipv4_mapped", None):
        address = address.ipv4_mapped
    return any(address in network for network in _networks(proxies))


# ------------------------------------------------------------------ usernames and passwords

_hasher = PasswordHasher()  # argon2id with the library's (RFC 9106 low-memory) parameters


@lru_cache(maxsize=1)
def _dummy_hash() -> str:
    return _hasher.hash(uuid.uuid4().hex)


def normalise_username(name: str) -> str:
    return (name or "").strip().lower()


def check_username(name: str) -> str:
    """The stored (lower-case) form, or AccountError("username_invalid")."""
    username = normalise_username(name)
    if not USERNAME_RE.fullmatch(username):
        raise AccountError("username_invalid")
    return username


def check_password(password: str) -> None:
    """AccountError for a password that will not do (tutor.access.passwords: length, blank, common)."""
    problem = password_problem(password)
    if problem:
        raise AccountError(problem)


def hash_password(password: str) -> str:
    check_password(password)
    return _hasher.hash(password)


def _verify(password_hash: str | None, password: str) -> bool:
    try:
        return _hasher.verify(password_hash or _dummy_hash(), password)
    except (VerificationError, InvalidHashError):
        return False


# ------------------------------------------------------------------ accounts


def find_account(store: Store, username: str) -> Account | None:
    with store.session(read_only=True) as s:
        return s.exec(select(Account).where(Account.username == normalise_username(username))).first()


def create_account(store: Store, username: str, password: str | None, *, role: str = "learner",
                   local_key: str = "", header: bool = False) -> Account:
    """A new account with its learner. `local_key`: this browser's anonymous learner key;
    their conversations come along when no other account owns that learner yet."""
    if header:
        username = normalise_username(username)
        if not HEADER_USERNAME_RE.fullmatch(username):
            raise AccountError("username_invalid")
    else:
        username = check_username(username)
    password_hash = hash_password(password) if password is not None else None
    if role not in ("learner", "operator"):
        raise ValueError(f"role {role!r} is not learner or operator")
    with store.session() as s:
        if s.exec(select(Account.id).where(Account.username == username)).first() is not None:
            raise AccountError("username_taken")
        learner = None
        if local_key:
            learner = s.exec(select(Learner).where(Learner.key == local_key[:128])).first()
            if learner is not None and s.exec(select(Account.id).where(Account.learner_id == learner.id)).first():
                learner = None  # someone else's: never hand their conversations over
        if learner is None:
            learner = Learner(key=uuid.uuid4().hex)
            s.add(learner)
            s.flush()
        account = Account(username=username, password_hash=password_hash, role=role, learner_id=learner.id)
        s.add(account)
        try:
            s.commit()
        except sqlalchemy.exc.IntegrityError:  # the same name, at the same moment
            s.rollback()
            raise AccountError("username_taken") from None
        return account


def authenticate(store: Store, username: str, password: str) -> Account:
    """The account for a correct username and password, else AccountError("credentials")
    (or "disabled"). An unknown name costs the same hashing time as a known one."""
    name = normalise_username(username)
    account = find_account(store, name) if USERNAME_RE.fullmatch(name) else None
    if not _verify(account.password_hash if account else None, (password or "")[:PASSWORD_MAX * 4]):
        raise AccountError("credentials")
    if account is None or account.password_hash is None:  # pragma: no cover - the dummy never verifies
        raise AccountError("credentials")
    if account.disabled:
        raise AccountError("disabled")
    if not _hasher.check_needs_rehash(account.password_hash):
        return account  # the session made next records the sign-in (tutor.access.sessions)
    with store.session() as s:
        row = s.get(Account, account.id)
        row.password_hash = _hasher.hash(password)
        s.add(row)
        s.commit()
        return row


def _update(store: Store, username: str, change) -> Account:
    with store.session() as s:
        account = s.exec(select(Account).where(Account.username == normalise_username(username))).first()
        if account is None:
            raise LookupError(f"no account called {normalise_username(username)!r}")
        change(account)
        s.add(account)
        s.commit()
        return account


def set_password(store: Store, username: str, password: str) -> Account:
    """A new password; every session of the account ends (sign in again everywhere)."""
    new_hash = hash_password(password)
    account = _update(store, username, lambda a: setattr(a, "password_hash", new_hash))
    sessions.end_all_sessions(store, account.id)
    return account


def set_disabled(store: Store, username: str, disabled: bool = True) -> Account:
    account = _update(store, username, lambda a: setattr(a, "disabled", disabled))
    if disabled:
        sessions.end_all_sessions(store, account.id)
    return account


def set_role(store: Store, username: str, role: str) -> Account:
    if role not in ("learner", "operator"):
        raise ValueError(f"role {role!r} is not learner or operator")
    return _update(store, username, lambda a: setattr(a, "role", role))


def list_accounts(store: Store) -> list[Account]:
    with store.session(read_only=True) as s:
        return list(s.exec(select(Account).order_by(Account.username)).all())


def _learner_key(store: Store, account: Account) -> str:
    with store.session(read_only=True) as s:
        return s.exec(select(Learner.key).where(Learner.id == account.learner_id)).one()


def identity_of(store: Store, account: Account, settings: AuthSettings | None = None,
                learner_key: str | None = None) -> Identity:
    operators = settings.operators if settings and settings.mode == "header" else frozenset()
    role = "operator" if account.role == "operator" or account.username in operators else "learner"
    key = learner_key if learner_key is not None else _learner_key(store, account)
    return Identity(key, account.username, role, account.id)


def identity_for_request(store, headers: Mapping[str, str], client_host: str, *,
                         local_key: str = "", settings: AuthSettings | None = None) -> Identity | None:
    """The signed-in person for an HTTP request or a websocket's headers (cookie, proxy
    header, or the anonymous local key); None when nobody is signed in."""
    settings = settings or auth_settings()
    lowered = {k.lower(): v for k, v in headers.items()}
    if settings.mode == "anonymous":
        key = (local_key or "").strip()[:128]
        return Identity(key, "", "learner") if key else None
    if settings.mode == "header":
        # Two identity headers (one the client's own, one the proxy's) name nobody: which one
        # the proxy set cannot be told. A multi-valued mapping (Starlette's) shows each copy.
        named = [v for k, v in headers.items() if k.lower() == settings.header]
        if len(named) != 1:
            return None
        name = normalise_username(named[0])
        if not name or not settings.trusts(client_host) or not HEADER_USERNAME_RE.fullmatch(name):
            return None
        account = find_account(store, name)
        if account is None:
            try:
                account = create_account(store, name, None, header=True)
            except AccountError:  # made by a parallel request a moment ago
                account = find_account(store, name)
        if account is None or account.disabled:
            return None
        return identity_of(store, account, settings)
    token = sessions.cookie_value(lowered.get("cookie", ""))
    found = sessions.session_account(store, token, days=settings.session_days) if token else None
    return identity_of(store, found[0], settings, found[1]) if found is not None else None
