"""Source code and diffs as highlighted HTML, done here with pygments (the page runs no highlighter).

    from agent.report.code import highlight_python, highlight_diff, code_css
    html = highlight_python(source)          # <div class="hl">...</div>, classes styled by code_css()
    html = highlight_diff(old, new, "attempt 1", "attempt 2")
"""

from __future__ import annotations

import difflib
import html
import re

CSS_CLASS = "hl"
STYLE = "friendly"      # a light pygments style, readable printed and on screen


def _formatter(**options):
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(cssclass=CSS_CLASS, style=STYLE, **options)


def code_css() -> str:
    """The stylesheet for the highlighted blocks (token classes under .hl)."""
    return _formatter().get_style_defs(f".{CSS_CLASS}")


def highlight_python(source: str) -> str:
    """Python source, one `<span class="line">` per line with its number inside it.

    NOTE: each line is a block of its own, so that a long line wraps under itself (report.css: a hanging
    indent past the number) instead of running out of its box: a table of numbers beside one <pre> could only
    be cropped or scrolled, and a scroll bar at the foot of a tall box reads as cropped code."""
    from pygments import highlight
    from pygments.lexers import PythonLexer

    if not source.strip():
        return '<p class="muted">(empty)</p>'
    out = highlight(source, PythonLexer(stripnl=False), _formatter(linenos="inline", linespans=_LINE_ID))
    # pygments names each line's span by an id; one page holds many listings, so a class, not an id. The line's
    # newline goes too: the block ends the line (a newline inside it would add an empty one).
    return re.sub(rf'<span id="{_LINE_ID}-\d+">(.*?)\n?</span>(?=<span id="{_LINE_ID}-|</pre>)',
                  r'<span class="line">\1</span>', out, flags=re.S)


_LINE_ID = "kgen-line"


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
