"""Each worker builds its engine at start-up, in a thread, before it serves
(tutor.runtime.engine_at_start, a lifespan task): the first page no longer builds it on the
event loop while every other tab on the worker waits."""

from __future__ import annotations

import asyncio
import logging
import time

from tutor import runtime


def _start(monkeypatch, tmp_path, **env: str):
    monkeypatch.setattr(runtime, "_engine", None)
    monkeypatch.setenv("TUTOR_LLM_PROVIDER", "builtin")
    monkeypatch.setenv("TUTOR_DATABASE_URL", f"sqlite:///{tmp_path / 'tutor.db'}")
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    async def main() -> tuple[bool, float, float]:
        loop = asyncio.get_running_loop()
        gaps: list[float] = []
        done = False

        async def tick() -> None:
            last = loop.time()
            while not done:
                await asyncio.sleep(0.005)
                gaps.append(loop.time() - last)
                last = loop.time()

        ticker = asyncio.create_task(tick())
        await asyncio.sleep(0.02)
        started = time.monotonic()
        async with runtime.engine_at_start():
            built = runtime._engine is not None
            took = time.monotonic() - started
        done = True
        await ticker
        return built, took, max(gaps)

    return asyncio.run(main())


def test_the_engine_is_built_before_serving_without_holding_the_event_loop(monkeypatch, tmp_path):
    built, took, longest_gap = _start(monkeypatch, tmp_path)
    try:
        assert built  # ready before the worker takes its first request
        # Built on the loop, the loop would stand still for the whole build.
        assert longest_gap < max(0.1, took / 3), (longest_gap, took)
    finally:
        runtime._engine.store.dispose()


def test_a_database_not_there_at_start_is_logged_and_left_to_the_first_request(monkeypatch, tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    built, _, _ = _start(monkeypatch, tmp_path, TUTOR_DATABASE_URL="postgresql+psycopg2://tutor@127.0.0.1:1/tutor")
    assert not built and runtime._engine is None  # the first request tries again
    assert "TUTOR_DATABASE_URL" in caplog.text  # the cause and the fix, for the operator
