"""benchmarks/socket_bench.py end to end, small, so it cannot rot: 3 learners through the
running app (started as a user starts it), one message each, replaying the chat page's
recorded socket frames; every turn is shown, and the database has none lost or duplicated."""

from __future__ import annotations

from benchmarks import socket_bench


def test_three_learners_through_the_running_app_lose_nothing() -> None:
    [row] = socket_bench.run(["--learners", "3", "--messages", "1", "--delay", "0.5", "--chunks", "10",
                              "--pause", "0", "--timeout", "60"])
    assert row["errors"] == 0
    assert row["check"]["sent"] == 3
    assert row["lost"] == 0 and row["duplicated"] == 0, row["check"]
    assert row["stored_p95_ms"] is not None and row["first_over_model_p95_ms"] is not None
    assert row["frames_per_turn"] > 0 and row["app_cpu_ms_per_turn"] > 0
