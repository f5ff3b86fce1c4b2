"""`tutor db migrate`: bring the database (TUTOR_DATABASE_URL) to the newest schema."""

from __future__ import annotations

import argparse

from tutor.store import Store


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("db", help="database maintenance")
    db_sub = p.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    migrate = db_sub.add_parser("migrate", help="apply schema migrations (alembic upgrade head)")
    migrate.set_defaults(func=run_migrate)


def run_migrate(args: argparse.Namespace) -> int:
    store = Store()
    store.migrate()
    print(f"database is up to date: {_redact(store.url)}")
    store.dispose()
    return 0


def _redact(url: str) -> str:
    if "@" not in url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    return f"{scheme}://***@{rest.split('@', 1)[1]}"
