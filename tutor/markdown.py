"""The one markdown renderer: markdown-it-py, raw HTML off, unsafe links dropped.

Everything a model writes is untrusted. Its markdown becomes HTML here, on the server,
once; the page shows that HTML and nothing else. With `html` disabled every `<` the model
wrote is escaped, so `<script>` or `<img onerror=...>` arrive as visible text.
"""

from __future__ import annotations

from functools import lru_cache

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

from tutor.contract.safety import is_safe_link, is_safe_media_src


def _validate_link(url: str) -> bool:
    return is_safe_link(url)


class _SafeRenderer(RendererHTML):
    def link_open(self, tokens: list[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        token = tokens[idx]
        href = str(token.attrGet("href") or "")
        if href.startswith(("http://", "https://", "mailto:")):
            token.attrSet("target", "_blank")
            token.attrSet("rel", "noopener noreferrer nofollow")
        return self.renderToken(tokens, idx, options, env)

    def image(self, tokens: list[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        token = tokens[idx]
        if not is_safe_media_src(str(token.attrGet("src") or "")):
            # Show what the image was meant to be instead of loading it.
            return self.renderInlineAsText(token.children or [], options, env)
        token.attrSet("loading", "lazy")
        token.attrSet("referrerpolicy", "no-referrer")
        return super().image(tokens, idx, options, env)


@lru_cache(maxsize=1)
def _md() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.validateLink = _validate_link  # type: ignore[method-assign]
    md.renderer = _SafeRenderer(md)
    return md


def render(text: str) -> str:
    """Markdown (untrusted) -> safe HTML."""
    return _md().render(text or "")


def render_inline(text: str) -> str:
    """For one line (a heading, a caption): inline markdown only, no wrapping <p>."""
    return _md().renderInline(text or "")
