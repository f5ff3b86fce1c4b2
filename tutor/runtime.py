"""The process-wide Engine: one store, one provider, one module library per process."""

from __future__ import annotations

import logging
import threading

from tutor import cpu_pin
from tutor.dbfaults import open_database
from tutor.engine import Engine
from tutor.llm.config import LLMSettings
from tutor.llm.factory import make_provider
from tutor.modules import load_library
from tutor.risk.turn import SafetySettings
from tutor.teach import retrieval
from tutor.usage import UsageLimits, UsageSettings

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
            cpu_pin.pin_from_env()  # TUTOR_PIN_CPU=auto: this worker on a CPU of its own
            store = open_database()  # makes a missing SQLite folder; migrates
            library = load_library()
            for path, problems in library.problems.items():
                for problem in problems:
                    log.error("module not served: %s", problem)
            _engine = Engine(store, make_provider(settings), library, settings, SafetySettings.from_env(),
                             usage=UsageLimits(usage))
            threading.Thread(target=retrieval.warm, args=(list(library.modules.values()),),
                             name="tutor-warm", daemon=True).start()
        return _engine
