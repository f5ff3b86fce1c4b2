"""Reflex configuration. Database and Redis come from the environment (see README)."""

import os

import reflex as rx

from tutor.settings import database_url

PORT = int(os.environ.get("TUTOR_PORT", "3000"))

config = rx.Config(
    app_name="tutor",
    db_url=database_url(),
    redis_url=os.environ.get("TUTOR_REDIS_URL") or None,
    # Production mode serves the compiled frontend and the event socket on one port.
    frontend_port=PORT,
    backend_port=PORT,
    show_built_with_reflex=False,
    telemetry_enabled=False,
    disable_plugins=[rx.plugins.SitemapPlugin],
)
