"""How many tokens the model can read: its context window, and the server's own counts.

The window comes from TUTOR_LLM_CONTEXT when set. Otherwise an OpenAI-compatible server
is asked where it says: llama.cpp's `GET /props` reports what one request may use
(`default_generation_settings.n_ctx`, less than `-c` when slots split the cache).
Other servers (OpenAI, vLLM, Ollama) have no such endpoint and the window stays unknown
(None); then only the server's refusal tells, and the policy trims and retries
(`budget.trim_harder`). A refusal that names the window is remembered (`learn`).

The same answer says how many requests the server runs at once (`total_slots`: llama-server's
`--parallel`), which sizes the cap on model calls in flight (tutor.llm.gate), and that the
server is llama.cpp, which takes `cache_prompt` in a request (tutor.llm.openai), and which
chat template it applies (`chat_template`, `eos_token`): its end-of-turn markers become the
stop sequences of the prompt and json_object strategies (`template_markers`, tutor.llm.markers).

Nothing here raises: a server that cannot answer just leaves the window unknown. Answers
are cached per server, so a conversation asks at most once (and calls that ask at the same
moment share one question); a failure that may pass (no connection, a timeout, a 5xx) is
asked again after a minute.
"""

from __future__ import annotations

import asyncio
import logging
import time
from urllib.parse import urlsplit

import httpx

from tutor.llm.base import ChatMessage
from tutor.llm.budget import MESSAGE_OVERHEAD_TOKENS
from tutor.llm.config import LLMSettings
from tutor.llm.markers import stop_sequences

log = logging.getLogger(__name__)

ASK_TIMEOUT_S = 2.0
RETRY_UNKNOWN_AFTER_S = 60.0
# Hosted APIs without a /props endpoint: asking them only costs a round trip.
_NO_PROPS_HOSTS = {"api.openai.com", "api.anthropic.com", "api.groq.com", "openrouter.ai", "api.mistral.ai"}

_windows: dict[str, tuple[int | None, float]] = {}  # server root -> (window, valid until)
_markers: dict[str, tuple[str, ...]] = {}  # server root -> the markers its chat template spells out
_slots: dict[str, int] = {}  # server root -> requests it runs at once (/props total_slots)
_llama: set[str] = set()  # server roots whose /props answered as llama.cpp's does
_asking: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Future]] = {}  # one question at a time


def server_root(base_url: str) -> str:
    """The server's root for llama.cpp's own endpoints: the base URL without `/v1`."""
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


async def context_window(settings: LLMSettings, client: httpx.AsyncClient | None = None) -> int | None:
    """The model's context window in tokens, or None when nobody says.

    `client` is the provider's client (its connection pool); without one, a short-lived
    client is made for the question.
    """
    if settings.context_window:
        return settings.context_window
    root = await _asked(settings, client)
    return _windows[root][0] if root is not None else None


async def server_slots(settings: LLMSettings, client: httpx.AsyncClient | None = None) -> tuple[int | None, bool]:
    """(requests the server runs at once, final): llama.cpp's `total_slots`, or None where the
    server does not say. `final` is False while asking again later might get an answer."""
    root = await _asked(settings, client)
    if root is None:
        return None, True
    return _slots.get(root), root in _slots or _windows[root][1] == float("inf")


def template_markers(settings: LLMSettings) -> tuple[str, ...] | None:
    """The end-of-turn markers of the chat template the server applies, as its /props said
    (`chat_template`, `eos_token`; see tutor.llm.markers), without asking: the turn policy
    (`context_window`) and the model gate (`server_slots`) ask before their calls. () where
    the server does not say, None while it has not been asked (or could not be)."""
    if not may_have_props(settings):
        return ()
    root = server_root(settings.base_url)  # type: ignore[arg-type]
    if root in _markers:
        return _markers[root]
    cached = _windows.get(root)
    return () if cached is not None and cached[1] == float("inf") else None


def may_have_props(settings: LLMSettings) -> bool:
    """Whether the server might answer llama.cpp's /props: an OpenAI-compatible server that
    is not one of the hosted APIs (which have no such endpoint)."""
    return (settings.provider == "openai" and bool(settings.base_url)
            and urlsplit(settings.base_url or "").hostname not in _NO_PROPS_HOSTS)


def speaks_llama(base_url: str | None) -> bool:
    """Whether the server already answered /props as llama.cpp does (no question asked here)."""
    return bool(base_url) and server_root(base_url) in _llama  # type: ignore[arg-type]


async def _asked(settings: LLMSettings, client: httpx.AsyncClient | None) -> str | None:
    """The server's root once its /props answer is cached (asked now if need be), or None for
    servers that have no /props (other providers, hosted APIs)."""
    if not may_have_props(settings):
        return None
    root = server_root(settings.base_url)  # type: ignore[arg-type]
    cached = _windows.get(root)
    if cached is not None and (cached[0] is not None or time.monotonic() < cached[1]):
        return root
    loop = asyncio.get_running_loop()
    asking = _asking.get(root)
    if asking is not None and asking[0] is loop and not asking[1].done():
        await asyncio.shield(asking[1])  # another call is asking right now: its answer is ours
        return root
    future = loop.create_future()
    _asking[root] = (loop, future)
    try:
        window, final = await _ask_props(root, settings, client)
        expires = float("inf") if final else time.monotonic() + RETRY_UNKNOWN_AFTER_S
        _windows[root] = (window, expires)
    finally:
        future.set_result(None)
        if _asking.get(root, (None, None))[1] is future:
            del _asking[root]
    return root


def learn(settings: LLMSettings, window: int | None) -> None:
    """Remember the window a server named when it refused a request as too long."""
    if settings.base_url and window and window > 0 and not settings.context_window:
        _windows[server_root(settings.base_url)] = (window, float("inf"))


def forget() -> None:
    """Drop every cached answer (a restarted server may have a new -c)."""
    _windows.clear()
    _markers.clear()
    _slots.clear()
    _llama.clear()


async def count_tokens(
    settings: LLMSettings, client: httpx.AsyncClient | None, content: str | list[ChatMessage]
) -> int | None:
    """The server's own token count (llama.cpp `POST /tokenize`), or None where it has none.

    For messages, llama.cpp's `POST /apply-template` renders the chat template first, so the
    count includes the role markers; where that endpoint is missing, the contents are
    counted with our per-message overhead added.
    """
    if settings.provider != "openai" or not settings.base_url:
        return None
    if urlsplit(settings.base_url).hostname in _NO_PROPS_HOSTS:
        return None
    root = server_root(settings.base_url)
    if isinstance(content, str):
        return await _tokenize(root, settings, client, content)
    data = await _request(root, settings, client, "POST", "/apply-template",
                          {"messages": [{"role": m.role, "content": m.content} for m in content]})
    if isinstance(data, dict) and isinstance(data.get("prompt"), str):
        return await _tokenize(root, settings, client, data["prompt"])
    counts = [await _tokenize(root, settings, client, m.content) for m in content]
    if any(c is None for c in counts):
        return None
    return sum(counts) + MESSAGE_OVERHEAD_TOKENS * len(content)  # type: ignore[arg-type]


async def _tokenize(root: str, settings: LLMSettings, client: httpx.AsyncClient | None, text: str) -> int | None:
    data = await _request(root, settings, client, "POST", "/tokenize", {"content": text})
    tokens = data.get("tokens") if isinstance(data, dict) else None
    return len(tokens) if isinstance(tokens, list) else None


async def _ask_props(
    root: str, settings: LLMSettings, client: httpx.AsyncClient | None
) -> tuple[int | None, bool]:
    """(window, final): final is False when asking again later might get an answer."""
    try:
        data = await _request(root, settings, client, "GET", "/props", None, raise_transient=True)
    except _Transient:
        return None, False
    if not isinstance(data, dict):
        return None, True
    template, eos = data.get("chat_template"), data.get("eos_token")
    _markers[root] = stop_sequences(template if isinstance(template, str) else None,
                                    eos if isinstance(eos, str) else None)
    slots = data.get("total_slots")
    if isinstance(slots, int) and not isinstance(slots, bool) and slots > 0:
        _slots[root] = slots
    defaults = data.get("default_generation_settings")
    if isinstance(defaults, dict) or "total_slots" in data:
        _llama.add(root)
    per_slot = defaults.get("n_ctx") if isinstance(defaults, dict) else None
    for value in (per_slot, data.get("n_ctx")):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            log.info("model context window from %s/props: %d tokens", root, value)
            return value, True
    return None, True


class _Transient(Exception):
    pass


async def _request(
    root: str,
    settings: LLMSettings,
    client: httpx.AsyncClient | None,
    method: str,
    path: str,
    body: dict | None,
    *,
    raise_transient: bool = False,
):
    """The JSON a llama.cpp endpoint answers, or None (never raises, but see raise_transient)."""
    headers = {"authorization": f"Bearer {settings.api_key}"} if settings.api_key else {}
    own = client is None
    client = client or httpx.AsyncClient()
    try:
        async with asyncio.timeout(ASK_TIMEOUT_S):
            response = await client.request(method, root + path, json=body, headers=headers,
                                            timeout=ASK_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - any failure only means "the server did not say"
        log.debug("%s %s%s failed: %s", method, root, path, type(exc).__name__)
        if raise_transient:
            raise _Transient from exc
        return None
    finally:
        if own:
            await client.aclose()
    if response.status_code >= 500 and raise_transient:
        raise _Transient
    if response.status_code != 200:
        return None
    try:
        return response.json()
    except ValueError:
        return None
