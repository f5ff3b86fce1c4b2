"""The core stays framework-free: only the app module and the state import Reflex."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = {ROOT / "tutor" / "tutor.py", ROOT / "tutor" / "state.py", ROOT / "tutor" / "home_state.py",
           ROOT / "tutor" / "auth_state.py", ROOT / "tutor" / "operator_state.py", ROOT / "tutor" / "chat_sending.py",
           ROOT / "tutor" / "identity_gate.py"}


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
        if p not in ALLOWED and _imports_reflex(p)
    ]
    assert offenders == []


def test_the_app_and_its_parts_are_where_the_design_says():
    for path in ["rxconfig.py", "pyproject.toml", "README.md", "tutor/tutor.py", "tutor/state.py",
                 "tutor/contract/__init__.py", "tutor/engine.py", "components", "modules", "tests"]:
        assert (ROOT / path).exists(), path
