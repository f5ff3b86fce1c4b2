"""Accounts, passwords, sessions and who a request is, on SQLite and PostgreSQL."""

from __future__ import annotations

import time
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from sqlmodel import select

from tutor.access import accounts, sessions, signin_limit
from tutor.access.accounts import (
    AccountError,
    AuthSettings,
    Identity,
    identity_for_request,
)
from tutor.access.redirects import auth_page, safe_next
from tutor.access.signin_limit import Attempt, Refusal
from tutor.storage.store import (
    Account,
    AuthSession,
    Conversation,
    Learner,
    Store,
    utcnow,
)
from tutor.turns.conversations import find_or_create

ACCOUNTS = AuthSettings()


@pytest.fixture
def db(store_on_each_database: Store) -> Store:
    """Each test on SQLite and on PostgreSQL (tests/conftest.py)."""
    return store_on_each_database


def cookie(token: str) -> dict[str, str]:
    return {"Cookie": f"theme=dark; {sessions.COOKIE_NAME}={token}; other=1"}


def test_sign_up_then_sign_in_with_the_name_in_any_case(db):
    made = accounts.create_account(db, "  Ana.Lee ", "correct horse")
    assert made.username == "ana.lee" and made.role == "learner"
    assert made.password_hash.startswith("$argon2id$") and "correct horse" not in made.password_hash
    assert accounts.authenticate(db, "ANA.LEE", "correct horse").id == made.id
    assert accounts.find_account(db, "ana.lee").last_sign_in_at is None  # not signed in until a session starts
    sessions.create_session(db, made.id, days=1)
    assert accounts.find_account(db, "ana.lee").last_sign_in_at is not None
    for name, password in [("ana.lee", "wrong horse"), ("nobody", "correct horse"), ("", "x"), ("a b", "correct horse")]:
        with pytest.raises(AccountError) as refused:
            accounts.authenticate(db, name, password)
        assert refused.value.code == "credentials"


@pytest.mark.parametrize("name", ["ab", "x" * 33, "ana lee", "ana@school", "añа", "../etc", ""])
def test_usernames_outside_the_rules_are_refused_with_the_rule(name):
    with pytest.raises(AccountError) as refused:
        accounts.check_username(name)
    assert refused.value.code == "username_invalid"
    assert "3–32 characters" in str(refused.value)


def test_names_are_unique_whatever_their_case_and_passwords_have_bounds(db):
    accounts.create_account(db, "sam", "pass-phrase one")
    with pytest.raises(AccountError, match="taken"):
        accounts.create_account(db, "SAM", "pass-phrase two")
    with pytest.raises(AccountError, match="at least 10"):
        accounts.create_account(db, "kim", "123456789")
    with pytest.raises(AccountError, match="at most 256"):
        accounts.create_account(db, "kim", "x" * 257)
    with pytest.raises(AccountError, match="most commonly used"):
        accounts.create_account(db, "kim", "Password123")
    assert accounts.create_account(db, "kim", "xy" * 128).username == "kim"
    assert [a.username for a in accounts.list_accounts(db)] == ["kim", "sam"]
    with pytest.raises(AccountError, match="most commonly used"):
        accounts.set_password(db, "kim", "qwertyuiop")  # a new password meets the same rules
    assert accounts.authenticate(db, "kim", "xy" * 128).username == "kim"


@pytest.mark.parametrize("password,code", [
    ("123456789", "password_short"),  # nine characters
    ("a" + " " * 12 + "b", "password_short"),  # ASVS 2.1.1: a run of spaces counts as one
    (" " * 12, "password_blank"),
    ("\t\n " * 5, "password_blank"),
    ("qwertyuiop", "password_common"),
    ("  QwertyUIOP  ", "password_common"),  # compared lower-cased, without surrounding spaces
    ("1q2w3e4r5t", "password_common"),
    ("basketball", "password_common"),
    ("x" * 257, "password_long"),
])
def test_passwords_that_will_not_do_are_refused_with_the_reason(password, code):
    with pytest.raises(AccountError) as refused:
        accounts.check_password(password)
    assert refused.value.code == code
    assert str(refused.value) and str(refused.value) != code  # a sentence for the person, not a code


@pytest.mark.parametrize("password", ["1234567890a!", "purple tram oboe", "ĐàLạt-mùa-sương", "ten chars!"])
def test_a_long_enough_uncommon_password_of_any_kind_will_do(password):
    accounts.check_password(password)  # no rules about kinds of characters (ASVS 2.1.9)


def test_the_common_password_list_ships_with_the_project():
    from tutor.access import passwords

    common = passwords.common_passwords()
    assert len(common) > 19_000 and "password" in common and "1q2w3e4r5t" in common
    assert sum(len(p) >= passwords.PASSWORD_MIN for p in common) > 1_500  # the ones the length rule leaves


def test_an_unknown_name_costs_as_much_hashing_as_a_wrong_password(db):
    accounts.create_account(db, "timing", "a good password")
    took: dict[str, list[float]] = {"timing": [], "no-such-person": []}
    # Alternated, and each name's fastest try compared: other work on a busy machine only
    # ever adds time, so the fastest tries are the two paths' own cost (medians of one
    # name after the other were 0.56 against 0.23 s once, under the full suite).
    for _ in range(7):
        for name in took:
            start = time.perf_counter()
            with pytest.raises(AccountError):
                accounts.authenticate(db, name, "not the password")
            took[name].append(time.perf_counter() - start)
    known, unknown = min(took["timing"]), min(took["no-such-person"])
    assert unknown > 0.5 * known, (known, unknown)  # without the dummy hash: ~100x faster


def test_a_session_token_is_stored_only_as_its_hash_and_finds_its_account(db):
    account = accounts.create_account(db, "ria", "pass-phrase one")
    token = sessions.create_session(db, account.id, days=14)
    assert len(token) >= 43
    with db.session() as s:
        rows = s.exec(select(AuthSession)).all()
    assert [r.token_hash for r in rows] == [sessions.token_hash(token)] and token not in rows[0].token_hash
    assert sessions.account_for_token(db, token, days=14).id == account.id
    assert sessions.account_for_token(db, token[:-1] + ("A" if token[-1] != "A" else "B"), days=14) is None
    assert sessions.account_for_token(db, "", days=14) is None


def test_sessions_expire_slide_on_use_at_most_once_a_minute_and_end_at_sign_out(db):
    account = accounts.create_account(db, "lee", "pass-phrase one")
    start = utcnow()
    token = sessions.create_session(db, account.id, days=1, now=start)

    def expires():
        with db.session() as s:
            return sessions._aware(s.exec(select(AuthSession)).one().expires_at)

    first = expires()
    assert sessions.account_for_token(db, token, days=1, now=start + timedelta(seconds=30))
    assert expires() == first  # within a minute: nothing written
    assert sessions.account_for_token(db, token, days=1, now=start + timedelta(hours=20))
    assert expires() - first >= timedelta(hours=19)  # slid forward
    assert sessions.account_for_token(db, token, days=1, now=start + timedelta(hours=20 + 25)) is None
    with db.session() as s:
        assert s.exec(select(AuthSession)).all() == []  # the expired row is gone

    token = sessions.create_session(db, account.id, days=1)
    sessions.end_session(db, token)
    assert sessions.account_for_token(db, token, days=1) is None


def test_disabling_or_a_new_password_ends_every_session(db):
    account = accounts.create_account(db, "max", "pass-phrase one")
    tokens = [sessions.create_session(db, account.id, days=14) for _ in range(2)]
    accounts.set_password(db, "max", "pass-phrase two")
    assert all(sessions.account_for_token(db, t, days=14) is None for t in tokens)
    assert accounts.authenticate(db, "max", "pass-phrase two").id == account.id
    token = sessions.create_session(db, account.id, days=14)
    accounts.set_disabled(db, "max")
    assert sessions.account_for_token(db, token, days=14) is None
    with pytest.raises(AccountError) as refused:
        accounts.authenticate(db, "max", "pass-phrase two")
    assert refused.value.code == "disabled"


def test_identity_from_the_session_cookie_in_accounts_mode(db):
    account = accounts.create_account(db, "zoe", "pass-phrase one", role="operator")
    token = sessions.create_session(db, account.id, days=14)
    who = identity_for_request(db, cookie(token), "203.0.113.9", settings=ACCOUNTS)
    assert isinstance(who, Identity) and who.username == "zoe" and who.is_operator and who.account_id == account.id
    with db.session() as s:
        assert who.learner_key == s.get(Learner, account.learner_id).key
    # Nothing else signs anyone in: no cookie, a made-up one, the local key, a proxy header.
    assert identity_for_request(db, {}, "127.0.0.1", local_key=who.learner_key, settings=ACCOUNTS) is None
    assert identity_for_request(db, cookie("made-up"), "127.0.0.1", settings=ACCOUNTS) is None
    assert identity_for_request(db, {"X-Forwarded-User": "zoe"}, "127.0.0.1", settings=ACCOUNTS) is None


def test_identity_in_header_mode_only_through_a_trusted_proxy(db):
    settings = AuthSettings(mode="header", trusted_proxies=("127.0.0.1", "::1", "10.0.0.0/8"),
                            operators=frozenset({"boss"}))
    who = identity_for_request(db, {"x-forwarded-user": "Pat@School.example"}, "10.1.2.3", settings=settings)
    assert who.username == "pat@school.example" and not who.is_operator
    again = identity_for_request(db, {"X-Forwarded-User": "pat@school.example"}, "::1", settings=settings)
    assert again == who  # the account made on first sight, found again
    assert identity_for_request(db, {"x-forwarded-user": "boss"}, "127.0.0.1", settings=settings).is_operator
    assert identity_for_request(db, {"x-forwarded-user": "pat@school.example"}, "192.0.2.7", settings=settings) is None
    assert identity_for_request(db, {}, "127.0.0.1", settings=settings) is None
    with db.session() as s:
        assert s.exec(select(Account.password_hash).where(Account.username == "boss")).one() is None


def test_two_identity_headers_name_nobody(db):
    from starlette.datastructures import Headers

    settings = AuthSettings(mode="header", trusted_proxies=("127.0.0.1",))
    both = Headers(raw=[(b"x-forwarded-user", b"mallory"), (b"x-forwarded-user", b"pat@school.example")])
    assert identity_for_request(db, both, "127.0.0.1", settings=settings) is None
    one = Headers(raw=[(b"x-forwarded-user", b"pat@school.example")])
    assert identity_for_request(db, one, "127.0.0.1", settings=settings).username == "pat@school.example"


def test_identity_in_anonymous_mode_is_the_browser_key():
    settings = AuthSettings(mode="anonymous")
    assert identity_for_request(None, {}, "", local_key="abc123", settings=settings) == Identity("abc123", "", "learner")
    assert identity_for_request(None, {}, "", settings=settings) is None


def test_signing_up_in_the_same_browser_keeps_the_anonymous_learners_conversations(db):
    find_or_create(db, "browser-key-1", "understanding_anxiety", False)
    first = accounts.create_account(db, "early", "pass-phrase one", local_key="browser-key-1")
    # Someone else using the same browser later cannot take them over.
    second = accounts.create_account(db, "later", "pass-phrase one", local_key="browser-key-1")
    with db.session() as s:
        learner = s.exec(select(Learner).where(Learner.key == "browser-key-1")).one()
        assert first.learner_id == learner.id and second.learner_id != learner.id
        assert s.exec(select(Conversation).where(Conversation.learner_id == learner.id)).one()
    # An unknown key: a learner of their own.
    third = accounts.create_account(db, "third", "pass-phrase one", local_key="never-seen")
    with db.session() as s:
        assert s.get(Learner, third.learner_id).key != "never-seen"


def test_failed_sign_ins_are_limited_per_name_and_address():
    now = [1000.0]
    limit = sessions.FailureLimit(limit=3, window_s=900, clock=lambda: now[0])
    for _ in range(3):
        assert isinstance(limit.attempt("ana", "1.2.3.4"), Attempt)
    assert limit.attempt("ana", "1.2.3.4") == Refusal("throttled", 900.0)
    assert isinstance(limit.attempt("ana", "5.6.7.8"), Attempt) and isinstance(limit.attempt("bob", "1.2.3.4"), Attempt)
    now[0] += 60 * 10 + 1
    assert limit.attempt("ana", "1.2.3.4").minutes == 5
    now[0] += 60 * 5
    limit.succeeded(limit.attempt("ana", "1.2.3.4"))
    assert limit.pair._memory.keys() == {signin_limit._key("bob", "1.2.3.4"), signin_limit._key("ana", "5.6.7.8")}


def test_only_a_trusted_proxys_forwarded_address_is_believed():
    nobody = AuthSettings()  # the default: no proxy is trusted, loopback included
    assert nobody.trusted_proxies == () and not nobody.trusts("127.0.0.1") and not nobody.trusts("::1")
    assert nobody.client_address("203.0.113.5", "127.0.0.1") == "127.0.0.1"
    proxy = AuthSettings(trusted_proxies=("127.0.0.1", "10.0.0.0/8"))
    assert proxy.client_address("203.0.113.5", "127.0.0.1") == "203.0.113.5"
    # The nearest address no trusted proxy holds: whatever the client wrote further left is not.
    assert proxy.client_address("198.51.100.1, 203.0.113.5, 10.1.1.1", "127.0.0.1") == "203.0.113.5"
    assert proxy.client_address("203.0.113.5", "192.0.2.9") == "192.0.2.9"  # not from the proxy
    assert proxy.client_address("", "127.0.0.1") == "127.0.0.1"
    assert proxy.client_address("not-an-address", "127.0.0.1") == "127.0.0.1"
    assert proxy.client_address("2001:DB8::0:1", "10.0.0.1") == "2001:db8::1"


@pytest.mark.parametrize("target,expected", [
    ("/learn?module=x", "/learn?module=x"), ("/", "/"), (None, "/"), ("", "/"),
    ("//evil.example/", "/"), ("/\\evil.example", "/"), ("https://evil.example/", "/"),
    ("javascript:alert(1)", "/"), ("/learn\r\nSet-Cookie: x", "/"), ("/signin?next=/x", "/"),
])
def test_only_same_site_paths_are_followed_after_sign_in(target, expected):
    assert safe_next(target) == expected


def test_settings_name_the_variable_and_a_value_that_works():
    assert AuthSettings.from_env({}) == AuthSettings() and AuthSettings.from_env({}).trusted_proxies == ()
    with pytest.raises(ValueError, match="TUTOR_TRUSTED_PROXIES=127.0.0.1"):
        AuthSettings.from_env({"TUTOR_AUTH": "header"})  # believing nobody, header mode would sign nobody in
    got = AuthSettings.from_env({"TUTOR_AUTH": "Header", "TUTOR_AUTH_HEADER": "Remote-User",
                                 "TUTOR_TRUSTED_PROXIES": "10.0.0.0/8", "TUTOR_OPERATORS": "Alice, bob",
                                 "TUTOR_SESSION_DAYS": "2"})
    assert (got.mode, got.header, got.operators, got.session_days) == ("header", "remote-user", {"alice", "bob"}, 2)
    assert got.trusts("10.9.8.7") and not got.trusts("127.0.0.1") and not got.trusts("not an address")
    for env, hint in [({"TUTOR_AUTH": "ldap"}, "TUTOR_AUTH=accounts"), ({"TUTOR_SESSION_DAYS": "soon"}, "=14"),
                      ({"TUTOR_TRUSTED_PROXIES": "proxy.local"}, "TUTOR_TRUSTED_PROXIES=127.0.0.1")]:
        with pytest.raises(ValueError, match=hint):
            AuthSettings.from_env(env)



@pytest.fixture
def fresh_auth_settings():
    accounts.auth_settings.cache_clear()
    yield accounts.auth_settings
    accounts.auth_settings.cache_clear()  # the next test reads its own environment


def test_a_running_server_reads_its_sign_in_settings_once(monkeypatch, fresh_auth_settings):
    monkeypatch.setenv("TUTOR_AUTH", "header")
    monkeypatch.setenv("TUTOR_TRUSTED_PROXIES", "127.0.0.1")
    first = fresh_auth_settings()
    assert first.mode == "header"
    monkeypatch.setenv("TUTOR_AUTH", "anonymous")  # changed under a running server: ignored
    assert fresh_auth_settings() is first
    assert identity_for_request(None, {}, "", local_key="abc") is None  # still header mode: no local keys
    fresh_auth_settings.cache_clear()  # a restart, or a test changing the environment
    assert fresh_auth_settings().mode == "anonymous"
    assert identity_for_request(None, {}, "", local_key="abc") == Identity("abc", "", "learner")
    monkeypatch.setenv("TUTOR_AUTH", "ldap")
    fresh_auth_settings.cache_clear()
    for _ in range(2):  # a wrong setting is refused at every read, never remembered
        with pytest.raises(ValueError, match="TUTOR_AUTH=accounts"):
            fresh_auth_settings()

def test_cookie_flags_and_reading():
    made = sessions.session_cookie("tok", days=14, secure=False)
    assert "HttpOnly" in made and "SameSite=Lax" in made and "Path=/" in made and "Secure" not in made
    assert f"Max-Age={400 * 86400}" in made  # the server ends it 14 days after its last use
    assert sessions.session_cookie("tok", days=14, secure=True).endswith("; Secure")
    assert sessions.cookie_value('a=1; tutor_session="xyz"; b') == "xyz"
    assert sessions.cookie_value("not_tutor_session=1") == ""


@pytest.mark.parametrize("target,expected", [
    ("/learn?module=a&new=1", "/signup?next=%2Flearn%3Fmodule%3Da%26new%3D1"),  # one value, '&' and all
    ("/operator", "/signup?next=%2Foperator"), ("/", "/signup"), (None, "/signup"),
    ("//evil.example/", "/signup"), ("/signin?next=/x", "/signup"),
])
def test_the_other_auth_page_keeps_where_to_go_after_encoded_whole(target, expected):
    assert auth_page("/signup", target) == expected
    assert safe_next(parse_qs(urlsplit(auth_page("/signup", target)).query).get("next", [""])[0]) == safe_next(target)
