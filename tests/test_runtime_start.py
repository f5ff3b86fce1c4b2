"""Each worker builds its engine at start-up, before it serves (tutor.turns.runtime.engine_at_start,
a lifespan task that Reflex enters before the server's start-up completes): the first page
no longer builds it inside its load handler while every other tab on the worker waits."""

from __future__ import annotations

import asyncio
import logging

from tutor.turns import runtime


def _start(monkeypatch, tmp_path, **env: str) -> bool:
    """Whether the engine was there when the start-up step let the worker serve."""
    monkeypatch.setattr(runtime, "_engine", None)
    monkeypatch.setenv("TUTOR_LLM_PROVIDER", "builtin")
    monkeypatch.setenv("TUTOR_DATABASE_URL", f"sqlite:///{tmp_path / 'tutor.db'}")
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    async def main() -> bool:
        async with runtime.engine_at_start():
            return runtime._engine is not None

    return asyncio.run(main())


def test_the_engine_is_ready_before_the_worker_serves(monkeypatch, tmp_path):
    assert _start(monkeypatch, tmp_path)
    try:
        assert runtime.get_engine() is runtime._engine  # the first request finds it built
    finally:
        runtime._engine.store.dispose()


def test_a_database_not_there_at_start_is_logged_and_left_to_the_first_request(monkeypatch, tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    assert not _start(monkeypatch, tmp_path, TUTOR_DATABASE_URL="postgresql+psycopg2://tutor@127.0.0.1:1/tutor")
    assert runtime._engine is None  # the first request tries again
    assert "TUTOR_DATABASE_URL" in caplog.text  # the cause and the fix, for the operator


def test_the_app_takes_the_step_at_start():
    from tutor.tutor import app

    assert runtime.engine_at_start in app._lifespan_tasks
