"""Renders are kept and reused (tutor.render.markdown._rendered): the HTML and what a message's
budget spends must be exactly what rendering with the budget makes, whatever came before
in the message, however often the same text comes back, and whichever media hosts the
operator allows at the time."""

from __future__ import annotations

import os
from contextlib import contextmanager

from hypothesis import given, settings
from hypothesis import strategies as st

from tutor.render import markdown
from tutor.render.markdown import _capped, _md, render, render_inline


def _table(columns: int, rows: int) -> str:
    head = "|" + "|".join(f"h{c}" for c in range(columns)) + "|\n"
    rule = "|" + "|".join("-" for _ in range(columns)) + "|\n"
    return head + rule + "".join("|" + "|".join(f"{r}" for _ in range(columns)) + "|\n" for r in range(rows))


# Pieces that touch every way a budget or the settings change what a text renders to.
PIECES = st.one_of(
    st.sampled_from([
        "Plain words.", "**bold** and `code`", "# A heading", "- one\n- two", "> quoted",
        "[a link](https://example.org/x)", "[bad](javascript:alert(1))", "[empty]()",
        "![chart](https://img.example.org/c.png)", "![local](/media/m/x.svg)",
        "[ref]: https://example.org/ref", "see [the page][ref]", "[ref]",
        "x" * 300, "<script>alert(1)</script>",
    ]),
    st.builds(_table, st.integers(1, 24), st.integers(0, 60)),  # wide ones refused, big ones fill the budget
)
TEXTS = st.lists(PIECES, min_size=1, max_size=3).map("\n\n".join)
MESSAGES = st.lists(st.tuples(TEXTS, st.booleans()), min_size=1, max_size=6)


def _as_before(message):
    """Every part rendered with the message's one budget, nothing kept."""
    budget: dict = {}
    out = []
    for text, inline in message:
        md = _md()
        html = md.renderInline(text, budget) if inline else md.render(text, budget)
        notice = markdown.TOO_LARGE if inline else '<p class="render-capped">' + markdown.TOO_LARGE + "</p>\n"
        out.append(_capped(html, notice, budget))
    return out, {k: v for k, v in budget.items() if k in (markdown._CELLS, markdown._CHARS)}


def _now(message):
    budget: dict = {}
    out = [(render_inline if inline else render)(text, budget) for text, inline in message]
    return out, {k: v for k, v in budget.items() if k in (markdown._CELLS, markdown._CHARS)}


@settings(max_examples=150, deadline=None)
@given(MESSAGES, st.sampled_from(["", "img.example.org", ".example.org"]))
def test_a_kept_render_is_the_render_the_budget_would_make(message, hosts):
    with _media_hosts(hosts):
        expected = _as_before(message)
        assert _now(message) == expected  # the first time (parts kept as they are rendered)
        assert _now(message) == expected  # again: every part that could be kept is reused
        backwards = list(reversed(message))  # the same parts after others
        assert _now(backwards) == _as_before(backwards)


@contextmanager
def _media_hosts(value: str):
    old = os.environ.get("TUTOR_MEDIA_HOSTS")
    os.environ["TUTOR_MEDIA_HOSTS"] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TUTOR_MEDIA_HOSTS", None)
        else:
            os.environ["TUTOR_MEDIA_HOSTS"] = old


def test_the_operators_media_hosts_apply_to_a_text_rendered_before(monkeypatch):
    text = "![chart](https://img.example.org/c.png)"
    monkeypatch.setenv("TUTOR_MEDIA_HOSTS", "")
    assert "<img" not in render(text)
    monkeypatch.setenv("TUTOR_MEDIA_HOSTS", "img.example.org")
    assert "<img" in render(text)


def test_what_is_kept_stays_within_its_size(monkeypatch):
    monkeypatch.setattr(markdown, "RENDERED_KEEP", 50_000)
    for n in range(400):
        render(f"Message number {n}: " + "words " * 40)
    assert markdown._rendered_size <= 50_000
    assert sum(len(t) + len(h or "") for (t, _, _), (h, _) in markdown._rendered_kept.items()) == markdown._rendered_size
