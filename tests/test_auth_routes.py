"""The sign-in, sign-up and sign-out form posts over HTTP: redirects, cookie flags, CSRF."""

from __future__ import annotations

import warnings
from urllib.parse import parse_qs, urlsplit

import pytest
from sqlmodel import select

from tutor import accounts, auth_routes, sessions
from tutor.store import AuthSession

with warnings.catch_warnings():  # Starlette would rather its test client used httpx2
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

SITE = "http://testserver"


@pytest.fixture
def client(store, monkeypatch) -> TestClient:
    monkeypatch.setenv("TUTOR_AUTH", "accounts")
    monkeypatch.setattr(auth_routes, "LIMIT", sessions.FailureLimit())
    accounts.create_account(store, "ana", "password1")
    return TestClient(auth_routes.auth_api(store), base_url=SITE, follow_redirects=False)


def post(client, path, data, origin=SITE, **headers):
    if origin:
        headers["Origin"] = origin
    return client.post(path, data=data, headers=headers)


def query(response) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(response.headers["location"]).query).items()}


def test_sign_in_sets_an_httponly_cookie_and_goes_back(client, store):
    r = post(client, "/auth/signin", {"username": "ANA", "password": "password1", "next": "/learn?module=m"})
    assert r.status_code == 303 and r.headers["location"] == "/learn?module=m"
    set_cookie = r.headers["set-cookie"]
    assert set_cookie.startswith("tutor_session=") and "HttpOnly" in set_cookie
    assert "SameSite=Lax" in set_cookie and "Secure" not in set_cookie
    token = set_cookie.split(";")[0].split("=", 1)[1]
    with store.session() as s:
        assert s.exec(select(AuthSession.token_hash)).one() == sessions.token_hash(token)
    behind_tls = post(client, "/auth/signin", {"username": "ana", "password": "password1"},
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
    r = post(client, "/auth/signin", {"username": "ana", "password": "password1"})
    assert query(r)["error"] == "throttled" and "set-cookie" not in r.headers
    assert accounts.message_for("throttled", int(query(r)["minutes"])) == "Too many attempts — try again in 15 minutes."


def test_posts_from_another_site_or_without_an_origin_are_refused(client, store):
    for origin, referer in [("http://evil.example", None), (None, None), ("null", None), (None, "http://evil.example/x")]:
        headers = {"Referer": referer} if referer else {}
        r = post(client, "/auth/signin", {"username": "ana", "password": "password1"}, origin=origin, **headers)
        assert r.status_code == 403 and "set-cookie" not in r.headers
        assert "Tutor's own page" in r.text
    r = post(client, "/auth/signup", {"username": "eve", "password": "password1"}, origin="http://evil.example")
    assert r.status_code == 403 and accounts.find_account(store, "eve") is None
    assert post(client, "/auth/signin", {"username": "ana", "password": "password1"}, origin=None,
                Referer=SITE + "/signin").status_code == 303


def test_sign_up_signs_in_and_refusals_say_why(client, store):
    r = post(client, "/auth/signup", {"username": "New.Person", "password": "longenough"})
    assert r.status_code == 303 and r.headers["location"] == "/" and "HttpOnly" in r.headers["set-cookie"]
    assert accounts.find_account(store, "new.person") is not None
    for data, code in [({"username": "ana", "password": "longenough"}, "username_taken"),
                       ({"username": "a", "password": "longenough"}, "username_invalid"),
                       ({"username": "fresh", "password": "short"}, "password_short"),
                       ({"username": "fresh", "password": ""}, "missing")]:
        r = post(client, "/auth/signup", data)
        assert r.headers["location"].startswith("/signup?") and query(r)["error"] == code, code
        assert query(r)["username"] == data["username"] and "set-cookie" not in r.headers


def test_signing_in_as_someone_else_ends_the_previous_session(client, store):
    first = post(client, "/auth/signin", {"username": "ana", "password": "password1"})
    token = first.headers["set-cookie"].split(";")[0].split("=", 1)[1]
    client.cookies.set("tutor_session", token)
    r = post(client, "/auth/signup", {"username": "ben", "password": "password2"})
    assert r.status_code == 303 and sessions.account_for_token(store, token, days=14) is None


def test_sign_out_ends_the_session_and_clears_the_cookie(client, store):
    signed = post(client, "/auth/signin", {"username": "ana", "password": "password1"})
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
