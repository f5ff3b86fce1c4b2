"""`tutor users`: create accounts, list them, set a password, switch one off."""

from __future__ import annotations

import argparse
import getpass
import sys

from tutor.access.accounts import (
    AccountError,
    create_account,
    list_accounts,
    set_disabled,
    set_password,
)
from tutor.storage.dbfaults import DatabaseUnavailable, open_database, startup_message
from tutor.storage.store import iso_utc


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("users", help="sign-in accounts (TUTOR_AUTH=accounts)")
    users = p.add_subparsers(dest="users_command", required=True, metavar="ACTION")
    create = users.add_parser("create", help="make an account (asks for the password twice)")
    create.add_argument("name")
    create.add_argument("--operator", action="store_true", help="may open the operator console")
    create.add_argument("--password-stdin", action="store_true", help="read the password from standard input")
    create.set_defaults(func=run_create)
    listing = users.add_parser("list", help="every account, its role and state")
    listing.set_defaults(func=run_list)
    password = users.add_parser("set-password", help="a new password (signs the account out everywhere)")
    password.add_argument("name")
    password.add_argument("--password-stdin", action="store_true", help="read the password from standard input")
    password.set_defaults(func=run_set_password)
    disable = users.add_parser("disable", help="switch an account off and end its sessions")
    disable.add_argument("name")
    disable.set_defaults(func=run_disable)


def _password(args: argparse.Namespace) -> str | None:
    if args.password_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    first = getpass.getpass("Password: ")
    if getpass.getpass("Password again: ") != first:
        print("tutor users: the passwords differ; nothing was changed", file=sys.stderr)
        return None
    return first


def _run(what: str, action) -> int:
    try:
        store = open_database()
    except DatabaseUnavailable as fault:
        print(f"tutor users {what}: {startup_message(fault)}", file=sys.stderr)
        return 1
    try:
        return action(store)
    except AccountError as refusal:
        print(f"tutor users {what}: {refusal}", file=sys.stderr)
        return 1
    except LookupError as missing:
        print(f"tutor users {what}: {missing.args[0]} (see `tutor users list`)", file=sys.stderr)
        return 1
    finally:
        store.dispose()


def run_create(args: argparse.Namespace) -> int:
    password = _password(args)
    if password is None:
        return 1

    def create(store) -> int:
        account = create_account(store, args.name, password, role="operator" if args.operator else "learner")
        print(f"created {account.role} {account.username}")
        return 0

    return _run("create", create)


def run_list(args: argparse.Namespace) -> int:
    def show(store) -> int:
        accounts = list_accounts(store)
        if not accounts:
            print("no accounts yet: `tutor users create NAME`, or sign up on the sign-in page")
        for a in accounts:
            state = "disabled" if a.disabled else "active"
            signed = iso_utc(a.last_sign_in_at) if a.last_sign_in_at else "never"
            kind = "password" if a.password_hash else "proxy"
            print(f"{a.username}\t{a.role}\t{state}\t{kind}\tlast sign-in {signed}")
        return 0

    return _run("list", show)


def run_set_password(args: argparse.Namespace) -> int:
    password = _password(args)
    if password is None:
        return 1

    def change(store) -> int:
        account = set_password(store, args.name, password)
        print(f"new password set for {account.username}; their sessions ended")
        return 0

    return _run("set-password", change)


def run_disable(args: argparse.Namespace) -> int:
    def disable(store) -> int:
        account = set_disabled(store, args.name)
        print(f"disabled {account.username}; their sessions ended")
        return 0

    return _run("disable", disable)
