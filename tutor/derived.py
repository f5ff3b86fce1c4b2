"""What the code derives from a loaded module on every turn (progress's topic phrases and
shape, the prompt's module text), made once per module.

A value is kept while the module object and every field it was made from are the same
objects. Modules are read-only once loaded; a copy with other phases or fields
(model_copy(update=...)) gets values of its own, since Module makes new topic tuples when
its phases change.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["derived", "per_module"]

T = TypeVar("T")
M = TypeVar("M")

_DERIVED: dict[tuple[str, int], tuple[tuple, Any]] = {}
_MAX = 256  # values kept; modules reloaded many times (tests) forget the old ones


def derived(name: str, module: M, build: Callable[[M], T], *made_from: Any) -> T:
    """`build(module)`, remembered under `name` for this module object and `made_from`
    (the fields `build` reads, compared by identity)."""
    made = (module, *made_from)
    cached = _DERIVED.get((name, id(module)))
    if cached is not None and all(a is b for a, b in zip(cached[0], made)):
        return cached[1]
    if len(_DERIVED) >= _MAX:
        _DERIVED.clear()
    value = build(module)
    _DERIVED[(name, id(module))] = (made, value)
    return value


def per_module(name: str, module: Any, build: Callable[[Any], T]) -> T:
    """`derived` for what is made from a module's topics (progress's phrases, needles, shape)."""
    return derived(name, module, build, module.topics)
