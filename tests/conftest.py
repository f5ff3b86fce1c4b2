"""Suite-wide settings."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tutor.store import Store

BROWSER_DIR = Path(__file__).parent / "browser"

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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Fast core tests first, browser tests last. (Playwright's sync API keeps an event loop
    running in the main thread while its browser is open, which would break asyncio.run()
    in tests that come after it.)"""
    items.sort(key=lambda item: Path(str(item.fspath)).is_relative_to(BROWSER_DIR))
