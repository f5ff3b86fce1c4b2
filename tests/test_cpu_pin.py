"""TUTOR_PIN_CPU (tutor.cpu_pin): each worker process on a CPU of its own. Real processes and
real file locks; every pin happens in a child process, so the test process stays free."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tutor.cpu_pin import pin_from_env
from tutor.settings import ConfigError

CPUS = sorted(os.sched_getaffinity(0))
needs_two = pytest.mark.skipif(len(CPUS) < 2, reason="pinning needs a machine with two CPUs or more")


def worker(folder: Path, code: str = "") -> subprocess.Popen:
    """A process that pins itself (claims in `folder`), prints what it runs on, then waits
    for a line on stdin before it exits (holding its claim until then)."""
    script = textwrap.dedent(f"""
        import json, os, sys, threading
        from pathlib import Path
        from tutor.cpu_pin import pin_to_one_cpu
        early = threading.Thread(target=sys.stdin.readline)  # running before the pin
        early.start()
        cpu = pin_to_one_cpu(Path({str(folder)!r}))
        done = threading.Event()
        late = threading.Thread(target=done.wait)  # started after it
        late.start()
        out = {{"cpu": cpu, "main": sorted(os.sched_getaffinity(0)),
               "early": sorted(os.sched_getaffinity(early.native_id)),
               "late": sorted(os.sched_getaffinity(late.native_id))}}
        done.set()
        {code}
        print(json.dumps(out), flush=True)
        early.join()
    """)
    return subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, cwd=Path(__file__).resolve().parents[1])


def report(process: subprocess.Popen) -> dict:
    line = process.stdout.readline()
    assert line, "the worker printed nothing"
    return json.loads(line)


def finish(*processes: subprocess.Popen) -> None:
    for process in processes:
        process.stdin.write("\n")
        process.stdin.flush()
        process.wait(timeout=10)


def test_off_by_default_and_a_wrong_value_names_the_variable():
    assert pin_from_env({}) is None and pin_from_env({"TUTOR_PIN_CPU": "off"}) is None
    assert sorted(os.sched_getaffinity(0)) == CPUS  # nothing pinned
    with pytest.raises(ConfigError, match="TUTOR_PIN_CPU=auto"):
        pin_from_env({"TUTOR_PIN_CPU": "3"})


@needs_two
def test_a_worker_runs_every_thread_on_one_cpu(tmp_path):
    one = worker(tmp_path)
    try:
        seen = report(one)
    finally:
        finish(one)
    assert seen["cpu"] in CPUS
    assert seen["main"] == seen["early"] == seen["late"] == [seen["cpu"]]


@needs_two
def test_workers_spread_over_the_cpus_and_a_dead_workers_cpu_is_taken_again(tmp_path):
    first, second = worker(tmp_path), None
    try:
        a = report(first)
        second = worker(tmp_path)
        b = report(second)
        assert a["cpu"] != b["cpu"]  # one each while there are CPUs free
        finish(first)  # exits: its claim goes with it
        third = worker(tmp_path)
        try:
            assert report(third)["cpu"] == a["cpu"]
        finally:
            finish(third)
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                finish(process)


@needs_two
def test_more_workers_than_cpus_share_them_evenly(tmp_path):
    processes = [worker(tmp_path) for _ in range(2 * len(CPUS))]
    try:
        cpus = [report(p)["cpu"] for p in processes]
    finally:
        finish(*processes)
    assert sorted(cpus) == sorted(CPUS * 2)


@needs_two
def test_a_forked_worker_claims_a_cpu_of_its_own(tmp_path):
    # The server forks its workers from one process: a child must not keep the parent's claim.
    fork = f"""
        child = os.fork()
        if child == 0:
            import tutor.cpu_pin as pins
            print(json.dumps({{"child": pins.pin_to_one_cpu(Path({str(tmp_path)!r}))}}), flush=True)
            os._exit(0)
        os.waitpid(child, 0)
    """
    one = worker(tmp_path, textwrap.indent(textwrap.dedent(fork), " " * 8).strip())
    try:
        child = report(one)["child"]
        parent = report(one)["cpu"]
    finally:
        finish(one)
    assert child is not None and child != parent
