"""HUMAN task instructions rendered from markdown, safely.

markdown-it-py in CommonMark mode with raw HTML disabled (``<script>`` in the text is shown
as text) and its link validation (``javascript:``, ``vbscript:``, ``file:`` and most
``data:`` links are not made into links).
"""

from __future__ import annotations

from markdown_it import MarkdownIt
from markupsafe import Markup

_RENDERER = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})


def render_markdown(text: str) -> Markup:
    return Markup(_RENDERER.render(text))
