"""Where tab states live (rxconfig.py). With Redis, a tab's state stays in its worker between
events (Reflex's opportunistic lock), so an event no longer reads the state from Redis and
writes it back: one worker's CPU per turn halved in benchmarks.socket_bench. An operator's
own setting wins. Without Redis, states stay in memory, not pickled to disk after events.
Checked on the state manager Reflex builds from this project's configuration, in a process
of its own (rxconfig sets its defaults when it is imported, as in the app)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import json, rxconfig
from reflex.istate.manager import StateManager
from reflex.istate.manager.redis import StateManagerRedis
kind = type(StateManager.create()).__name__ if not rxconfig.REDIS_URL else "redis"
from redis.asyncio import Redis
manager = StateManagerRedis(redis=Redis.from_url("redis://127.0.0.1:6379/13"))
print(json.dumps([manager._oplock_enabled, manager.oplock_hold_time_ms, manager.lock_expiration, kind,
                  rxconfig.config.state_manager_mode.value]))
"""


def state_manager(**env: str) -> tuple[bool, int, int, str, str]:
    ours = ("REFLEX_OPLOCK", "REFLEX_STATE_MANAGER", "TUTOR_REDIS")
    clean = {k: v for k, v in os.environ.items() if not k.startswith(ours)}
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env={**clean, **env},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return tuple(json.loads(done.stdout.strip().splitlines()[-1]))


def test_with_redis_a_tabs_state_is_kept_in_its_worker_between_events():
    enabled, hold_ms, lock_ms, _, mode = state_manager(TUTOR_REDIS_URL="redis://127.0.0.1:6379/13")
    assert mode == "redis" and enabled and hold_ms == 5000
    assert hold_ms < lock_ms  # Reflex refuses a hold as long as the lock


def test_without_redis_states_stay_in_memory_and_the_operators_choice_wins():
    enabled, _, _, kind, mode = state_manager()
    assert not enabled and (kind, mode) == ("StateManagerMemory", "memory")  # no files written after events
    enabled, *_ = state_manager(TUTOR_REDIS_URL="redis://127.0.0.1:6379/13", REFLEX_OPLOCK_ENABLED="false")
    assert enabled is False
    _, hold_ms, *_ = state_manager(TUTOR_REDIS_URL="redis://127.0.0.1:6379/13", REFLEX_OPLOCK_HOLD_TIME="2s")
    assert hold_ms == 2000
