"""`kgen show [RUN | TASK | LEADERBOARD]`: review stored runs in the terminal.

    kgen show                       # the latest runs, and the stored leaderboards
    kgen show 20261129-134501-softmax-a1b2    # one run: its attempts, the best kernel, where the files are
    kgen show latest                # the newest run
    kgen show softmax               # every run of the task softmax
    kgen show nightly               # the leaderboard named nightly
    kgen show RUN --json            # the same records as JSON on stdout (for scripts)
    kgen show RUN --attempt 3       # one attempt: its verdict, feedback, profile and kernel

A run id may be shortened to any unique prefix. Reads the results folder
(--results, else $KGEN_RESULTS, else results/) and its SQLite index.
Exit codes: 0 shown; 2 nothing by that name.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

from agent.fastp import speedup_text
from verifier.records import printable

LIST_LIMIT = 15
REASON_CHARS = 140      # of an attempt's reason in a table; `--attempt N` shows it whole
PIPE_WIDTH = 160        # columns when stdout is not a terminal
STATUS_STYLE = {"ok": "green", "succeeded": "green", "stopped": "yellow", "running": "cyan",
                "interrupted": "magenta", "mismatch": "yellow", "no_code": "magenta",
                # NOTE: not red: this machine could not check the kernel, which is no failure of it
                "not_run": "blue", "not_checkable": "blue"}


def register(sub) -> None:
    p = sub.add_parser("show", help="review runs, tasks and leaderboards in the terminal",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("target", nargs="?", help="a run id (or unique prefix, or latest), a task name, or a leaderboard")
    p.add_argument("--attempt", type=int, metavar="N", help="with a run: show attempt N in full")
    p.add_argument("-n", "--limit", type=int, default=LIST_LIMIT, metavar="N",
                   help=f"runs listed without a target (default {LIST_LIMIT})")
    p.add_argument("--results", metavar="DIR", help="results folder (default $KGEN_RESULTS, else results)")
    p.add_argument("--json", action="store_true",
                   help="print the record shown as JSON instead (a run with its attempts, an attempt, a task's runs, "
                        "a leaderboard, or the latest runs and the boards' names)")
    p.set_defaults(func=run)


@dataclass(frozen=True)
class Target:
    """What a name given to `kgen show` or `kgen report` refers to."""

    kind: str       # "run", "task" or "leaderboard"
    name: str       # the run id, task name or board name


def results_dir(args) -> str:
    return args.results or os.environ.get("KGEN_RESULTS") or "results"


def resolve_target(text: str, store, results: str | Path) -> Target:
    """A run (exact id or "latest"), else a leaderboard, else a task with runs, else a run id prefix.

    Raises KeyError with a message saying what was looked for.
    """
    from agent.board.files import load_board

    try:
        run_id = store.resolve_run_id(text)
    except KeyError:
        run_id = None
    if run_id is not None and (run_id == text or text == "latest"):
        return Target("run", run_id)
    if load_board(results, text) is not None:
        return Target("leaderboard", text)
    if store.list_runs(task=text, limit=1):
        return Target("task", text)
    if run_id is not None:
        return Target("run", run_id)
    try:
        store.resolve_run_id(text)
    except KeyError as exc:      # several runs share the prefix: say which
        if "matches" in str(exc):
            raise
    raise KeyError(f"no run, task or leaderboard named {text} under {results}")


def run(args) -> int:
    from agent.store import Store

    results = results_dir(args)
    store = Store(results)
    console = make_console()
    target = None
    if args.target is not None:
        try:
            target = resolve_target(args.target, store, results)
        except KeyError as exc:
            print(f"kgen show: error: {str(exc).strip(chr(39))}", file=sys.stderr)
            return 2
    if args.json:
        return print_json(store, results, target, args)
    if target is None:
        show_latest(console, store, results, args.limit)
        return 0
    if target.kind == "leaderboard":
        show_board(console, results, target.name)
    elif target.kind == "task":
        show_task(console, store, target.name)
    elif args.attempt is not None:
        return show_attempt(console, store, target.name, args.attempt)
    else:
        show_run(console, store, target.name)
    return 0


def record(store, results: str, target: Target | None, *, attempt: int | None = None,
           limit: int = LIST_LIMIT) -> dict | None:
    """The JSON of what `kgen show` shows for a target; None for an attempt the run does not have.

    - no target: {"runs": [Run...], "leaderboards": [name...]}
    - a run: {"run": Run, "attempts": [Attempt...]}; with --attempt N: the Attempt
    - a task: {"task": name, "runs": [Run...]}
    - a leaderboard: the Leaderboard (rows, settings, summary), as leaderboard.json holds it
    """
    from agent.board.files import list_boards, load_board

    if target is None:
        return {"runs": [r.to_dict() for r in store.list_runs(limit=limit)], "leaderboards": list_boards(results)}
    if target.kind == "leaderboard":
        return load_board(results, target.name).to_dict()
    if target.kind == "task":
        return {"task": target.name, "runs": [r.to_dict() for r in store.list_runs(task=target.name)]}
    if attempt is not None:
        found = store.load_attempt(target.name, attempt)
        return found.to_dict() if found is not None else None
    return {"run": store.load_run(target.name).to_dict(),
            "attempts": [a.to_dict() for a in store.load_attempts(target.name)]}


def print_json(store, results: str, target: Target | None, args) -> int:
    import json

    data = record(store, results, target, attempt=args.attempt, limit=args.limit)
    if data is None:
        print(f"kgen show: error: run {target.name} has no attempt {args.attempt}", file=sys.stderr)
        return 2
    print(json.dumps(data, indent=2, default=str))
    return 0


# ---- formatting ---------------------------------------------------------------------------------


def best_text(run) -> str:
    if run.best_attempt is None:
        return "no verified kernel"
    if run.best_speedup is not None:
        sol = f", {run.best_sol_pct:.0f}% SOL" if run.best_sol_pct is not None else ""
        return f"#{run.best_attempt}: {run.best_speedup:.2f}x ({run.best_ms:.4g} ms{sol})"
    return f"#{run.best_attempt}: correct, not timed"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


class _Unpadded:
    """A text stream that drops the spaces rich pads a line with: piped output ends where its text does."""

    encoding = "utf-8"

    def __init__(self, out):
        self.out, self._partial = out, ""

    def write(self, text: str) -> int:
        *lines, self._partial = (self._partial + text).split("\n")
        for line in lines:
            self.out.write(line.rstrip() + "\n")
        return len(text)

    def flush(self) -> None:
        if self._partial:
            self.out.write(self._partial.rstrip())
            self._partial = ""
        self.out.flush()

    def isatty(self) -> bool:
        return False


def make_console():
    """Rich output to stdout: the terminal's width, or a wide page when piped (tables stay whole, no padding)."""
    from rich.console import Console

    console = Console(file=sys.stdout)
    if not console.is_terminal:
        console = Console(file=_Unpadded(sys.stdout), width=PIPE_WIDTH)
    return console


def _status(text: str):
    from rich.text import Text

    return Text(text, style=STATUS_STYLE.get(text, "red" if text not in ("-", "") else ""))


# ---- views ---------------------------------------------------------------------------------------


NARROW = 120   # columns below which a runs table keeps its key columns only (run, task, status, best, attempts)


def runs_table(runs, title: str, width: int | None = None):
    """Runs as a table; on a terminal narrower than NARROW the proposer and device columns give way to the key ones
    (an 80-column terminal used to squeeze task and best to nothing) and the start time is shortened."""
    from rich import box
    from rich.table import Table

    narrow = width is not None and width < NARROW
    # NOTE: a run id is 30-40 characters and is what a user copies: it stays whole, so a narrow table drops
    # the borders and the columns a person can do without (proposer, device, start time)
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD if narrow else box.HEAVY_HEAD,
                  pad_edge=not narrow)
    columns = ("run", "task", "status", "best", "n" if narrow else "attempts")
    columns += () if narrow else ("proposer", "device", "started")
    for col in columns:
        # ids, statuses and numbers stay whole; the rest wraps on a narrow terminal
        table.add_column(col, no_wrap=col in ("run", "status", "attempts", "n", "started"),
                         justify="right" if col in ("attempts", "n") else "left",
                         min_width={"task": 8, "best": 12}.get(col))
    for r in runs:
        proposer = f"{r.proposer} ({r.model})" if r.model else r.proposer
        cells = [r.run_id, r.task, _status(r.status), best_text(r), str(r.attempts)]
        cells += [] if narrow else [proposer, r.gpu or r.device, r.started_at.replace("T", " ")[:19]]
        table.add_row(*cells)
    return table


def show_latest(console, store, results: str, limit: int) -> None:
    from agent.board.files import list_boards

    runs = store.list_runs(limit=limit)
    if runs:
        console.print(runs_table(runs, f"latest runs in {results}", console.width))
        console.print("one run: kgen show RUN_ID (a unique prefix will do)    as a page: kgen report RUN_ID")
    else:
        console.print(f"no runs in {results} yet: kgen optimize TASK starts one")
    boards = list_boards(results)
    if boards:
        console.print(f"leaderboards: {', '.join(boards)}    (kgen show NAME)")


def show_task(console, store, task: str) -> None:
    runs = store.list_runs(task=task)
    console.print(runs_table(runs, f"runs of {task}", console.width))
    console.print(f"one run: kgen show {runs[0].run_id}")


def _present(folder: Path) -> str:
    """What a run's folder holds, by name: its own files, and the kinds of file its attempts have."""
    own = [n for n in ("run.json", "best.py") if (folder / n).exists()]
    kinds = sorted({p.name for p in folder.glob("attempt-*/*") if p.is_file()})
    attempts = len(list(folder.glob("attempt-*")))
    if attempts:
        own.append(f"{attempts} attempt folder{'s' if attempts != 1 else ''} attempt-NNN/ with " + ", ".join(kinds))
    return ", ".join(own) or "nothing yet"


def show_board(console, results: str, name: str) -> None:
    from agent.board.files import board_dir, load_board
    from agent.board.render import rich_board

    board = load_board(results, name)
    console.print(rich_board(board))
    folder = board_dir(results, name)
    console.print("files: " + "  ".join(str(folder / n) + ("/" if n == "logs" else "")
                                        for n in ("leaderboard.json", "leaderboard.md", "logs") if (folder / n).exists()))
    console.print(f"a task's run: kgen show RUN_ID    as a page: kgen report {name}")


def _said(text: str) -> str:
    """Text a candidate (or a model) chose, for a line rich reads as markup: shown as written, never obeyed
    (no terminal control, no markup of its own)."""
    from rich.markup import escape

    return escape(printable(text))


def attempts_table(run, attempts):
    from rich.table import Table

    table = Table(title=f"attempts ({len(attempts)})", title_justify="left")
    for col, justify in (("#", "right"), ("round", "right"), ("status", "left"), ("time", "right"),
                         ("speedup", "right"), ("top stall", "left"), ("reason", "left")):
        table.add_column(col, justify=justify, no_wrap=col not in ("top stall", "reason"))
    for a in attempts:
        mark = "*" if a.number == run.best_attempt else ""
        time_text = f"{a.median_ms:.4g} ms" if a.median_ms is not None else "-"
        table.add_row(f"{a.number}{mark}", str(a.round), _status(a.status), time_text,
                      speedup_text(a.passed, a.speedup), _said(a.top_stall_text or "-"), _said(_cut(a.reason, REASON_CHARS)))
    return table


def show_run(console, store, run_id: str) -> None:
    from rich.syntax import Syntax

    run = store.load_run(run_id)
    attempts = store.load_attempts(run_id)
    folder = store.run_dir(run_id)
    model = f" ({run.model})" if run.model else ""
    console.print(f"[bold]run {run.run_id}[/bold]  task {run.task}  [{STATUS_STYLE.get(run.status, 'red')}]"
                  f"{run.status}[/]", highlight=False)
    console.print(f"why it ended: {_said(run.stop_reason or '-')}", highlight=False)
    console.print(f"proposer {run.proposer}{model}, {run.backend} on {run.gpu or run.device}; "
                  f"{run.attempts} attempt{'' if run.attempts == 1 else 's'} in {run.rounds} round{'' if run.rounds == 1 else 's'}; tokens {run.tokens:,}; "
                  f"cost ${run.cost_usd:.4f}; {run.wall_s:.0f} s", highlight=False)
    console.print(f"best: {best_text(run)}" + ("" if run.device == "cuda" or run.best_attempt is None
                                               else " (no GPU: checked under the Triton interpreter)"),
                  highlight=False)
    if run.best_ncu_check:
        console.print(printable(run.best_ncu_check), highlight=False, markup=False)
    if attempts:
        console.print(attempts_table(run, attempts))
    best = store.best_source(run_id)
    if best is not None:
        console.print(f"[bold]best kernel[/bold] (attempt {run.best_attempt}): {folder / 'best.py'}", highlight=False)
        # NOTE: wrapped, never cropped at the terminal's edge (piped output is wide: lines stay whole there)
        console.print(Syntax(printable(best), "python", line_numbers=True, word_wrap=True))
    elif run.best_attempt is None and attempts:
        from agent.records import closest_attempt

        closest = closest_attempt(attempts)
        console.print(f"closest: attempt {closest.number}, {closest.status}: {_said(closest.reason)}    its kernel: "
                      f"kgen show {run.run_id} --attempt {closest.number}", highlight=False)
    console.print(f"files: {folder}/  ({_present(folder)})", highlight=False)
    console.print(f"one attempt: kgen show {run.run_id} --attempt N    as a page: kgen report {run.run_id}",
                  highlight=False)


def show_attempt(console, store, run_id: str, number: int) -> int:
    from rich.syntax import Syntax

    attempt = store.load_attempt(run_id, number)
    if attempt is None:
        print(f"kgen show: error: run {run_id} has no attempt {number}", file=sys.stderr)
        return 2
    folder = store.attempt_dir(run_id, number)
    console.print(f"[bold]attempt {number}[/bold] of {run_id} (round {attempt.round}): "
                  f"[{STATUS_STYLE.get(attempt.status, 'red')}]{attempt.status}[/] - {_said(attempt.reason)}",
                  highlight=False)
    speedups = attempt.speedups
    if attempt.median_ms is not None:
        console.print(f"time {attempt.median_ms:.4g} ms; speedups "
                      + ", ".join(f"{k} {v:.2f}x" for k, v in speedups.items()), highlight=False)
    if attempt.verify is not None and attempt.verify.ncu_check is not None:
        console.print(printable(attempt.verify.ncu_check.line), highlight=False, markup=False)
    if attempt.note:
        console.print(f"note: {_said(attempt.note)}", highlight=False)
    if attempt.feedback and not attempt.passed:
        console.print(printable(attempt.feedback.rstrip()), highlight=False, markup=False)
    profile_text = store.attempt_text(run_id, number, "profile.txt")
    if profile_text:
        console.print(printable(profile_text.rstrip()), highlight=False, markup=False)
    source = store.attempt_text(run_id, number, "kernel.py")
    if source is not None:
        console.print(Syntax(printable(source), "python", line_numbers=True, word_wrap=True))   # as the best kernel's
    console.print(f"files: {folder}/", highlight=False)
    return 0
