"""The database's threads (tutor.storage.db_workers): results and errors come back to the caller,
a caller that gives up does not stop the threads, and stopping finishes what was handed over."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

import pytest

from tutor.storage.db_workers import Workers

WHO = contextvars.ContextVar("who", default="nobody")


def test_a_call_returns_its_result_and_raises_its_error_in_the_caller():
    workers = Workers(2, "test-db")

    def boom():
        raise LookupError("no such row")

    async def main():
        assert await workers.run(lambda: 6 * 7) == 42
        with pytest.raises(LookupError, match="no such row"):
            await workers.run(boom)
        assert await workers.run(threading.current_thread) is not threading.current_thread()

    asyncio.run(main())
    workers.shutdown()


def test_calls_run_on_at_most_count_threads_and_overlap_up_to_that():
    workers = Workers(3, "test-db")
    names: set[str] = set()
    running, most = [0], [0]
    lock = threading.Lock()

    def call():
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
            names.add(threading.current_thread().name)
        time.sleep(0.02)
        with lock:
            running[0] -= 1

    async def main():
        await asyncio.gather(*(workers.run(call) for _ in range(30)))

    asyncio.run(main())
    workers.shutdown()
    assert len(names) == 3 and most[0] == 3


def test_a_caller_that_gives_up_leaves_the_threads_working():
    workers = Workers(1, "test-db")
    started, finished = threading.Event(), threading.Event()

    def slow():
        started.set()
        time.sleep(0.2)
        finished.set()
        return "late"

    async def main():
        task = asyncio.ensure_future(workers.run(slow))
        await asyncio.to_thread(started.wait, 2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await workers.run(lambda: "next") == "next"  # the same single thread, after slow()

    asyncio.run(main())
    assert finished.is_set()  # a database call is not cut halfway
    workers.shutdown()


def test_the_caller_context_travels_with_store_calls(tmp_path):
    from tutor.storage.store import Store

    store = Store(f"sqlite:///{tmp_path / 't.db'}")

    async def main():
        WHO.set("learner-7")
        return await store.run(WHO.get)

    assert asyncio.run(main()) == "learner-7"
    store.dispose()


def test_shutdown_finishes_the_calls_already_handed_over():
    workers = Workers(1, "test-db")
    done: list[int] = []

    async def main():
        calls = asyncio.gather(*(workers.run(lambda i=i: (time.sleep(0.01), done.append(i))) for i in range(5)))
        await asyncio.sleep(0)  # handed over
        await asyncio.to_thread(workers.shutdown)  # returns once the five have run
        assert done == [0, 1, 2, 3, 4]
        await calls

    asyncio.run(main())


def test_a_forked_process_starts_its_own_threads():
    import os

    workers = Workers(1, "test-db")
    assert asyncio.run(workers.run(lambda: 1)) == 1  # the parent's thread is running
    pid = os.fork()
    if pid == 0:  # the child: the parent's thread is not here
        try:
            ok = asyncio.run(asyncio.wait_for(workers.run(lambda: 2), 5)) == 2
        except BaseException:
            ok = False
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    workers.shutdown()
    assert os.WEXITSTATUS(status) == 0
