"""Alerts for imminent risk: a counsellor hears at once, not at the next look at the list.

With TUTOR_SAFETY_ALERT_URL set, every imminent flag (a plan, means, a time, an attempt
under way, danger now) is POSTed there as JSON once it is stored — never the learner's
words, only what lets a person open the flag in the console:

    {"event": "imminent_risk", "flag_id": 12, "conversation_id": 40, "module_id": "...",
     "label": "self_harm", "severity": "imminent", "layer": "semantic", "confidence": 0.93,
     "created_at": "2026-11-25T19:02:11Z", "console": "/operator"}

An `Idempotency-Key: risk-<flag id>` header lets the receiver drop a repeat. A failed post
(no answer, a 5xx or 429, a refused connection) is tried again with growing pauses up to
TUTOR_SAFETY_ALERT_TRIES times; a 4xx other than 429 is a wrong setting and is not retried.
A delivered alert is marked on the flag (`alerted_at`), so a flag is posted once; each
failure is one log line naming the cause and the fix, never the learner's text.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from sqlmodel import col, select

from tutor.settings import ConfigError, EnvReader
from tutor.storage.store import RiskEvent, Store, iso_utc, utcnow

__all__ = ["AlertSettings", "Alerter"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AlertSettings:
    url: str = ""
    tries: int = 5
    timeout_s: float = 5.0
    first_pause_s: float = 1.0

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> AlertSettings:
        env = EnvReader(os.environ if environ is None else environ)
        url = env.text("TUTOR_SAFETY_ALERT_URL") or ""
        if url and (urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc):
            raise ConfigError("TUTOR_SAFETY_ALERT_URL must be an http(s) address, e.g. "
                              "TUTOR_SAFETY_ALERT_URL=https://alerts.example.org/tutor")
        return cls(url=url, tries=env.integer("TUTOR_SAFETY_ALERT_TRIES", 5, low=1, high=50))


def _imminent_unsent(store: Store, reply_id: int) -> list[RiskEvent]:
    with store.session(read_only=True) as s:
        return list(s.exec(select(RiskEvent).where(RiskEvent.reply_id == reply_id, RiskEvent.severity == "imminent",
                                                   col(RiskEvent.alerted_at).is_(None))).all())


def _mark_sent(store: Store, flag_id: int) -> None:
    with store.session() as s:
        flag = s.get(RiskEvent, flag_id)
        if flag is not None and flag.alerted_at is None:
            flag.alerted_at = utcnow()
            s.add(flag)
            s.commit()


def payload(flag: RiskEvent) -> dict[str, Any]:
    """What an alert says: no learner text, no evidence offsets, no learner identity."""
    return {"event": "imminent_risk", "flag_id": flag.id, "conversation_id": flag.conversation_id,
            "module_id": flag.module_id, "label": flag.label, "severity": flag.severity, "layer": flag.source,
            "confidence": round(flag.confidence, 3), "created_at": iso_utc(flag.created_at), "console": "/operator"}


class Alerter:
    """`alert_reply(reply_id)` after a reply with flags is stored: posts its imminent flags in
    the background (the learner's turn does not wait)."""

    def __init__(self, store: Store, settings: AlertSettings) -> None:
        self.store, self.settings = store, settings
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def on(self) -> bool:
        return bool(self.settings.url)

    def alert_reply(self, reply_id: int) -> None:
        if not self.on:
            return
        task = asyncio.get_running_loop().create_task(self._send_for(reply_id))
        self._tasks.add(task)  # kept until done: a task nobody holds may be collected mid-post
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Wait for the alerts in flight (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _send_for(self, reply_id: int) -> None:
        try:
            flags = await self.store.run(_imminent_unsent, self.store, reply_id)
            async with httpx.AsyncClient(timeout=self.settings.timeout_s, follow_redirects=False) as client:
                for flag in flags:
                    if await self._post(client, flag):
                        await self.store.run(_mark_sent, self.store, flag.id or 0)
        except Exception:  # noqa: BLE001 - an alert must never break a turn; the flag stays in the list
            log.exception("imminent-risk alert for reply %s failed; the flag is in the review list", reply_id)

    async def _post(self, client: httpx.AsyncClient, flag: RiskEvent) -> bool:
        pause = self.settings.first_pause_s
        host = urlsplit(self.settings.url).netloc
        for attempt in range(1, self.settings.tries + 1):
            try:
                response = await client.post(self.settings.url, json=payload(flag),
                                             headers={"Idempotency-Key": f"risk-{flag.id}"})
                if response.is_success:
                    return True
                problem = f"HTTP {response.status_code}"
                if 400 <= response.status_code < 500 and response.status_code not in (408, 429):
                    log.error("imminent-risk alert for flag %s refused by %s (%s): check TUTOR_SAFETY_ALERT_URL; "
                              "not retried", flag.id, host, problem)
                    return False
            except httpx.HTTPError as exc:
                problem = type(exc).__name__
            if attempt == self.settings.tries:
                log.error("imminent-risk alert for flag %s not delivered to %s after %s tries (%s): check that "
                          "TUTOR_SAFETY_ALERT_URL answers; the flag is first in the review list",
                          flag.id, host, attempt, problem)
                return False
            log.warning("imminent-risk alert for flag %s: %s from %s, trying again in %.0f s", flag.id, problem,
                        host, pause)
            await asyncio.sleep(pause)
            pause = min(pause * 2, 60.0)
        return False
