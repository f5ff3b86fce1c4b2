"""The event socket is this site's own: a page of another origin (another port of the same
host, a sibling site) cannot open it, and neither can a client that names no origin, so it
cannot act as the learner or operator signed in in the same browser. A real websocket
handshake against the running app."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import aiohttp
import pytest

from tests.browser.conftest import RunningApp
from tests.browser.helpers import MODULE

SOCKET = "/_event/?EIO=4&transport=websocket"


async def _handshake(url: str, origin: str | None) -> int | str:
    headers = {"Origin": origin} if origin is not None else {}
    async with aiohttp.ClientSession(skip_auto_headers=["Origin"]) as session:
        try:
            async with session.ws_connect(url, headers=headers, timeout=aiohttp.ClientWSTimeout(ws_close=5)) as ws:
                message = await ws.receive(timeout=10)
                return "open" if message.type == aiohttp.WSMsgType.TEXT and message.data.startswith("0") else "?"
        except aiohttp.WSServerHandshakeError as refused:
            return refused.status


def handshake(url: str, origin: str | None) -> int | str:
    # In a thread of its own: the browser fixtures keep an event loop running in this one.
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, _handshake(url, origin)).result(timeout=30)


@pytest.mark.parametrize("origin", [None, "http://127.0.0.1:{other}", "http://evil.example", "null"])
def test_the_event_socket_refuses_pages_of_other_origins(app: RunningApp, origin: str | None) -> None:
    url = app.url.replace("http", "ws", 1) + SOCKET
    other = None if origin is None else origin.format(other=app.port + 1)
    assert handshake(url, other) == 403


def test_the_apps_own_page_still_opens_it(app: RunningApp, page) -> None:
    url = app.url.replace("http", "ws", 1) + SOCKET
    assert handshake(url, app.url) == "open"
    page.goto(app.url + f"/learn?module={MODULE}")  # and the real page works through it
    page.locator(".msg-tutor").first.wait_for()
