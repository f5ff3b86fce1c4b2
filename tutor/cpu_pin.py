"""One worker process, one CPU: `TUTOR_PIN_CPU=auto` pins each worker to a CPU of its own.

A worker's Python runs one thread at a time (the interpreter lock), but its threads — the
event loop and the database threads — are scheduled on any CPU, and each hand-over of
the lock between two CPUs moves the interpreter's hot data from one CPU's cache to the
other's. At 200 learners that cost about a quarter of the process's CPU per turn
(benchmarks/load_bench.py `--pin`, alternating runs: 5.9–7.9 ms a turn unpinned, 4.7–5.3 ms
pinned, the same wall time and latency). Pinned, the threads take turns on one CPU with warm caches,
and the workers spread over the machine's CPUs instead of chasing each other.

Each worker claims a CPU by locking a file in the system's temporary folder
(`tutor-cpus/cpu<N>-<slot>.lock`): the first free CPU, then a second worker per CPU when
there are more workers than CPUs (the server starts 2 × cores + 1 with Redis). A worker
that dies releases its claim with its file lock. Off by default: a pinned process cannot
move to an idle CPU when another program keeps its own busy — right for a machine that
serves Tutor, not for one shared with a model server using every core.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from tutor.settings import ConfigError, EnvReader

__all__ = ["pin_from_env", "pin_to_one_cpu"]

log = logging.getLogger(__name__)

SLOTS = 64  # workers per CPU before giving up on a claim
_claims: list[IO[str]] = []  # this process's claim, held open for its life
_allowed: set[int] = set()  # the CPUs the process could use before it was pinned


def pin_from_env(env: Mapping[str, str] | None = None) -> int | None:
    """Pin this process as TUTOR_PIN_CPU says (`auto`, or unset/`off`): the CPU it runs on
    now, or None when not pinned."""
    raw = (EnvReader(os.environ if env is None else env).text("TUTOR_PIN_CPU") or "off").lower()
    if raw in ("off", "0", "no", "false"):
        return None
    if raw != "auto":
        raise ConfigError(f"TUTOR_PIN_CPU={raw!r} is not a choice: set TUTOR_PIN_CPU=auto (one CPU per "
                          "worker) or leave it unset")
    return pin_to_one_cpu()


def pin_to_one_cpu(folder: Path | None = None) -> int | None:
    """Claim a CPU (see the module's docstring) and run every thread of this process on it;
    threads started later follow. None when this system cannot pin or every slot is taken
    (then nothing changes)."""
    if _claims:  # pinned already (a second engine in one process)
        return next(iter(os.sched_getaffinity(0)))
    try:
        cpus = sorted(os.sched_getaffinity(0))
        folder = folder or Path(tempfile.gettempdir()) / "tutor-cpus"
        folder.mkdir(exist_ok=True)
    except (AttributeError, OSError) as exc:  # not Linux, or no temporary folder to use
        log.warning("TUTOR_PIN_CPU=auto: cannot pin this worker (%s); it runs unpinned", exc)
        return None
    if len(cpus) < 2:
        return None
    for slot in range(SLOTS):
        for cpu in cpus:
            claim = open(folder / f"cpu{cpu}-{slot}.lock", "a")
            try:
                fcntl.flock(claim, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                claim.close()
                continue
            _claims.append(claim)
            _allowed.update(cpus)
            _run_on(cpu)
            log.info("worker %s pinned to CPU %s (TUTOR_PIN_CPU=auto)", os.getpid(), cpu)
            return cpu
    log.warning("TUTOR_PIN_CPU=auto: every CPU has %s workers already; this one runs unpinned", SLOTS)
    return None


def _run_on(cpu: int) -> None:
    # Every thread already running (the server's own, the database threads) and this one;
    # a thread inherits the CPUs of the thread that starts it.
    for task in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            os.sched_setaffinity(int(task), {cpu})
    os.sched_setaffinity(0, {cpu})


def _forget_in_child() -> None:
    # A forked worker claims a CPU of its own: the parent's claim (and CPU) stay the parent's.
    for claim in _claims:
        claim.close()
    _claims.clear()
    if _allowed:
        os.sched_setaffinity(0, _allowed)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)
