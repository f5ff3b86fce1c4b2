"""Suite-wide settings."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlalchemy
from hypothesis import settings

from tutor.storage.store import Store

BROWSER_DIR = Path(__file__).parent / "browser"

# Property tests check behaviour, not speed: Hypothesis's default 200 ms per example failed
# the suite on a busy 2-core machine (a schema sized in 357 ms, fine on the next call).
# Speed is measured by the benchmarks, against a baseline in the same run.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")

# The fixtures' pretend operator lets media load from example.org and from the browser
# tests' second origin on 127.0.0.1 (TUTOR_MEDIA_HOSTS; the default is no host at all, which
# tests/test_hardening.py checks explicitly). Apps the browser tests start inherit it.
os.environ.setdefault("TUTOR_MEDIA_HOSTS", "example.org,127.0.0.1")


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """A fresh SQLite database, migrated the way the app migrates it."""
    s = Store(f"sqlite:///{tmp_path / 'tutor.db'}")
    s.migrate()
    yield s
    s.dispose()


PG_ADMIN = "postgresql+psycopg2://postgres@127.0.0.1:5432/postgres"


@contextmanager
def postgres_database(prefix: str = "tutor_test") -> Iterator[str]:
    """A fresh, empty PostgreSQL database on 127.0.0.1 (its URL), dropped afterwards even if
    something still holds a connection to it."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    admin = sqlalchemy.create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(sqlalchemy.text(f'CREATE DATABASE "{name}"'))
    try:
        yield f"postgresql+psycopg2://postgres@127.0.0.1:5432/{name}"
    finally:
        with admin.connect() as c:
            c.execute(sqlalchemy.text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_on_each_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A migrated database, once a SQLite file and once a fresh PostgreSQL database: a test
    using it runs on both."""
    if request.param == "sqlite":
        s = Store(f"sqlite:///{tmp_path / 'tutor.db'}")
        s.migrate()
        yield s
        s.dispose()
        return
    with postgres_database() as url:
        s = Store(url)
        s.migrate()
        try:
            yield s
        finally:
            s.dispose()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Fast core tests first, browser tests last. (Playwright's sync API keeps an event loop
    running in the main thread while its browser is open, which would break asyncio.run()
    in tests that come after it.)"""
    items.sort(key=lambda item: Path(str(item.fspath)).is_relative_to(BROWSER_DIR))
