"""What `kgen optimize` shows while it runs: a live table on a terminal, progress lines otherwise.

The loop (agent/graph.py) reports what happens as `LoopEvent`s; a view turns
them into output on stderr, so stdout stays free for the final summary.

- `RichView`: a live-updating table (round, attempt, status, time, speedup,
  reason) with a footer of best speedup, tokens, cost and elapsed time; used
  when stderr is a terminal.
- `PlainView`: one line per event, for logs and CI.

    view = make_view(sys.stderr)
    with view:
        optimize(..., on_event=view.handle)
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import TextIO

from agent.records import Attempt, Run
from verifier.records import printable

EVENT_KINDS = (
    "start",      # the run began or resumed: run
    "analysis",   # the task was analysed: message
    "round",      # a round is asking the proposer: round
    "proposed",   # proposals arrived: round, message (how many, tokens)
    "attempt",    # one attempt verified and stored: attempt
    "best",       # a new best kernel: attempt
    "profile",    # the best kernel was profiled: attempt, message (the diagnosis' first line)
    "crosscheck", # the run's best kernel's claimed time against ncu's device time: attempt, message (the check's line)
    "warning",    # something went wrong that the loop survives: message
    "stop",       # the loop ended: run, message (why)
)


@dataclass
class LoopEvent:
    """One thing that happened in the loop, for a view to show."""

    kind: str                        # one of EVENT_KINDS
    run: Run
    round: int = 0
    attempt: Attempt | None = None
    message: str = ""


def _fmt_speedup(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "-"


def _fmt_ms(value: float | None) -> str:
    return f"{value:.4g} ms" if value is not None else "-"


def _best_text(run: Run) -> str:
    if run.best_attempt is None:
        return "best: none yet"
    if run.best_speedup is not None:
        return f"best: #{run.best_attempt} {_fmt_speedup(run.best_speedup)} ({_fmt_ms(run.best_ms)})"
    return f"best: #{run.best_attempt} (correct, not timed)"


def _cost_text(run: Run) -> str:
    return f"tokens {run.tokens:,}  cost ${run.cost_usd:.4f}"


class PlainView:
    """One line per event, for a stream that is not a terminal."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stderr

    def __enter__(self) -> "PlainView":
        return self

    def __exit__(self, *exc) -> None:
        self.stream.flush()

    def _line(self, text: str) -> None:
        # NOTE: a reason, a proposal's summary and a profile line carry text a candidate or a model chose
        print(f"kgen: {printable(text)}", file=self.stream, flush=True)

    def handle(self, event: LoopEvent) -> None:
        run = event.run
        if event.kind == "start":
            model = f" ({run.model})" if run.model else ""
            self._line(f"run {run.run_id}: task {run.task}, proposer {run.proposer}{model}, "
                       f"{run.backend}, device {run.gpu or run.device}")
        elif event.kind == "analysis":
            self._line(f"analysis: {event.message}")
        elif event.kind == "round":
            self._line(f"round {event.round}: asking the {run.proposer} proposer")
        elif event.kind == "proposed":
            self._line(f"round {event.round}: {event.message}")
        elif event.kind == "attempt" and event.attempt is not None:
            a = event.attempt
            timed = f" {_fmt_ms(a.median_ms)} {_fmt_speedup(a.speedup)}" if a.median_ms is not None else ""
            self._line(f"attempt {a.number} (round {a.round}): {a.status}{timed} - {a.reason} | "
                       f"{_best_text(run)} | {_cost_text(run)}")
        elif event.kind == "best" and event.attempt is not None:
            self._line(f"new {_best_text(run)}")
        elif event.kind == "profile":
            self._line(f"profile of #{event.attempt.number if event.attempt else '?'}: {event.message}")
        elif event.kind == "crosscheck":
            self._line(f"#{event.attempt.number if event.attempt else '?'}: {event.message}")
        elif event.kind == "warning":
            self._line(f"warning: {event.message}")
        elif event.kind == "stop":
            self._line(f"{run.status}: {event.message} | {_best_text(run)} | {_cost_text(run)} | {run.wall_s:.0f} s")


class RichView:
    """A live table on a terminal: one row per attempt, a footer with the best and the spend."""

    STATUS_STYLE = {"ok": "green", "mismatch": "yellow", "no_code": "magenta", "rejected": "red",
                    "compile_error": "red", "runtime_error": "red", "timeout": "red", "crashed": "red"}
    MAX_ROWS = 15   # older attempts scroll off; the store keeps them all

    def __init__(self, stream: TextIO | None = None):
        from rich.console import Console
        from rich.live import Live

        self.console = Console(file=stream or sys.stderr)
        self.attempts: list[Attempt] = []
        self.run: Run | None = None
        self.activity = "starting"
        self.analysis = ""
        self.notes: list[str] = []
        self.started = time.monotonic()
        self.live = Live(console=self.console, refresh_per_second=4, transient=False,
                         get_renderable=self._render)

    def __enter__(self) -> "RichView":
        self.live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.live.__exit__(*exc)

    def handle(self, event: LoopEvent) -> None:
        self.run = event.run
        if event.kind == "start":
            self.activity = "analysing the task"
        elif event.kind == "analysis":
            self.analysis = event.message
        elif event.kind == "round":
            self.activity = f"round {event.round}: asking the {event.run.proposer} proposer"
        elif event.kind == "proposed":
            self.activity = f"round {event.round}: verifying ({event.message})"
        elif event.kind == "attempt" and event.attempt is not None:
            self.attempts.append(event.attempt)
        elif event.kind == "profile":
            self.activity = f"profiled #{event.attempt.number if event.attempt else '?'}: {event.message}"
        elif event.kind == "crosscheck":
            self.notes.append(f"#{event.attempt.number if event.attempt else '?'}: {event.message}")
        elif event.kind == "warning":
            self.notes.append(event.message)
        elif event.kind == "stop":
            self.activity = f"{event.run.status}: {event.message}"
        self.live.refresh()

    def _render(self):
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        run = self.run
        parts = []
        if run is not None:
            model = f" ({run.model})" if run.model else ""
            parts.append(Text(f"kgen optimize {run.task}  run {run.run_id}  proposer {run.proposer}{model}  "
                              f"{run.backend} on {run.gpu or run.device}", style="bold"))
        if self.analysis:
            parts.append(Text(self.analysis, style="dim"))
        table = Table(expand=False, pad_edge=False)
        for col, justify in (("#", "right"), ("round", "right"), ("status", "left"), ("time", "right"),
                             ("speedup", "right"), ("reason", "left")):
            table.add_column(col, justify=justify, no_wrap=col != "reason")
        for a in self.attempts[-self.MAX_ROWS:]:
            best = run is not None and run.best_attempt == a.number
            table.add_row(f"{a.number}{'*' if best else ''}", str(a.round),
                          Text(a.status, style=self.STATUS_STYLE.get(a.status, "")),
                          _fmt_ms(a.median_ms), _fmt_speedup(a.speedup), a.reason[:100])
        parts.append(table)
        for note in self.notes[-3:]:
            parts.append(Text(f"warning: {note}", style="yellow"))
        if run is not None:
            elapsed = time.monotonic() - self.started
            parts.append(Text(f"{_best_text(run)}   {_cost_text(run)}   {elapsed:.0f} s"))
        parts.append(Text(self.activity, style="bold" if run is not None and run.status != "running" else ""))
        return Group(*parts)


def make_view(stream: TextIO | None = None) -> PlainView | RichView:
    """A live table when the stream is a terminal, progress lines otherwise."""
    stream = stream or sys.stderr
    if stream.isatty():
        return RichView(stream)
    return PlainView(stream)
