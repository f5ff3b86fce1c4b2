"""Where to go after signing in: same-site paths only, carried whole through the sign-in
and sign-up pages. Plain Python; imports nothing of ours."""

from __future__ import annotations

from urllib.parse import quote

__all__ = ["auth_page", "safe_next"]


def safe_next(target: str | None, default: str = "/") -> str:
    """A same-site path to go back to after signing in (never another site: `//host`,
    `/\\host`, `https://...`, control characters)."""
    target = (target or "").strip()
    if (not target.startswith("/") or target.startswith("//") or "\\" in target
            or any(ord(c) < 32 or ord(c) == 127 for c in target) or len(target) > 512):
        return default
    if target.split("?")[0] in ("/signin", "/signup"):
        return default
    return target


def auth_page(page: str, next_path: str | None) -> str:
    """The sign-in or sign-up page's address that comes back to `next_path` afterwards,
    the path encoded whole ("/learn?module=a&new=1" stays one value)."""
    target = safe_next(next_path)
    return page if target == "/" else f"{page}?next={quote(target, safe='')}"
