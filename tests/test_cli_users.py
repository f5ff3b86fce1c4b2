"""`tutor users create|list|set-password|disable` as an operator runs them."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from tutor.access import accounts, sessions
from tutor.access.accounts import AccountError
from tutor.cli import main
from tutor.settings import REPO_ROOT
from tutor.storage.store import Store


@pytest.fixture
def db_url(tmp_path, monkeypatch) -> str:
    url = f"sqlite:///{tmp_path / 'tutor.db'}"
    monkeypatch.setenv("TUTOR_DATABASE_URL", url)
    return url


def run(monkeypatch, argv: list[str], stdin: str = "") -> int:
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    return main(["users", *argv])


def test_create_list_set_password_disable(db_url, monkeypatch, capsys):
    assert run(monkeypatch, ["create", "Teacher", "--operator", "--password-stdin"], "first password\n") == 0
    assert run(monkeypatch, ["create", "pupil", "--password-stdin"], "pupil password\n") == 0
    assert capsys.readouterr().out == "created operator teacher\ncreated learner pupil\n"
    assert run(monkeypatch, ["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[:4] for line in lines] == [["pupil", "learner", "active", "password"],
                                                        ["teacher", "operator", "active", "password"]]
    store = Store(db_url)
    try:
        token = sessions.create_session(store, accounts.find_account(store, "teacher").id, days=14)
        assert run(monkeypatch, ["set-password", "teacher", "--password-stdin"], "second password\n") == 0
        assert sessions.account_for_token(store, token, days=14) is None
        assert accounts.authenticate(store, "teacher", "second password").role == "operator"
        token = sessions.create_session(store, accounts.find_account(store, "pupil").id, days=14)
        assert run(monkeypatch, ["disable", "pupil"]) == 0
        assert sessions.account_for_token(store, token, days=14) is None
        with pytest.raises(AccountError, match="switched off"):
            accounts.authenticate(store, "pupil", "pupil password")
    finally:
        store.dispose()


def test_refusals_say_why_and_change_nothing(db_url, monkeypatch, capsys):
    assert run(monkeypatch, ["create", "x", "--password-stdin"], "long enough\n") == 1
    assert run(monkeypatch, ["create", "amy", "--password-stdin"], "short\n") == 1
    assert run(monkeypatch, ["create", "amy", "--password-stdin"], "Password123\n") == 1  # a common one
    assert run(monkeypatch, ["disable", "nobody"]) == 1
    err = capsys.readouterr().err
    assert "3–32 characters" in err and "at least 10" in err and "no account called 'nobody'" in err
    assert "most commonly used" in err
    assert run(monkeypatch, ["list"]) == 0
    assert "no accounts yet" in capsys.readouterr().out


def test_without_stdin_it_asks_twice_without_echo(db_url):
    """getpass reads the terminal; with none it falls back to stdin (and warns)."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT), "TUTOR_DATABASE_URL": db_url}
    code = "import sys; from tutor.cli import main; sys.exit(main())"
    differ = subprocess.run([sys.executable, "-c", code, "users", "create", "kim"], input="one password\nanother one\n",
                            capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=60, start_new_session=True)
    assert differ.returncode == 1 and "the passwords differ" in differ.stderr
    same = subprocess.run([sys.executable, "-c", code, "users", "create", "kim"], input="one password\none password\n",
                          capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=60, start_new_session=True)
    assert same.returncode == 0 and "created learner kim" in same.stdout
    assert "one password" not in same.stdout


def test_list_shows_the_last_sign_in_of_learners_who_signed_up_and_signed_in(db_url, monkeypatch, capsys):
    """Sign-up signs the learner in: `users list` must not say "never" for them; a later sign-in
    moves the time on."""
    import warnings

    from tutor.access.signin_limit import FailureLimit, SignupLimit
    from tutor.web import auth_routes

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    monkeypatch.setenv("TUTOR_AUTH", "accounts")
    monkeypatch.setattr(auth_routes, "LIMIT", FailureLimit())
    monkeypatch.setattr(auth_routes, "SIGNUPS", SignupLimit())
    store = Store(db_url)
    try:
        store.migrate()
        site = "http://testserver"
        client = TestClient(auth_routes.auth_api(store), base_url=site, follow_redirects=False)
        made = client.post("/auth/signup", data={"username": "newbie", "password": "a fine password"},
                           headers={"Origin": site})
        assert made.status_code == 303 and "set-cookie" in made.headers
        after_signup = accounts.find_account(store, "newbie").last_sign_in_at
        assert after_signup is not None
        assert run(monkeypatch, ["list"]) == 0
        [line] = capsys.readouterr().out.splitlines()
        assert line.startswith("newbie\tlearner\tactive\tpassword\tlast sign-in 20") and "never" not in line

        client.cookies.clear()
        again = client.post("/auth/signin", data={"username": "newbie", "password": "a fine password"},
                            headers={"Origin": site})
        assert again.status_code == 303 and "set-cookie" in again.headers
        assert accounts.find_account(store, "newbie").last_sign_in_at > after_signup
    finally:
        store.dispose()
