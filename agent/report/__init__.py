"""`kgen report`'s page: a run or a leaderboard as one static, self-contained HTML file.

- page.py: the document (facts, task and best kernel side by side, attempts with diffs, a board's tables)
- charts.py: inline SVG charts (speedup per attempt, the best kernel's stalls)
- code.py: pygments highlighting of kernels and difflib diffs, done when the page is written
- report.css, report.js: inlined into every page (nothing is fetched when it opens)

    from agent.report import write_run_report
    write_run_report(Store("results"), "latest-run-id", "report.html")
"""

from __future__ import annotations

from pathlib import Path

from agent.report.page import board_page, run_page
from agent.store import Store


def write_run_report(store: Store, run_id: str, out: str | Path) -> Path:
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(run_page(store, run_id), encoding="utf-8")
    return path


def write_board_report(store: Store, board, out: str | Path) -> Path:
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(board_page(store, board), encoding="utf-8")
    return path


__all__ = ["board_page", "run_page", "write_board_report", "write_run_report"]
