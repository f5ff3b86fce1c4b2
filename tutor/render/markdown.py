"""The one markdown renderer: markdown-it-py, raw HTML off, unsafe links dropped.

Everything a model writes is untrusted. Its markdown becomes HTML here, on the server,
once; the page shows that HTML and nothing else. With `html` disabled every `<` the model
wrote is escaped, so `<script>` or `<img onerror=...>` arrive as visible text.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from functools import lru_cache
from html import escape

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.rules_block.state_block import StateBlock
from markdown_it.rules_block.table import escapedSplit, getLine
from markdown_it.rules_block.table import table as table_rule
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

from tutor.contract.safety import is_safe_link, is_safe_media_src
from tutor.settings import media_hosts

# What one piece of model text may render to. A table's header fixes its width and every
# body row is padded to it, so "|a|a|...|" over 1,000 columns plus a few "|x|" lines is a
# 4 KB reply that became 660 KB of HTML and ~0.6 s of parsing (blocking the event loop).
# A tutor's table is a few columns and rows; anything past these shows a short notice.
# Many tables of fewer cells cost the same, so the cells are counted over a whole `budget`
# (one render, or every render of one message: see tutor.render.display), and so is the HTML.
MAX_TABLE_COLUMNS = 20
MAX_TABLE_CELLS = 1000  # header rows included
MAX_HTML_CHARS = 200_000  # e.g. one long link target referenced a thousand times
MAX_NESTING = 20  # lists and quotes inside each other (markdown-it's own cap)
TABLE_TOO_LARGE = "(table too large to show)"
TOO_LARGE = "(this part of the reply is too large to show)"
IMAGE_WITHHELD = "image not shown"

_EXTERNAL = ("http://", "https://", "mailto:")
_CELLS, _CHARS = "tutor_table_cells", "tutor_html_chars"  # what a budget has spent


def _validate_link(url: str) -> bool:
    return is_safe_link(url)


class _SafeRenderer(RendererHTML):
    def link_open(self, tokens: list[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        token = tokens[idx]
        href = str(token.attrGet("href") or "")
        if not is_safe_link(href):
            # markdown-it keeps "[x]()" (an empty destination, which it does not validate) as
            # a link to nowhere: its text is shown, as for a refused address.
            close = next((t for t in tokens[idx + 1:] if t.type == "link_close"), None)
            if close is not None:
                close.meta["unlinked"] = True
                return ""
        if href.lower().startswith(_EXTERNAL):
            token.attrSet("target", "_blank")
        token.attrSet("rel", "noopener noreferrer nofollow")
        return self.renderToken(tokens, idx, options, env)

    def link_close(self, tokens: list[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        return "" if tokens[idx].meta.get("unlinked") else self.renderToken(tokens, idx, options, env)

    def image(self, tokens: list[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        token = tokens[idx]
        if not is_safe_media_src(str(token.attrGet("src") or "")):
            # Not loaded (it could be a tracker): say what the image was meant to be instead.
            alt = self.renderInlineAsText(token.children or [], options, env).strip()
            return f'<span class="image-withheld">[{escape(alt or IMAGE_WITHHELD)}]</span>'
        token.attrSet("loading", "lazy")
        token.attrSet("referrerpolicy", "no-referrer")
        return super().image(tokens, idx, options, env)


Rule = Callable[[StateBlock, int, int, bool], bool]


def _capped_table(table: Rule) -> Rule:
    """markdown-it's table rule, but a table too wide or too large becomes a one-line notice
    before a single cell is made (the cost is in making the cells)."""

    def rule(state: StateBlock, start: int, end: int, silent: bool) -> bool:
        if not table(state, start, end, True):
            return False
        if silent:
            return True
        columns = _header_columns(state, start)
        last = _table_end(state, start, end)
        cells = columns * (last - start - 1) + state.env.get(_CELLS, 0)
        if columns <= MAX_TABLE_COLUMNS and cells <= MAX_TABLE_CELLS:
            state.env[_CELLS] = cells
            return table(state, start, end, False)
        token = state.push("paragraph_open", "p", 1)
        token.map = [start, last]
        token.attrSet("class", "render-capped")
        token = state.push("inline", "", 0)
        token.map, token.content, token.children = [start, last], TABLE_TOO_LARGE, []
        state.push("paragraph_close", "p", -1)
        state.line = last
        return True

    return rule


def _header_columns(state: StateBlock, start: int) -> int:
    cells = escapedSplit(getLine(state, start).strip())
    return len(cells) - (cells[0].strip() == "") - (len(cells) > 1 and cells[-1].strip() == "")


def _table_end(state: StateBlock, start: int, end: int) -> int:
    """The line after the table's last row, found as markdown-it's table rule finds it."""
    terminators = state.md.block.ruler.getRules("blockquote")
    old_parent, state.parentType = state.parentType, "table"
    line = start + 2
    try:
        while line < end:
            if state.sCount[line] < state.blkIndent or state.is_code_block(line):
                break
            if not getLine(state, line).strip() or any(t(state, line, end, True) for t in terminators):
                break
            line += 1
    finally:
        state.parentType = old_parent
    return line


@lru_cache(maxsize=1)
def _md() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False,
                                   "maxNesting": MAX_NESTING})
    md.enable(["table", "strikethrough"])
    # Same place, same alternatives as markdown-it's own rule (parser_block._rules).
    md.block.ruler.at("table", _capped_table(table_rule), {"alt": ["paragraph", "reference"]})
    md.validateLink = _validate_link  # type: ignore[method-assign]
    md.renderer = _SafeRenderer(md)
    return md


def render(text: str, budget: dict | None = None) -> str:
    """Markdown (untrusted) -> safe HTML. Pass one `budget` (a dict, empty at first) to every
    render of a message: its tables and HTML are then capped together."""
    budget = {} if budget is None else budget
    return _capped(_rendered(text or "", False, budget), "<p class=\"render-capped\">" + TOO_LARGE + "</p>\n", budget)


def render_inline(text: str, budget: dict | None = None) -> str:
    """For one line (a heading, a caption): inline markdown only, no wrapping <p>."""
    budget = {} if budget is None else budget
    return _capped(_rendered(text or "", True, budget), TOO_LARGE, budget)


# The same text is rendered again and again: a reply's blocks while it streams and once it
# is stored, every message of a conversation on every page load. A render made with a
# budget of its own is kept (RENDERED_KEEP characters of text and HTML in all, the most
# recently used) and reused whenever the caller's budget could not change it: the budget
# holds nothing but sizes (markdown-it also keeps a message's link reference definitions
# in it), the render defined no references, and its tables fit in what the budget has
# left (then every table it made is made again, and every table it refused, too large on
# its own, is refused again). Anything else is rendered with the budget, as it always was.
RENDERED_KEEP = 16_000_000
_KEPT_TEXT = 8_000  # characters: a longer text (rare) is rendered each time
_SIZES = frozenset((_CELLS, _CHARS))
_rendered_lock = threading.Lock()
_rendered_kept: OrderedDict[tuple[str, bool, tuple[str, ...]], tuple[str | None, int]] = OrderedDict()
_rendered_size = 0


def _rendered(text: str, inline: bool, budget: dict) -> str:
    if len(text) > _KEPT_TEXT or not budget.keys() <= _SIZES:
        return _render(text, inline, budget)
    key = (text, inline, media_hosts())  # which images may load is part of the HTML
    with _rendered_lock:
        kept = _rendered_kept.get(key)
        if kept is not None:
            _rendered_kept.move_to_end(key)
    if kept is None:
        env: dict = {}
        html = _render(text, inline, env)
        # A text defining link references puts them in the budget for the parts after it:
        # it is remembered as one to render with the budget every time (None).
        kept = (html if env.keys() <= {_CELLS} else None, env.get(_CELLS, 0))
        _keep(key, kept)
    html, cells = kept
    if html is None:
        return _render(text, inline, budget)
    if cells:
        spent = budget.get(_CELLS, 0) + cells
        if spent > MAX_TABLE_CELLS:
            return _render(text, inline, budget)
        budget[_CELLS] = spent
    return html


def _render(text: str, inline: bool, env: dict) -> str:
    md = _md()
    return md.renderInline(text, env) if inline else md.render(text, env)


def _keep(key: tuple[str, bool, tuple[str, ...]], kept: tuple[str | None, int]) -> None:
    global _rendered_size
    with _rendered_lock:
        if key in _rendered_kept:
            return
        _rendered_kept[key] = kept
        _rendered_size += len(key[0]) + len(kept[0] or "")
        while _rendered_size > RENDERED_KEEP and _rendered_kept:
            (text, _, _), (html, _) = _rendered_kept.popitem(last=False)
            _rendered_size -= len(text) + len(html or "")


def _capped(html: str, notice: str, budget: dict) -> str:
    spent = budget.get(_CHARS, 0) + len(html)
    if spent > MAX_HTML_CHARS:
        return notice
    budget[_CHARS] = spent
    return html
