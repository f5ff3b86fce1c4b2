"""Reflex configuration. Database and Redis come from the environment (see README)."""

import logging
import os

import reflex as rx

from tutor.settings import database_url

PORT = int(os.environ.get("TUTOR_PORT", "3000"))
# Serve this machine only, as the README says, unless told otherwise (TUTOR_HOST=0.0.0.0).
HOST = os.environ.get("TUTOR_HOST", "127.0.0.1")
REDIS_URL = os.environ.get("TUTOR_REDIS_URL") or None
OPLOCK_HOLD = "5s"  # how long a worker keeps a tab's state after an event (with Redis)


def _keep_states_between_events() -> None:
    """With Redis (several workers), a tab's state stays in its worker's memory between
    events instead of being read from Redis and written back around every one of them.

    Without this, each event (a typed message, every streamed preview update) locked the
    tab's state in Redis, unpickled it, and pickled it back: a turn cost one worker 51 ms of
    CPU against 25 ms without Redis (`benchmarks.socket_bench`, 50 learners). Reflex's
    opportunistic lock keeps the lock and the state for OPLOCK_HOLD after an event, then
    writes the state back; another worker that needs the tab (a reconnect after a worker
    died) breaks the lease at once, or waits out the lock (10 s) when the holder is gone.
    Learner data lives in the database, so a worker that dies loses at most that long of a
    page's view, which the page reloads from the database when it reconnects. Set
    REFLEX_OPLOCK_ENABLED=false to turn it off."""
    if REDIS_URL:
        os.environ.setdefault("REFLEX_OPLOCK_ENABLED", "true")
        os.environ.setdefault("REFLEX_OPLOCK_HOLD_TIME", OPLOCK_HOLD)


_keep_states_between_events()

config = rx.Config(
    app_name="tutor",
    db_url=database_url(),
    redis_url=REDIS_URL,
    # One worker keeps tab states in memory. Reflex's default keeps them on disk too: it
    # pickled each touched state to a file after events and scanned every tab's file for
    # expiry, 13% of a busy worker's CPU (py-spy, socket_bench). Nothing is lost by not
    # keeping them: a page that reconnects (a restart) loads its conversation from the database.
    state_manager_mode=rx.constants.StateManagerMode.REDIS if REDIS_URL else rx.constants.StateManagerMode.MEMORY,
    # Production mode serves the compiled frontend and the event socket on one port.
    frontend_port=PORT,
    backend_port=PORT,
    backend_host=HOST,
    show_built_with_reflex=False,
    telemetry_enabled=False,
    disable_plugins=[rx.plugins.SitemapPlugin],
)


def _respawn_crashed_workers() -> None:
    """A worker that dies (killed, out of memory) is replaced and the others carry on.

    Reflex starts granian's server without its `respawn_failed_workers` option, and then
    one dead worker stops them all. This makes the option the default for the server
    Reflex builds in this process (a crash loop, a worker dying again within 5.5 s, still
    stops the server, so a broken deployment does not spin)."""
    try:
        from granian.server.common import AbstractServer
    except ImportError:  # pragma: no cover - another server in use
        return
    original = AbstractServer.__init__
    if getattr(original, "_tutor_respawns", False):
        return

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("respawn_failed_workers", True)
        original(self, *args, **kwargs)

    __init__._tutor_respawns = True  # type: ignore[attr-defined]
    AbstractServer.__init__ = __init__  # type: ignore[method-assign]


_respawn_crashed_workers()


class _NoRunHint(logging.Filter):
    """The first start sets up the frontend and Reflex then suggests `uv run reflex run`;
    this project runs with scripts/run.sh, so that hint only misleads."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message.startswith("Initialized") and "reflex run" in message:
            record.msg, record.args = message.split(". ", 1)[0] + ".", ()
        return True


logging.getLogger("reflex.reflex").addFilter(_NoRunHint())
