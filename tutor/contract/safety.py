"""Which URLs from untrusted (model) text may reach the page. One place for the rule."""

from __future__ import annotations

from urllib.parse import urlsplit

_ASSET_PREFIX = "/"


def is_safe_link(url: str) -> bool:
    """A link may be http(s), mailto, or a relative/fragment link inside the app."""
    url = url.strip()
    if not url:
        return False
    scheme = urlsplit(url).scheme.lower()
    if scheme in ("http", "https", "mailto"):
        return True
    if scheme:
        return False
    # No scheme: relative path or fragment; refuse protocol-relative "//host".
    return not url.startswith("//") and not _has_control_chars(url)


def is_safe_media_src(src: str) -> bool:
    """Media may come from http(s) URLs or the app's own assets ("/images/x.svg")."""
    src = src.strip()
    if not src or _has_control_chars(src):
        return False
    parts = urlsplit(src)
    scheme = parts.scheme.lower()
    if scheme in ("http", "https"):
        return bool(parts.netloc)
    if scheme:
        return False  # javascript:, data:, file:, vbscript:, blob: ...
    return src.startswith(_ASSET_PREFIX) and not src.startswith("//") and ".." not in src


def _has_control_chars(text: str) -> bool:
    return any(ord(ch) < 32 or ord(ch) == 127 for ch in text)
