"""A board for people: the markdown file (leaderboard.md) and the terminal tables (`kgen show NAME`).

    from agent.board.render import to_markdown, rich_board
    print(to_markdown(board))
    rich.get_console().print(rich_board(board))
"""

from __future__ import annotations

from agent.board.records import BASELINES, HARNESS_ERROR, PENDING, Leaderboard, Row, Summary
from agent.config import STORED_BEFORE
from agent.fastp import THRESHOLDS
from verifier.protocols import timing_line
from verifier.records import printable

ROW_COLUMNS = ("task", "status", "vs eager", "vs torch.compile", "% SOL", "attempts", "tokens", "cost",
               "wall", "where", "reason")


def row_cells(row: Row) -> list[str]:
    return [row.task, row.status_text(), row.speedup_text("eager"), row.speedup_text("compile"), row.sol_text(),
            str(row.attempts), f"{row.tokens:,}", f"${row.cost_usd:.4f}", f"{row.wall_s:.0f} s", row.worker or "-",
            row.reason]


def summary_cells(summary: Summary) -> list[tuple[str, list[str]]]:
    """(baseline label, [fast_p texts..., geomean]) per baseline."""
    out = []
    for b, label in BASELINES.items():
        mean = summary.geomean[b]
        out.append((label, [f.text() for f in summary.fast[b]] + [f"{mean:.2f}x" if mean is not None else "n/a"]))
    return out


def summary_headers() -> list[str]:
    return [f"fast_{p:g}" for p in THRESHOLDS] + ["geomean speedup"]


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(board: Leaderboard) -> str:
    s = board.summary()
    where = board.gpu or ("CPU (Triton interpreter, nothing timed)" if board.device == "cpu" else board.device)
    lines = [f"# Leaderboard {board.name}", "",
             f"- suite: `{board.suite}` ({s.tasks} tasks, {s.done} done)",
             f"- mode: {board.mode}" + (f" (kernels from `{board.kernels_dir}`)" if board.kernels_dir else ""),
             f"- device: {where}",
             "- settings: " + _settings_line(board), f"- updated: {board.updated_at}",
             f"- timing: {timing_line(board.config.get('timing') or STORED_BEFORE['timing'])}", "",
             "## Summary", "",
             "fast_p: share of all tasks whose kernel is correct and strictly more than p times faster "
             "(fast_0: correct); a task that ended in a harness error (kgen's failure) is not counted.", "",
             "| against | " + " | ".join(summary_headers()) + " |",
             "|---|" + "---:|" * len(summary_headers())]
    for label, cells in summary_cells(s):
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", f"{_counts(s)}; tokens {s.tokens:,}; cost ${s.cost_usd:.4f}; {s.wall_s:.0f} s of task time", ""]
    lines += [f"> {note}" for note in s.notes]
    if s.notes:
        lines.append("")
    lines += ["## Tasks", "", "| " + " | ".join(ROW_COLUMNS) + " | run |",
              "|" + "---|" * (len(ROW_COLUMNS) + 1)]
    for row in board.rows:
        lines.append("| " + " | ".join(_md_cell(c) for c in row_cells(row)) + f" | {row.run_id or '-'} |")
    return "\n".join(lines) + "\n"


def _counts(s: Summary) -> str:
    """"3 of 4 correct, 3 timed" and, apart, the tasks fast_p leaves out for a harness error."""
    counted = s.tasks - s.harness_errors
    text = f"{s.correct} of {counted} correct, {s.timed} timed"
    if s.harness_errors:
        text += f"; {s.harness_errors} harness error(s), not counted (kgen's failure, not the kernel's)"
    return text


def _settings_line(board: Leaderboard) -> str:
    c = board.config
    timing = f"timing {c.get('timing') or STORED_BEFORE['timing']}"
    if board.mode == "verify-only":
        return f"verify timeout {c.get('verify_timeout_s', '?')} s, {timing}"
    parts = [f"backend {c.get('backend')}", f"proposer {c.get('proposer')}"]
    if c.get("model"):
        parts.append(f"model {c['model']}")
    parts += [f"max-iters {c.get('max_iters')}", f"candidates {c.get('candidates')}", f"target {c.get('target')}x",
              timing]
    return ", ".join(parts)


def rich_board(board: Leaderboard):
    """The board as rich renderables (header, summary, tasks, notes) for a terminal."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    s = board.summary()
    where = board.gpu or ("CPU: nothing timed" if board.device == "cpu" else board.device)
    head = Text(f"leaderboard {board.name}  {board.mode}  {s.done}/{s.tasks} tasks  on {where}", style="bold")
    head.append(f"\ntiming: {timing_line(board.config.get('timing') or STORED_BEFORE['timing'])}", style="dim")
    summary = Table(title="summary", title_justify="left")
    summary.add_column("against")
    for h in summary_headers():
        summary.add_column(h, justify="right")
    for label, cells in summary_cells(s):
        summary.add_row(label, *cells)
    tasks = Table(title="tasks", title_justify="left")
    for col in ROW_COLUMNS:
        # the reason is cut to one line here; leaderboard.md and `kgen show RUN` have it whole
        tasks.add_column(col, justify="left" if col in ("task", "status", "where", "reason") else "right", no_wrap=True,
                         overflow="ellipsis", max_width=60 if col == "reason" else None)
    style = {"succeeded": "green", "ok": "green", "stopped": "yellow", PENDING: "dim", HARNESS_ERROR: "yellow"}
    for row in board.rows:
        # NOTE: as Text, not markup: a row's reason is text a candidate chose (printable: no terminal control)
        cells = [Text(printable(c)) for c in row_cells(row)]
        cells[1] = Text(row.status_text(), style=style.get(row.status, "" if row.correct else "red"))
        tasks.add_row(*cells)
    footer = Text(f"{_counts(s)}; tokens {s.tokens:,}; cost ${s.cost_usd:.4f}; {s.wall_s:.0f} s of task time")
    notes = [Text(printable(f"note: {n}"), style="yellow") for n in s.notes]
    return Group(head, summary, tasks, footer, *notes)
