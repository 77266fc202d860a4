"""Source code and diffs as highlighted HTML, done here with pygments (the page runs no highlighter).

    from agent.report.code import highlight_python, highlight_diff, code_css
    html = highlight_python(source)          # <div class="hl">...</div>, classes styled by code_css()
    html = highlight_diff(old, new, "attempt 1", "attempt 2")
"""

from __future__ import annotations

import difflib
import html

CSS_CLASS = "hl"
STYLE = "friendly"      # a light pygments style, readable printed and on screen


def _formatter(**options):
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(cssclass=CSS_CLASS, style=STYLE, **options)


def code_css() -> str:
    """The stylesheet for the highlighted blocks (token classes under .hl)."""
    return _formatter().get_style_defs(f".{CSS_CLASS}")


def highlight_python(source: str) -> str:
    """Python source with line numbers, as an HTML table of numbers and code."""
    from pygments import highlight
    from pygments.lexers import PythonLexer

    if not source.strip():
        return '<p class="muted">(empty)</p>'
    return highlight(source, PythonLexer(stripnl=False), _formatter(linenos="table"))


def unified_diff(old: str, new: str, old_name: str, new_name: str, context: int = 3) -> str:
    """difflib's unified diff of two sources, "" when they are the same."""
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=old_name, tofile=new_name, n=context))


def highlight_diff(old: str, new: str, old_name: str, new_name: str) -> str:
    """A unified diff, highlighted; a short note when the sources are the same."""
    from pygments import highlight
    from pygments.lexers import DiffLexer

    text = unified_diff(old, new, old_name, new_name)
    if not text:
        return f'<p class="muted">identical to {html.escape(old_name)}</p>'
    if not text.endswith("\n"):
        text += "\n"
    return highlight(text, DiffLexer(stripnl=False), _formatter())
