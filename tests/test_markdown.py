"""Model text is untrusted: the one renderer never lets markup or unsafe links through."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tutor.render.markdown import render, render_inline


def test_raw_html_is_escaped_not_rendered():
    html = render('<script>alert(1)</script>\n\n<img src=x onerror="alert(1)">')
    assert "<script" not in html and "<img" not in html
    assert "&lt;script&gt;" in html and "onerror" in html  # visible as text, inert


def test_javascript_and_data_links_are_dropped():
    for url in ["javascript:alert(1)", "JaVaScRiPt:alert(1)", " javascript:alert(1)", "vbscript:x", "data:text/html,x"]:
        html = render(f"[click]({url})")
        assert "href" not in html, url


def test_safe_links_open_in_a_new_tab_without_referrer():
    html = render("[guide](https://example.org/a)")
    assert 'href="https://example.org/a"' in html
    assert 'target="_blank"' in html and "noopener" in html


def test_unsafe_markdown_images_show_their_alt_text():
    assert render("![chart](data:image/png;base64,AAAA)").count("<img") == 0
    html = render("![chart](javascript:alert(1))")
    assert "<img" not in html and "chart" in html


def test_markdown_structure_is_rendered():
    html = render("**bold** and *em*\n\n- a\n- b\n\n1. one\n\n> quote")
    for tag in ("<strong>", "<em>", "<ul>", "<ol>", "<blockquote>"):
        assert tag in html
    assert render_inline("**x**") == "<strong>x</strong>"


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=300))
def test_no_input_produces_a_script_tag_or_event_handler_attribute(text):
    html = render(text) + render_inline(text)
    lowered = html.lower()
    assert "<script" not in lowered and "<iframe" not in lowered
    assert " onerror=" not in lowered and " onclick=" not in lowered
    assert 'href="javascript:' not in lowered
