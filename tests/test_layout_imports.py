"""The core's modules import each other in one direction only (no circles at run time)."""

from __future__ import annotations

import ast
from pathlib import Path

TUTOR = Path(__file__).resolve().parents[1] / "tutor"


def _group(module: str) -> str:
    return ".".join(module.split(".")[:2])  # tutor.llm.policy -> tutor.llm


def _runtime_edges() -> dict[str, set[str]]:
    """Imports between top-level parts of the core, leaving out `if TYPE_CHECKING:` blocks."""
    edges: dict[str, set[str]] = {}
    for path in TUTOR.rglob("*.py"):
        name = ".".join(path.relative_to(TUTOR.parent).with_suffix("").parts).removesuffix(".__init__")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skipped = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                   and "TYPE_CHECKING" in ast.unparse(node.test) for n in ast.walk(node)}
        for node in ast.walk(tree):
            if id(node) in skipped or not isinstance(node, ast.ImportFrom) or not node.module:
                continue
            if node.module.startswith("tutor.") and _group(node.module) != _group(name):
                edges.setdefault(_group(name), set()).add(_group(node.module))
    return edges


def test_no_import_circles_between_parts_of_the_core():
    edges = _runtime_edges()
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            assert state.get(nxt) != 1, "import circle: " + " -> ".join(path[path.index(nxt):] + [nxt])
            if nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    # the ones the engine split is about
    assert "tutor.turns.prompts" not in edges.get("tutor.content.modules", set())
    assert "tutor.progress" not in edges.get("tutor.content.modules", set())


# What each layer may not import (its __init__ says what it owns): the direction is
# web -> turns -> teach / risk / console / access -> understand -> content, render, llm,
# contract -> storage.
NEVER = {
    "tutor.turns": {"tutor.web"},
    "tutor.teach": {"tutor.web", "tutor.turns", "tutor.console"},
    "tutor.risk": {"tutor.web", "tutor.turns", "tutor.teach", "tutor.console"},
    "tutor.console": {"tutor.web", "tutor.turns"},
    "tutor.access": {"tutor.web", "tutor.turns", "tutor.teach", "tutor.console", "tutor.risk"},
    "tutor.understand": {"tutor.web", "tutor.turns", "tutor.teach", "tutor.risk", "tutor.console", "tutor.content"},
    "tutor.content": {"tutor.web", "tutor.turns", "tutor.teach", "tutor.console", "tutor.access"},
    "tutor.render": {"tutor.web", "tutor.turns", "tutor.teach", "tutor.console"},
    "tutor.llm": {"tutor.web", "tutor.turns", "tutor.teach", "tutor.console", "tutor.risk"},
    "tutor.contract": {"tutor.web", "tutor.turns", "tutor.teach", "tutor.console", "tutor.risk", "tutor.llm"},
    "tutor.storage": {"tutor.web", "tutor.turns", "tutor.teach", "tutor.console", "tutor.risk", "tutor.llm",
                      "tutor.content", "tutor.render", "tutor.access", "tutor.understand"},
}


def test_each_layer_imports_only_the_layers_below_it():
    edges = _runtime_edges()
    wrong = {layer: sorted(edges.get(layer, set()) & forbidden) for layer, forbidden in NEVER.items()}
    assert {k: v for k, v in wrong.items() if v} == {}
