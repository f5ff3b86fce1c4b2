"""Suite-wide settings."""

from __future__ import annotations

from pathlib import Path

import pytest

BROWSER_DIR = Path(__file__).parent / "browser"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Fast core tests first, browser tests last. (Playwright's sync API keeps an event loop
    running in the main thread while its browser is open, which would break asyncio.run()
    in tests that come after it.)"""
    items.sort(key=lambda item: Path(str(item.fspath)).is_relative_to(BROWSER_DIR))
