"""Reflex glue: every event of a tab is checked for who sends it before it runs.

Reflex keeps a tab's state under the tab's own token, across page loads and sign-outs; the
first thing a (re)connected page gets is the whole state (hydrate). So before any event of
ours, and before every hydrate, the gate asks `TutorState.checked_identity`: when the
connection's identity is not the one the state was built for (signed out, somebody else
signed in on this tab, an account disabled, a role changed), every state of the tab is
reset before anything is served. Handlers then check the role they need themselves.
"""

from __future__ import annotations

import logging

from reflex.middleware import Middleware
from reflex_base.constants.state import FIELD_MARKER

from tutor.access.accounts import auth_settings
from tutor.storage import dbfaults
from tutor.web.auth_state import TutorState

log = logging.getLogger(__name__)

HYDRATE = ("hydrate", "hydrate_and_load")


class IdentityGate(Middleware):
    """`app.add_middleware(IdentityGate())` (tutor/tutor.py)."""

    async def preprocess(self, app, state, event):
        state_name, _, handler = event.name.rpartition(".")
        hydrate = handler in HYDRATE and "." not in state_name
        if not hydrate and not state_name.startswith(TutorState.get_full_name()):
            return None  # Reflex's own bookkeeping (storage sync, on-load dispatch): no data of ours
        tutor = await state.get_state(TutorState)
        local_key = None
        if auth_settings().mode == "anonymous":
            # The browser's key, as it sends it with a hydrate (else the one the state has):
            # the gate never makes one up.
            sent = ((event.payload or {}).get("vars") or {}) if hydrate else {}
            local_key = str(_sent_key(sent, tutor.learner_key) or "")
        try:
            await tutor.checked_identity(local_key=local_key)
        except dbfaults.DatabaseUnavailable as fault:
            dbfaults.report(fault, log, "who is signed in")  # the handler says it calmly
        return None


def _sent_key(sent: dict, default: str) -> str:
    for name, value in sent.items():
        owner, _, var = str(name).rpartition(".")
        if owner == TutorState.get_full_name() and var.removesuffix(FIELD_MARKER) == "learner_key":
            return value
    return default
