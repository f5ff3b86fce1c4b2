"""`tutor db migrate`: bring the database (TUTOR_DATABASE_URL) to the newest schema."""

from __future__ import annotations

import argparse
import sys

from tutor.storage.dbfaults import (
    DatabaseUnavailable,
    open_database,
    redact,
    startup_message,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("db", help="database maintenance")
    db_sub = p.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    migrate = db_sub.add_parser("migrate", help="apply schema migrations (alembic upgrade head)")
    migrate.set_defaults(func=run_migrate)


def run_migrate(args: argparse.Namespace) -> int:
    try:
        store = open_database()  # makes a missing SQLite folder, then migrates
    except DatabaseUnavailable as fault:
        # Start-up's first check (scripts/run.sh runs this before serving): a short
        # message naming TUTOR_DATABASE_URL, not a driver traceback.
        print(f"tutor db migrate: {startup_message(fault)}", file=sys.stderr)
        return 1
    print(f"database is up to date: {redact(store.url)}")
    store.dispose()
    return 0
