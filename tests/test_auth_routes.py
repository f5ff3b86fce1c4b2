"""The sign-in, sign-up and sign-out form posts over HTTP: redirects, cookie flags, CSRF,
and the limits on guessing (parallel posts into the app, on SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import warnings
from collections import Counter
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from sqlmodel import select

from tutor.access import accounts, sessions
from tutor.access.signin_limit import FailureLimit, SignupLimit
from tutor.i18n import localize
from tutor.storage.store import Account, AuthSession, Store
from tutor.web import auth_routes

with warnings.catch_warnings():  # Starlette would rather its test client used httpx2
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

SITE = "http://testserver"


@pytest.fixture
def client(store, monkeypatch) -> TestClient:
    monkeypatch.setenv("TUTOR_AUTH", "accounts")
    monkeypatch.setattr(auth_routes, "LIMIT", sessions.FailureLimit())
    monkeypatch.setattr(auth_routes, "SIGNUPS", SignupLimit())
    accounts.create_account(store, "ana", "pass-phrase one")
    return TestClient(auth_routes.auth_api(store), base_url=SITE, follow_redirects=False)


def post(client, path, data, origin=SITE, **headers):
    if origin:
        headers["Origin"] = origin
    return client.post(path, data=data, headers=headers)


def query(response) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(response.headers["location"]).query).items()}


def test_sign_in_sets_an_httponly_cookie_and_goes_back(client, store):
    r = post(client, "/auth/signin", {"username": "ANA", "password": "pass-phrase one", "next": "/learn?module=m"})
    assert r.status_code == 303 and r.headers["location"] == "/learn?module=m"
    set_cookie = r.headers["set-cookie"]
    assert set_cookie.startswith("tutor_session=") and "HttpOnly" in set_cookie
    assert "SameSite=Lax" in set_cookie and "Secure" not in set_cookie
    token = set_cookie.split(";")[0].split("=", 1)[1]
    with store.session() as s:
        assert s.exec(select(AuthSession.token_hash)).one() == sessions.token_hash(token)
    behind_tls = post(client, "/auth/signin", {"username": "ana", "password": "pass-phrase one"},
                      **{"X-Forwarded-Proto": "https"})
    assert behind_tls.headers["set-cookie"].endswith("; Secure") and behind_tls.headers["location"] == "/"


def test_a_wrong_password_comes_back_with_the_username_never_the_password(client):
    r = post(client, "/auth/signin", {"username": "ana", "password": "hunter2hunter2", "next": "/learn?module=m"})
    assert r.status_code == 303 and "set-cookie" not in r.headers
    assert query(r) == {"error": "credentials", "username": "ana", "next": "/learn?module=m"}
    assert "hunter2" not in r.headers["location"]


def test_too_many_failures_wait_calmly(client):
    for _ in range(10):
        post(client, "/auth/signin", {"username": "ana", "password": "wrong-one"})
    r = post(client, "/auth/signin", {"username": "ana", "password": "pass-phrase one"})
    assert query(r)["error"] == "throttled" and "set-cookie" not in r.headers
    assert accounts.message_for("throttled", int(query(r)["minutes"])) == "Too many attempts — try again in 15 minutes."


def test_posts_from_another_site_or_without_an_origin_are_refused(client, store):
    for origin, referer in [("http://evil.example", None), (None, None), ("null", None), (None, "http://evil.example/x")]:
        headers = {"Referer": referer} if referer else {}
        r = post(client, "/auth/signin", {"username": "ana", "password": "pass-phrase one"}, origin=origin, **headers)
        assert r.status_code == 403 and "set-cookie" not in r.headers
        assert "Tutor's own page" in r.text
    r = post(client, "/auth/signup", {"username": "eve", "password": "pass-phrase one"}, origin="http://evil.example")
    assert r.status_code == 403 and accounts.find_account(store, "eve") is None
    assert post(client, "/auth/signin", {"username": "ana", "password": "pass-phrase one"}, origin=None,
                Referer=SITE + "/signin").status_code == 303


def test_sign_up_signs_in_and_refusals_say_why(client, store):
    r = post(client, "/auth/signup", {"username": "New.Person", "password": "longenough"})
    assert r.status_code == 303 and r.headers["location"] == "/" and "HttpOnly" in r.headers["set-cookie"]
    assert accounts.find_account(store, "new.person") is not None
    for data, code in [({"username": "ana", "password": "longenough"}, "username_taken"),
                       ({"username": "a", "password": "longenough"}, "username_invalid"),
                       ({"username": "fresh", "password": "short"}, "password_short"),
                       ({"username": "fresh", "password": "Basketball"}, "password_common"),
                       ({"username": "fresh", "password": " " * 12}, "password_blank"),
                       ({"username": "fresh", "password": ""}, "missing")]:
        r = post(client, "/auth/signup", data)
        assert r.headers["location"].startswith("/signup?") and query(r)["error"] == code, code
        assert query(r)["username"] == data["username"] and "set-cookie" not in r.headers


def test_signing_in_as_someone_else_ends_the_previous_session(client, store):
    first = post(client, "/auth/signin", {"username": "ana", "password": "pass-phrase one"})
    token = first.headers["set-cookie"].split(";")[0].split("=", 1)[1]
    client.cookies.set("tutor_session", token)
    r = post(client, "/auth/signup", {"username": "ben", "password": "pass-phrase two"})
    assert r.status_code == 303 and sessions.account_for_token(store, token, days=14) is None


def test_sign_out_ends_the_session_and_clears_the_cookie(client, store):
    signed = post(client, "/auth/signin", {"username": "ana", "password": "pass-phrase one"})
    token = signed.headers["set-cookie"].split(";")[0].split("=", 1)[1]
    refused = client.post("/auth/signout", headers={"Cookie": f"tutor_session={token}", "Origin": "http://evil.example"})
    assert refused.status_code == 403 and sessions.account_for_token(store, token, days=14) is not None
    r = client.post("/auth/signout", headers={"Cookie": f"tutor_session={token}", "Origin": SITE})
    assert r.status_code == 303 and r.headers["location"] == "/signin"
    assert "Max-Age=0" in r.headers["set-cookie"] and "HttpOnly" in r.headers["set-cookie"]
    assert sessions.account_for_token(store, token, days=14) is None


def test_a_wrong_setting_stops_the_app_at_start_up_with_the_fix(monkeypatch):
    monkeypatch.setenv("TUTOR_AUTH", "ldap")
    with pytest.raises(SystemExit, match="TUTOR_AUTH=accounts"):
        auth_routes.auth_api()


# ------------------------------------------------------------- limits on guessing


@pytest.fixture
def db(store_on_each_database: Store) -> Store:
    return store_on_each_database


def app_for(store: Store, monkeypatch, limit: FailureLimit | None = None, signups: SignupLimit | None = None,
            **env: str):
    monkeypatch.setenv("TUTOR_AUTH", "accounts")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(auth_routes, "LIMIT", limit or FailureLimit())
    monkeypatch.setattr(auth_routes, "SIGNUPS", signups or SignupLimit())
    return auth_routes.auth_api(store)


async def posts(app, path: str, forms: list[dict], forwarded: list[str | None] | None = None,
                peer: str = "127.0.0.1") -> list[httpx.Response]:
    """All the posts at once, each on a connection of its own from `peer` (with its
    X-Forwarded-For, if any)."""
    async def one(form: dict, xff: str | None) -> httpx.Response:
        transport = httpx.ASGITransport(app=app, client=(peer, 40000))
        async with httpx.AsyncClient(transport=transport, base_url=SITE) as client:
            headers = {"Origin": SITE, **({"X-Forwarded-For": xff} if xff else {})}
            return await client.post(path, data=form, headers=headers)

    return await asyncio.gather(*(one(f, x) for f, x in zip(forms, forwarded or [None] * len(forms))))


def codes(responses: list[httpx.Response]) -> Counter:
    return Counter(query(r).get("error", "signed-in") for r in responses)


def test_forty_parallel_wrong_passwords_for_one_name_check_at_most_ten(db, monkeypatch):
    accounts.create_account(db, "ana", "pass-phrase one")
    app = app_for(db, monkeypatch)
    wrong = [{"username": "ana", "password": f"wrong guess {i}"} for i in range(40)]
    got = codes(asyncio.run(posts(app, "/auth/signin", wrong)))
    # Each "credentials" answer is a password checked; the rest were refused before it.
    assert got["credentials"] == 10 and got["throttled"] == 30, got
    right = asyncio.run(posts(app, "/auth/signin", [{"username": "ana", "password": "pass-phrase one"}]))[0]
    assert query(right)["error"] == "throttled" and "set-cookie" not in right.headers


def test_a_name_guessed_from_many_addresses_is_locked_and_the_owner_told_why(db, monkeypatch):
    accounts.create_account(db, "ana", "pass-phrase one")
    app = app_for(db, monkeypatch, FailureLimit(account_limit=15), TUTOR_TRUSTED_PROXIES="127.0.0.1")
    wrong = [{"username": "ana", "password": f"wrong guess {i}"} for i in range(40)]
    addresses = [f"203.0.113.{i}" for i in range(40)]  # forty addresses, through the trusted proxy
    got = codes(asyncio.run(posts(app, "/auth/signin", wrong, addresses)))
    assert got["credentials"] == 15 and got["account_locked"] == 25, got
    owner = asyncio.run(posts(app, "/auth/signin", [{"username": "ana", "password": "pass-phrase one"}],
                              ["198.51.100.7"]))[0]
    assert query(owner)["error"] == "account_locked" and "set-cookie" not in owner.headers
    message = accounts.message_for("account_locked", int(query(owner)["minutes"]))
    assert message.startswith("This account had too many wrong passwords") and "60 minutes" in message
    assert localize(message, "vi").startswith("Tài khoản này đã bị nhập sai mật khẩu quá nhiều lần")
    other = asyncio.run(posts(app, "/auth/signin", [{"username": "ben", "password": "whatever it is"}]))[0]
    assert query(other)["error"] == "credentials"  # other names are not held back


def test_a_forwarded_address_is_believed_only_from_a_trusted_proxy(store, monkeypatch):
    accounts.create_account(store, "ana", "pass-phrase one")
    wrong = [{"username": "ana", "password": f"wrong guess {i}"} for i in range(11)]
    rotating = [f"203.0.113.{i}" for i in range(11)]
    # Default (no trusted proxy, loopback included): the header is the client's own words.
    app = app_for(store, monkeypatch)
    got = [query(r)["error"] for r in asyncio.run(posts(app, "/auth/signin", wrong, rotating))]
    assert got.count("credentials") == 10 and got.count("throttled") == 1
    # From TUTOR_TRUSTED_PROXIES it names the client: eleven addresses, eleven fresh counts.
    app = app_for(store, monkeypatch, TUTOR_TRUSTED_PROXIES="127.0.0.1/32")
    got = [query(r)["error"] for r in asyncio.run(posts(app, "/auth/signin", wrong, rotating))]
    assert got == ["credentials"] * 11
    # ...and from a peer that is not one, not.
    app = app_for(store, monkeypatch, TUTOR_TRUSTED_PROXIES="10.0.0.0/8")
    got = [query(r)["error"] for r in asyncio.run(posts(app, "/auth/signin", wrong, rotating, peer="192.0.2.4"))]
    assert got.count("throttled") == 1


def test_sign_ups_are_limited_per_address_and_day(db, monkeypatch):
    app = app_for(db, monkeypatch, signups=SignupLimit(per_day=5))
    forms = [{"username": f"new-{i}", "password": "pass-phrase one"} for i in range(20)]
    got = codes(asyncio.run(posts(app, "/auth/signup", forms)))
    assert got["signed-in"] == 5 and got["signups"] == 15, got
    with db.session() as s:
        assert len(s.exec(select(Account)).all()) == 5
    refused = asyncio.run(posts(app, "/auth/signup", [forms[-1]]))[0]
    wait = int(query(refused)["minutes"])
    assert 23 * 60 < wait <= 24 * 60
    assert accounts.message_for("signups", wait).startswith(
        "Too many accounts have been created from this network today. You can create one in 2")
    # Mistakes the form alone shows are answered at once and cost nothing.
    assert query(asyncio.run(posts(app, "/auth/signup", [{"username": "x", "password": "pass-phrase one"}]))[0])[
        "error"] == "username_invalid"


def test_username_taken_answers_count_toward_the_sign_up_limit(db, monkeypatch):
    accounts.create_account(db, "ana", "pass-phrase one")
    app = app_for(db, monkeypatch, signups=SignupLimit(per_day=5), TUTOR_TRUSTED_PROXIES="127.0.0.1")
    probes = [{"username": name, "password": "pass-phrase one"} for name in ("ana", "bob", "ana", "cyd", "ana", "ana")]
    got = [query(r).get("error") for r in asyncio.run(posts(app, "/auth/signup", probes[:5], ["203.0.113.1"] * 5))]
    assert sorted(got, key=str) == sorted(["username_taken", None, "username_taken", None, "username_taken"], key=str)
    sixth = asyncio.run(posts(app, "/auth/signup", probes[5:], ["203.0.113.1"]))[0]
    assert query(sixth)["error"] == "signups"  # enumeration stops: no "taken" or not from here today
    elsewhere = asyncio.run(posts(app, "/auth/signup", probes[5:], ["198.51.100.2"]))[0]
    assert query(elsewhere)["error"] == "username_taken"
