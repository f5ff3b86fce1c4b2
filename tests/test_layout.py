"""The core stays framework-free: only the app module and the state import Reflex."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WEB = ROOT / "tutor" / "web"
ALLOWED = {ROOT / "tutor" / "tutor.py"}  # and everything under tutor/web/


def _imports_reflex(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "reflex" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "reflex":
            return True
    return False


def test_core_never_imports_reflex():
    offenders = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "tutor").rglob("*.py")
        if p not in ALLOWED and WEB not in p.parents and _imports_reflex(p)
    ]
    assert offenders == []


def test_the_app_and_its_parts_are_where_the_design_says():
    for path in ["rxconfig.py", "pyproject.toml", "README.md", "tutor/tutor.py", "tutor/web/state.py",
                 "tutor/contract/__init__.py", "tutor/turns/engine.py", "components", "modules", "tests",
                 "docs/ARCHITECTURE.md"]:
        assert (ROOT / path).exists(), path
