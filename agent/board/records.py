"""A board's records: its rows, its summary (fast_p, geometric means) and the row a stored run makes.

    from agent.board.records import Row, summarize
    summarize([Row("softmax", "tasks/softmax.py", status="succeeded", correct=True, speedup_eager=1.4)])

fast_p and the geometric mean follow agent.fastp: the share of ALL tasks that
are correct and strictly more than p x faster, against eager and against the
faster torch.compile mode. ALL but one kind: a task whose verification ended in
`harness_error` (kgen's own failure: the judge raised, the task did not fit the
GPU's memory) says nothing about any kernel, so it is neither a failed kernel
nor a passed one: it is left out of fast_p's denominator and the geometric
mean, counted apart in the summary (`harness_errors`, with a note naming the
tasks), and run again when the board resumes.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.fastp import FastP, Outcome, fast_table, geomean_speedup, speedup_text
from agent.records import Run
from agent.store import Store
from verifier.records import NOT_CHECKED_HERE

MODES = ("optimize", "verify-only")
BASELINES = {"eager": "eager", "compile": "torch.compile"}   # summary key -> what a person reads

# Row statuses besides a Run's (optimize) and a VerifyResult's (verify-only).
PENDING = "pending"          # not run yet
TASK_ERROR = "task_error"    # the task file cannot be used (the reason says why)
MISSING = "missing"          # verify-only: no kernel file for the task
ERROR = "error"              # kgen itself failed on this task (the reason and the task's log say how)
INTERRUPTED = "interrupted"  # stopped by Ctrl-C; continued when the board runs again
HARNESS_ERROR = "harness_error"  # every verification of the task ended in kgen's own failure: no kernel was judged

# A row with one of these is not run again when the board resumes.
FINISHED_RUN = ("succeeded", "stopped", "failed")
FINISHED_VERIFY = ("ok", "compile_error", "runtime_error", "mismatch", "rejected", "timeout", "crashed", "not_run",
                   "not_checkable")



class LeaderboardError(Exception):
    """A board that cannot run as asked (a name reused with other settings, a bad --gpus); one line."""


@dataclass(frozen=True)
class BoardConfig:
    """How `kgen leaderboard` runs a suite, besides the OptimizeConfig every task gets."""

    suite: str                          # SUITE: a folder of task files, or a text file listing them
    name: str | None = None             # --name: the board's name; None: SUITE-DATE (a new board)
    workers: int | None = None          # --workers: tasks at once; None: 1 on a CPU, one per GPU on CUDA
    gpus: tuple[int, ...] | None = None     # --gpus: the GPUs to use; None: every GPU torch sees
    verify_only: str | None = None      # --verify-only: a folder of kernels to score, no proposer
    executor: str = "local"             # --executor: where the tasks run (agent.board.EXECUTORS names them)

    @property
    def mode(self) -> str:
        return "verify-only" if self.verify_only is not None else "optimize"

    def board_name(self, now: float | None = None) -> str:
        return self.name or default_name(self.suite, now)


def default_name(suite: str | Path, now: float | None = None) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(time.time() if now is None else now))
    return f"{Path(suite).stem}-{stamp}"


@dataclass
class Row:
    """One task of a board."""

    task: str                           # the task's name (file stem)
    task_path: str
    status: str = PENDING               # a Run status (optimize), a VerifyResult status (verify-only), or above
    correct: bool = False               # a verified kernel exists
    reason: str = ""                    # one line
    run_id: str = ""                    # the run in the store, "" when none was made
    kernel_path: str = ""               # the best kernel (optimize) or the file scored (verify-only)
    speedup_eager: float | None = None  # eager median / kernel median, when timed
    speedup_compile: float | None = None    # against the faster torch.compile mode, when timed
    sol_pct: float | None = None        # speed-of-light time / kernel median, in percent
    median_ms: float | None = None      # the kernel's median time
    attempts: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    wall_s: float = 0.0                 # seconds spent on the task
    worker: str = ""                    # "GPU 1", "cpu 0", on Ray "node GPU 0, node GPU 1": where it ran

    @property
    def timed(self) -> bool:
        return self.median_ms is not None

    def speedup(self, baseline: str) -> float | None:
        return self.speedup_eager if baseline == "eager" else self.speedup_compile

    def outcome(self, baseline: str) -> Outcome:
        return Outcome(self.correct, self.speedup(baseline))

    def speedup_text(self, baseline: str) -> str:
        if self.status == HARNESS_ERROR:
            return "-"
        return speedup_text(self.correct, self.speedup(baseline))

    @property
    def counted(self) -> bool:
        """In fast_p's denominator: every task but one whose verification was kgen's own failure."""
        return self.status != HARNESS_ERROR

    def status_text(self) -> str:
        """The status as a person reads it: "harness error" says the kernel was not at fault."""
        return "harness error (not the kernel's)" if self.status == HARNESS_ERROR else self.status

    def sol_text(self) -> str:
        return f"{self.sol_pct:.0f}%" if self.sol_pct is not None else "-"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Row":
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class Summary:
    """The board's headline figures; fast[baseline] lists fast_p for each p of THRESHOLDS."""

    tasks: int
    done: int                   # rows with a result (not pending)
    correct: int
    timed: int                  # correct and timed
    harness_errors: int         # tasks left out of fast_p and the geomean: their verification was kgen's failure
    fast: dict[str, list[FastP]]
    geomean: dict[str, float | None]    # over the correct, timed tasks
    tokens: int
    cost_usd: float
    wall_s: float
    notes: list[str] = field(default_factory=list)


@dataclass
class Leaderboard:
    """A suite, how it is run, and one row per task (in suite order)."""

    name: str
    suite: str                      # the suite as given, resolved
    mode: str                       # one of MODES
    config: dict[str, Any]          # OptimizeConfig.to_dict(), secrets scrubbed
    device: str = ""                # "cuda" or "cpu"
    gpu: str = ""                   # the GPU's name, "" on a CPU
    kernels_dir: str = ""           # verify-only: the folder of kernels scored
    rows: list[Row] = field(default_factory=list)
    created_at: str = ""
    updated_at: str = ""

    def row(self, task: str) -> Row | None:
        return next((r for r in self.rows if r.task == task), None)

    def summary(self) -> Summary:
        return summarize(self.rows, device=self.device)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["summary"] = dataclasses.asdict(self.summary())
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Leaderboard":
        known = {f.name for f in dataclasses.fields(cls)}
        board = cls(**{k: v for k, v in data.items() if k in known and k != "rows"})
        board.rows = [Row.from_dict(r) for r in data.get("rows") or []]
        return board


def summarize(rows: list[Row], device: str = "") -> Summary:
    """fast_p against eager and torch.compile, the geometric means, the totals, and what they rest on."""
    timeable = device not in ("cpu",)   # "" (unknown) keeps what the rows say
    counted = [r for r in rows if r.counted]
    fast = {b: fast_table([r.outcome(b) for r in counted], timeable=timeable) for b in BASELINES}
    means = {b: geomean_speedup([r.outcome(b) for r in counted]) for b in BASELINES}
    correct = sum(r.correct for r in counted)
    timed = sum(r.correct and r.timed for r in counted)
    notes = []
    harness = [r.task for r in rows if not r.counted]
    if harness:
        notes.append(f"{len(harness)} task(s) ended in a harness error, kgen's own failure and not the kernel's "
                     f"({', '.join(harness)}; see each row's reason): left out of fast_p's denominator and the "
                     f"geomean, and run again when the board resumes")
    if correct and not timed:
        where = "no GPU" if device != "cuda" else "no timing"
        notes.append(f"nothing was timed ({where}): fast_p for p > 0 is n/a, not 0; fast_0 is the share of "
                     "tasks with a verified kernel" + (" (checked under the Triton interpreter on the small "
                                                       "inputs)" if device == "cpu" else ""))
    else:
        for b, label in BASELINES.items():
            untimed = [f.note for f in fast[b] if f.value is None and f.note]
            if untimed and correct:
                notes.append(f"against {label}: {untimed[0]}, so fast_p for p > 0 is n/a")
    pending = sum(r.status == PENDING for r in rows)
    if pending:
        notes.append(f"{pending} task(s) not run yet: they count as not correct until the board is resumed")
    unchecked = [r.task for r in rows if r.status in NOT_CHECKED_HERE]
    if unchecked:
        notes.append(f"not checked on this machine: {', '.join(unchecked)} (CUDA kernels, no GPU here; no verdict "
                     "on them): they count as not correct; run the board on a GPU machine")
    # an interrupted task keeps the best kernel verified before the stop: it counts, and says it was cut short
    cut_short = [r.task for r in rows if r.status == INTERRUPTED and r.correct]
    if cut_short:
        notes.append(f"interrupted before its rounds were done: {', '.join(cut_short)}; its best kernel so far is "
                     f"counted, and resuming the board continues its run")
    broken = [r.task for r in rows if r.status in (TASK_ERROR, ERROR, MISSING, INTERRUPTED) and not r.correct]
    if broken:
        notes.append(f"no result for {', '.join(broken)} (see each row's reason); they count as not correct")
    return Summary(tasks=len(rows), done=len(rows) - pending, correct=correct, timed=timed,
                   harness_errors=len(harness), fast=fast,
                   geomean=means, tokens=sum(r.tokens for r in rows), cost_usd=sum(r.cost_usd for r in rows),
                   wall_s=sum(r.wall_s for r in rows), notes=notes)


def compile_speedup(speedups: dict[str, float]) -> float | None:
    """Against the faster torch.compile mode: the smallest of the compile speedups."""
    values = [v for k, v in speedups.items() if k.startswith("compile")]
    return min(values) if values else None


def row_from_run(store: Store, run: Run, mode: str = "optimize") -> Row:
    """A row for a stored run: its best kernel's figures, or why it has none."""
    row = Row(task=run.task, task_path=run.task_path, status=run.status, reason=run.stop_reason,
              run_id=run.run_id, attempts=run.attempts, tokens=run.tokens, cost_usd=run.cost_usd,
              wall_s=run.wall_s, correct=run.best_attempt is not None)
    best = store.load_attempt(run.run_id, run.best_attempt) if run.best_attempt is not None else None
    if best is None and run.attempts:
        # no kernel passed: when no kernel was judged either (every verification was kgen's failure), say so
        judged = [a for a in store.load_attempts(run.run_id) if a.status != "no_code"]
        if judged and all(a.status == HARNESS_ERROR for a in judged):
            row.status, row.reason = HARNESS_ERROR, judged[0].reason
            return row
    if mode == "verify-only":
        first = best or store.load_attempt(run.run_id, 1)
        if first is not None:
            row.status, row.reason = first.status, first.reason
        row.kernel_path = str((run.config or {}).get("kernel_path", ""))
    elif best is not None:
        row.kernel_path = str(store.run_dir(run) / "best.py")
    if best is not None:
        speedups = best.speedups
        row.speedup_eager = speedups.get("eager")
        row.speedup_compile = compile_speedup(speedups)
        row.median_ms = best.median_ms
        row.sol_pct = best.sol_pct
    return row
