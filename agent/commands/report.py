"""`kgen report RUN|LEADERBOARD [-o report.html]`: one static HTML page to review a run or a board.

    kgen report latest                          # the newest run -> results/<task>/<run>/report.html
    kgen report 20261129-134501-softmax-a1b2 -o softmax.html
    kgen report nightly                         # a leaderboard -> results/leaderboards/nightly/report.html

The page is self-contained (inline CSS, JS and SVG; code highlighted when it
is written; no fonts, scripts or images fetched): it opens offline and can be
mailed or archived. It shows the task and the best kernel side by side, the
speedup of every attempt (or, without a GPU, that nothing was timed), the best
kernel's stall breakdown, and every attempt's verdict with its kernel and its
diff against the attempt before. A run with no correct kernel shows its closest
attempt in the best kernel's place (the one that came nearest: it ran but was
wrong, else it compiled, ...), with why it failed. Code lines wrap, never cropped
(docs/report-failed-run.png, and the terminal side in docs/report-failed-run.txt). A leaderboard's page has the fast_p summary,
the task table, and each task's run below it, linked from the table.

A run id may be shortened to any unique prefix; a task name means its newest run.
Exit codes: 0 written; 2 nothing by that name.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("report", help="write a self-contained HTML page for a run or a leaderboard",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", help="a run id (or unique prefix, or latest), a leaderboard name, or a task name")
    p.add_argument("-o", "--output", metavar="FILE|DIR",
                   help="where to write the page: a file, or a folder to write report.html into "
                        "(default report.html in the run's or the board's folder)")
    p.add_argument("--results", metavar="DIR", help="results folder (default $KGEN_RESULTS, else results)")
    p.set_defaults(func=run)


def run(args) -> int:
    from agent.commands.show import resolve_target, results_dir
    from agent.board.files import board_dir, load_board
    from agent.report import write_board_report, write_run_report
    from agent.store import Store

    results = results_dir(args)
    store = Store(results)
    try:
        target = resolve_target(args.target, store, results)
    except KeyError as exc:
        print(f"kgen report: error: {str(exc).strip(chr(39))}", file=sys.stderr)
        return 2
    output = _output_path(args.output)
    if output is None:
        return 2
    if target.kind == "leaderboard":
        out = output or board_dir(results, target.name) / "report.html"
        path = write_board_report(store, load_board(results, target.name), out)
    else:
        run_id = store.list_runs(task=target.name, limit=1)[0].run_id if target.kind == "task" else target.name
        out = output or store.run_dir(run_id) / "report.html"
        path = write_run_report(store, run_id, out)
    print(f"wrote {path}")
    print(f"open it: file://{path.resolve()}")
    return 0


def _output_path(output: str | None):
    """Where -o points: a folder (existing, or named with a trailing slash) gets report.html inside it.

    "" when not given (the default place applies); None, with the reason printed, when it cannot be written."""
    if not output:
        return ""
    path = Path(output)
    if path.is_dir() or output.endswith(("/", os.sep)):
        path = path / "report.html"
    if path.exists() and not path.is_file():
        print(f"kgen report: error: {path} exists and is not a file", file=sys.stderr)
        return None
    parent = path.parent
    if parent.exists() and not parent.is_dir():
        print(f"kgen report: error: {parent} is not a folder", file=sys.stderr)
        return None
    return path
