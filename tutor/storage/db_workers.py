"""The database's threads: calls handed from the event loop to a few threads and back.

`loop.run_in_executor` goes through a concurrent.futures.Future (a lock and a condition
variable), chains it to an asyncio future with callbacks both ways and copies the state
across; at three calls a turn for 200 learners that bookkeeping was a measurable share of
a turn's CPU. Here a call is one queue item and its result one `call_soon_threadsafe`.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any

__all__ = ["Workers"]

_STOP = None


class Workers:
    """`count` threads, started on first use, running the calls handed to `run` in order."""

    def __init__(self, count: int, name: str) -> None:
        self.count, self.name = count, name
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        _ALL.add(self)

    async def run(self, call: Callable[[], Any]) -> Any:
        """`call()` in one of the threads; its result or its exception here. A caller
        cancelled before its call started drops the call (as run_in_executor does); one
        cancelled while it runs lets it finish (a transaction is not cut halfway) and its
        result is dropped."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        if len(self._threads) < self.count:
            self._start()
        self._queue.put((loop, future, call))
        return await future

    def _start(self) -> None:
        with self._lock:
            while len(self._threads) < self.count:
                thread = threading.Thread(target=_work, args=(self._queue,), daemon=True,
                                          name=f"{self.name}-{len(self._threads)}")
                thread.start()
                self._threads.append(thread)

    def shutdown(self, timeout: float | None = None) -> None:
        """Let the threads finish the calls already handed over, then stop them."""
        with self._lock:
            threads, self._threads = self._threads, []
        for _ in threads:
            self._queue.put(_STOP)
        for thread in threads:
            thread.join(timeout)


def _work(calls: queue.SimpleQueue) -> None:
    while (item := calls.get()) is not _STOP:
        loop, future, call = item
        if future.cancelled():  # its caller has gone: nothing to do
            continue
        try:
            result = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller, whatever it is
            _hand_back(loop, _fail, future, exc)
        else:
            _hand_back(loop, _succeed, future, result)


def _hand_back(loop: asyncio.AbstractEventLoop, settle: Callable[..., None], future: Any, value: Any) -> None:
    try:
        loop.call_soon_threadsafe(settle, future, value)
    except RuntimeError:  # the loop has closed: nobody waits for this any more
        pass


def _succeed(future: asyncio.Future, result: Any) -> None:
    if not future.cancelled():
        future.set_result(result)


def _fail(future: asyncio.Future, exc: BaseException) -> None:
    if not future.cancelled():
        future.set_exception(exc)


# Daemon threads do not hold the interpreter open; at exit the calls already handed over
# are finished first (a transaction is not cut halfway), as ThreadPoolExecutor does.
_ALL: weakref.WeakSet[Workers] = weakref.WeakSet()


@atexit.register
def _finish_all() -> None:
    for workers in list(_ALL):
        workers.shutdown(timeout=10)


def _forked() -> None:
    """A forked process (the server forks its workers) has none of the parent's threads:
    each Workers starts its own again on first use, with a queue of its own."""
    for workers in list(_ALL):
        workers._threads, workers._queue, workers._lock = [], queue.SimpleQueue(), threading.Lock()


os.register_at_fork(after_in_child=_forked)
