"""The process-wide Engine: one store, one provider, one module library per process."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator

from tutor import cpu_pin
from tutor.access.usage import UsageLimits, UsageSettings
from tutor.content.modules import load_library
from tutor.llm.config import LLMSettings
from tutor.llm.factory import make_provider
from tutor.risk.turn import SafetySettings
from tutor.storage import dbfaults
from tutor.storage.dbfaults import open_database
from tutor.teach import understanding
from tutor.turns.alerts import Alerter, AlertSettings
from tutor.turns.engine import Engine
from tutor.understand.embedder import embed_threads
from tutor.understand.engine import engine_choice

log = logging.getLogger(__name__)
_engine: Engine | None = None
_lock = threading.Lock()


def get_engine() -> Engine:
    """Build the engine on first use: check the configuration, migrate the database,
    load the modules (a module that fails its check is not served, and says why). A
    database that cannot be used raises dbfaults.DatabaseUnavailable (cause and fix); the
    next call tries again."""
    global _engine
    with _lock:
        if _engine is None:
            settings = LLMSettings.from_env()  # ConfigError says which variable to set
            usage = UsageSettings.from_env()
            embed_threads()  # TUTOR_EMBED_THREADS: a wrong value is said now, not at the first message
            engine_choice()  # TUTOR_EMBED_ENGINE, likewise
            cpu_pin.pin_from_env()  # TUTOR_PIN_CPU=auto: this worker on a CPU of its own
            store = open_database()  # makes a missing SQLite folder; migrates
            library = load_library()
            for path, problems in library.problems.items():
                for problem in problems:
                    log.error("module not served: %s", problem)
            _engine = Engine(store, make_provider(settings), library, settings, SafetySettings.from_env(),
                             usage=UsageLimits(usage), alerts=Alerter(store, AlertSettings.from_env()))
            threading.Thread(target=understanding.warm, args=(list(library.modules.values()),),
                             name="tutor-warm", daemon=True).start()
        return _engine


@contextlib.asynccontextmanager
async def engine_at_start() -> AsyncIterator[None]:
    """The server's start-up step (a lifespan task, entered before a worker serves): the
    engine is built, in a thread. Built by the first page instead, it held the event loop
    ~1.2 s of CPU on this machine (the safety screen's phrases, the modules, the migration
    check), every tab on that worker waiting, after each start and each worker replaced.
    Anything that stops it here (a database not there yet, a wrong setting) is logged and
    left to the first request, which tries again and says why, as before."""
    try:
        await asyncio.to_thread(get_engine)
    except dbfaults.DatabaseUnavailable as fault:
        dbfaults.report(fault, log, "start-up")
    except Exception:  # noqa: BLE001 - the first request meets it again, with the page's handling
        log.warning("the tutor could not start yet; the first request will try again", exc_info=True)
    yield
