"""Markdown to the inert HTML subset that QTextDocument shows: no raw HTML, no images, no live links.

Model output is untrusted: it may hold any HTML, image or link. markdown-it-py parses with raw
HTML off, so any tag in the text is escaped and shown literally. Images become placeholder text, never an <img>.
Links keep their text but point at ``cove-link:N``; the real address is kept in ``links[N]`` and
is only ever opened by the view after the person confirms it. Code blocks are highlighted by
pygments with inline styles and get a ``cove-copy:N`` link whose text is ``code_blocks[N]``.
This module imports no Qt, so it runs and is tested headless.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

from markdown_it import MarkdownIt
from pygments import highlight as pygments_highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

from models.units import format_size

# Only our renderer writes these schemes; model text can never produce them (every href it
# writes is rewritten to cove-link:N, and raw HTML is escaped).
LINK_SCHEME = "cove-link"
COPY_SCHEME = "cove-copy"

# Above this many characters the message is shown as plain text (markdown-it's scanner is
# Python and a hostile reply must not freeze the UI thread); the raw text is kept whole.
MAX_MARKDOWN_CHARS = 200_000
MAX_PLAIN_CHARS = 200_000
MAX_HIGHLIGHT_CHARS = 50_000  # code blocks longer than this are shown unhighlighted
MAX_PLACEHOLDER_URL = 160
MAX_NESTING = 20  # markdown-it's block nesting limit (lists in lists, quotes in quotes)


@dataclass(frozen=True)
class Theme:
    """Colors for the pieces of HTML the renderer styles itself (the rest follows the palette)."""

    dark: bool
    pygments_style: str
    code_bg: str
    code_header: str
    border: str
    muted: str
    link: str
    inline_code_bg: str
    quote_bar: str


LIGHT = Theme(False, "default", "#f6f8fa", "#eaeef2", "#d0d7de", "#656d76", "#0969da", "#eff1f3", "#d0d7de")
DARK = Theme(True, "github-dark", "#16181c", "#2a2d33", "#454a52", "#9198a1", "#4493f8", "#33363c", "#4a4f57")


@dataclass(frozen=True)
class Rendered:
    """Rendered HTML plus the side tables its cove-copy:N and cove-link:N anchors index into."""

    html: str
    code_blocks: tuple[str, ...] = ()
    links: tuple[str, ...] = ()
    images: tuple[str, ...] = ()  # addresses shown as placeholders, never fetched
    plain: bool = False  # True when the text was too long for markdown and shown as plain text


def theme_for(palette_dark: bool) -> Theme:
    return DARK if palette_dark else LIGHT


def document_stylesheet(palette_dark: bool = False) -> str:
    """The QTextDocument default stylesheet that goes with render_markdown's HTML."""
    t = theme_for(palette_dark)
    return (
        f"a {{ color: {t.link}; text-decoration: none; }}"
        "p { margin-top: 0px; margin-bottom: 8px; }"
        "ul, ol { margin-top: 0px; margin-bottom: 8px; }"
        "li { margin-bottom: 2px; }"
        "h1 { font-size: x-large; margin-top: 6px; margin-bottom: 8px; }"
        "h2 { font-size: large; margin-top: 6px; margin-bottom: 6px; }"
        "h3, h4, h5, h6 { font-size: medium; margin-top: 4px; margin-bottom: 4px; }"
        "pre { margin-top: 0px; margin-bottom: 0px; }"
        "table { margin-top: 2px; margin-bottom: 10px; }"
    )


def render_markdown(text: str, *, palette_dark: bool = False, highlight: bool = True, first_link: int = 0, first_code: int = 0) -> Rendered:
    """Render untrusted markdown to inert HTML for a SafeTextDocument.

    first_link / first_code number the anchors from there (for a message rendered in pieces).
    """
    theme = theme_for(palette_dark)
    if len(text) > MAX_MARKDOWN_CHARS:
        return render_plain(text, palette_dark=palette_dark)
    env: dict[str, Any] = {
        "code": [],
        "links": [],
        "images": [],
        "theme": theme,
        "highlight": highlight,
        "first_link": first_link,
        "first_code": first_code,
    }
    md = _markdown(theme)
    tokens = md.parse(text, env)
    # markdown-it silently drops the rest of a block once nesting reaches maxNesting (hostile
    # or not, the text after it would vanish). Anything that deep is shown as plain text.
    if any(token.level >= MAX_NESTING - 1 for token in tokens):
        return render_plain(text, palette_dark=palette_dark)
    body = md.renderer.render(tokens, md.options, env).rstrip()
    return Rendered(body, tuple(env["code"]), tuple(env["links"]), tuple(env["images"]))


def render_plain(text: str, *, palette_dark: bool = False) -> Rendered:
    """Plain text, escaped, line breaks kept; long text is cut for display (the raw text is not)."""
    theme = theme_for(palette_dark)
    shown = text[:MAX_PLAIN_CHARS]
    body = "<p>" + html.escape(shown).replace("\n", "<br />") + "</p>"
    if len(text) > len(shown):
        body += (
            f'<p style="color: {theme.muted}"><i>… {len(text) - len(shown):,} more characters are not '
            "shown here. Copy copies the whole message.</i></p>"
        )
    return Rendered(body, plain=True)


_PARSERS: dict[bool, MarkdownIt] = {}


def _markdown(theme: Theme) -> MarkdownIt:
    md = _PARSERS.get(theme.dark)
    if md is None:
        # "commonmark" with html=False: raw HTML blocks and inline tags come out escaped, so
        # nothing the model writes can open an element that hides the text after it.
        md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False, "maxNesting": MAX_NESTING})
        md.enable(["table", "strikethrough"])
        md.add_render_rule("fence", _render_fence)
        md.add_render_rule("code_block", _render_fence)
        md.add_render_rule("image", _render_image)
        md.add_render_rule("link_open", _render_link_open)
        md.add_render_rule("code_inline", _render_code_inline)
        md.add_render_rule("table_open", _render_table_open)
        md.add_render_rule("th_open", _render_cell_open)
        md.add_render_rule("td_open", _render_cell_open)
        md.add_render_rule("blockquote_open", _render_blockquote_open)
        md.add_render_rule("blockquote_close", _render_blockquote_close)
        _PARSERS[theme.dark] = md
    return md


def _render_fence(self: Any, tokens: list, idx: int, options: Any, env: dict) -> str:
    token = tokens[idx]
    theme: Theme = env["theme"]
    code = token.content
    lang = (token.info or "").strip().split(maxsplit=1)[0] if token.info else ""
    number = env["first_code"] + len(env["code"])
    env["code"].append(code)
    body = _highlight(code, lang, theme) if env["highlight"] else None
    if body is None:
        body = html.escape(code)
    body = body.rstrip("\n")
    label = html.escape(lang) if lang else "code"
    return (
        f'<table width="100%" cellspacing="0" cellpadding="6" bgcolor="{theme.code_bg}" '
        'style="border-collapse: collapse; margin-bottom: 10px;">'
        f'<tr><td bgcolor="{theme.code_header}">'
        f'<span style="color: {theme.muted}; font-size: small;">{label}</span></td>'
        f'<td bgcolor="{theme.code_header}" align="right"><a href="{COPY_SCHEME}:{number}" '
        f'style="font-size: small;">Copy</a></td></tr>'
        f'<tr><td colspan="2" bgcolor="{theme.code_bg}"><pre style="font-family: monospace;">{body}</pre></td></tr>'
        "</table>\n"
    )


def _highlight(code: str, lang: str, theme: Theme) -> str | None:
    if not lang or len(code) > MAX_HIGHLIGHT_CHARS:
        return None
    try:
        lexer = get_lexer_by_name(lang, stripnl=False, ensurenl=False)
    except ClassNotFound:
        return None
    formatter = HtmlFormatter(noclasses=True, nowrap=True, style=theme.pygments_style)
    return pygments_highlight(code, lexer, formatter)


def _render_image(self: Any, tokens: list, idx: int, options: Any, env: dict) -> str:
    token = tokens[idx]
    theme: Theme = env["theme"]
    src = str(token.attrs.get("src", ""))
    alt = self.renderInlineAsText(token.children or [], options, env)
    env["images"].append(src)
    shown = _describe_address(src)
    alt_part = f"{html.escape(alt)} — " if alt else ""
    return f'<span style="color: {theme.muted};">[image: {alt_part}{html.escape(shown)}]</span>'


def _describe_address(src: str) -> str:
    if src[:5].lower() == "data:":
        mime = src[5:].split(",", 1)[0].split(";", 1)[0] or "data"
        return f"data:{mime}, {format_size(len(src))}, not shown"
    if len(src) > MAX_PLACEHOLDER_URL:
        return src[: MAX_PLACEHOLDER_URL - 1] + "…"
    return src


def _render_link_open(self: Any, tokens: list, idx: int, options: Any, env: dict) -> str:
    # The href Qt sees is only an index; the address itself never reaches the document.
    token = tokens[idx]
    number = env["first_link"] + len(env["links"])
    env["links"].append(str(token.attrs.get("href", "")))
    return f'<a href="{LINK_SCHEME}:{number}">'


def _render_code_inline(self: Any, tokens: list, idx: int, options: Any, env: dict) -> str:
    theme: Theme = env["theme"]
    return f'<code style="background-color: {theme.inline_code_bg}; font-family: monospace;">{html.escape(tokens[idx].content)}</code>'


def _render_table_open(self: Any, tokens: list, idx: int, options: Any, env: dict) -> str:
    theme: Theme = env["theme"]
    return (
        f'<table cellspacing="0" cellpadding="5" border="1" '
        f'style="border-collapse: collapse; border-color: {theme.border}; border-style: solid;">\n'
    )


def _render_cell_open(self: Any, tokens: list, idx: int, options: Any, env: dict) -> str:
    # markdown-it writes style="text-align:…", which QTextDocument ignores; use align=.
    token = tokens[idx]
    style = str(token.attrs.get("style", ""))
    align = style.split(":", 1)[1].strip() if style.startswith("text-align:") else ""
    attr = f' align="{align}"' if align in ("left", "center", "right") else ""
    return f"<{token.tag}{attr}>"


def _render_blockquote_open(self: Any, tokens: list, idx: int, options: Any, env: dict) -> str:
    # QTextDocument has no border-left; a two-cell table draws the quote bar.
    theme: Theme = env["theme"]
    return (
        '<table cellspacing="0" cellpadding="0" style="margin-bottom: 8px;"><tr>'
        f'<td width="3" bgcolor="{theme.quote_bar}"></td><td width="10"></td>'
        f'<td style="color: {theme.muted};">\n'
    )


def _render_blockquote_close(self: Any, tokens: list, idx: int, options: Any, env: dict) -> str:
    return "</td></tr></table>\n"
