"""The operator console's HTTP route: the progress export as CSV. It checks the operator's
session itself (the cookie or the trusted proxy's header, as the pages do); a page that
shows a link proves nothing."""

from __future__ import annotations

import logging
from datetime import datetime, timezone

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from tutor.access.accounts import AuthSettings, identity_for_request
from tutor.access.redirects import auth_page
from tutor.console.console_modules import progress_csv
from tutor.storage import dbfaults

log = logging.getLogger(__name__)

NOT_OPERATOR = "This page is for operators."


def _parts(request: Request):
    """The store and module library: the app's engine (built on first use, not at import),
    or the ones a test server set on `app.state`."""
    store = getattr(request.app.state, "tutor_store", None)
    if store is not None:
        return store, request.app.state.tutor_library
    from tutor.turns.runtime import get_engine

    engine = get_engine()
    return engine.store, engine.library


async def progress_export(request: Request) -> Response:
    settings = AuthSettings.from_env()
    client = request.client.host if request.client else ""
    try:
        store, library = _parts(request)
        who = await store.run(identity_for_request, store, request.headers, client, settings=settings)
        if who is None and settings.mode == "accounts":
            return RedirectResponse(auth_page("/signin", "/operator"), status_code=303)
        if who is None or not who.is_operator:
            return PlainTextResponse(NOT_OPERATOR, status_code=403, headers={"cache-control": "no-store"})
        body = await store.run(progress_csv, store, library)
    except dbfaults.DatabaseUnavailable as fault:
        dbfaults.report(fault, log, "progress export")
        return PlainTextResponse(dbfaults.UNAVAILABLE, status_code=503, headers={"cache-control": "no-store"})
    log.info("progress export by %s", who.username)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M")
    return Response(
        # A byte order mark: spreadsheet programs then read the file as UTF-8.
        "\ufeff" + body,
        media_type="text/csv; charset=utf-8",
        headers={
            "content-disposition": f'attachment; filename="tutor-progress-{stamp}.csv"',
            "cache-control": "no-store",
            "x-content-type-options": "nosniff",
        },
    )


def operator_api(store=None, library=None) -> Starlette:
    """For `rx.App(api_transformer=[..., operator_api()])`; tests hand in a store and library."""
    app = Starlette(routes=[Route("/operator/progress.csv", progress_export, methods=["GET"])])
    if store is not None:
        app.state.tutor_store, app.state.tutor_library = store, library
    return app
