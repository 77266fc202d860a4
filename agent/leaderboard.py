"""Leaderboards: every task of a suite optimized (or a folder of kernels scored), in one table.

    kgen leaderboard tasks/suite-small.txt --max-iters 4            # all GPUs, one worker each
    kgen leaderboard tasks/ --gpus 0,1 --name nightly                # two GPUs; rerun the same line to resume
    kgen leaderboard tasks/ --verify-only kernels/ --name mine       # score existing kernels, no proposer
    python -m agent.leaderboard JOB.json                             # one task (what each worker runs)

Each task runs in its own process (`python -m agent.leaderboard JOB.json`):
one worker per GPU, with `CUDA_VISIBLE_DEVICES` set to that GPU, so the
verifier's and the profiler's own subprocesses (which inherit the
environment) time and profile on that GPU only, and two timings never share a
GPU. Pinning inside one process cannot give that: the environment is
process-wide and the sandboxed children read it. A process per task also keeps
one task's crash, hang or malformed file a row of the table, not the end of
the board. On a CPU `--workers N` runs N tasks at once (nothing is timed there).

A board lives in `<results>/leaderboards/<name>/`: `leaderboard.json` (the
rows, the settings, the summary), `leaderboard.md`, `logs/<task>.log` (each
task's progress and errors), `jobs/` (what each worker was asked, and the
run id it started) and `.lock` (held while the board or any of its tasks
runs, so two sessions never run one board at once). Runs themselves are
ordinary runs of the store, so `kgen show RUN` and `kgen report RUN` work on
every row; a --verify-only board stores each kernel it scores as a run of one
attempt (proposer "none"). Running a board again
under its name skips the tasks already finished, continues interrupted runs
(`kgen optimize --resume`), and retries the rest.

fast_p and the geometric mean follow agent.fastp: the share of ALL tasks that
are correct and strictly more than p x faster, against eager and against the
faster torch.compile mode.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from agent.config import STORED_BEFORE
from agent.fastp import THRESHOLDS, FastP, Outcome, fast_table, geomean_speedup
from agent.records import Attempt, Run
from agent.store import Store, new_run_id, scrub_config, utc_now
from verifier.protocols import timing_line
from verifier.sandbox import describe_exit

LEADERBOARDS_DIR = "leaderboards"
BOARD_JSON = "leaderboard.json"
BOARD_MD = "leaderboard.md"
MODES = ("optimize", "verify-only")
BASELINES = {"eager": "eager", "compile": "torch.compile"}   # summary key -> what a person reads

# Row statuses besides a Run's (optimize) and a VerifyResult's (verify-only).
PENDING = "pending"          # not run yet
TASK_ERROR = "task_error"    # the task file cannot be used (the reason says why)
MISSING = "missing"          # verify-only: no kernel file for the task
ERROR = "error"              # kgen itself failed on this task (the reason and the task's log say how)
INTERRUPTED = "interrupted"  # stopped by Ctrl-C; continued when the board runs again

# A row with one of these is not run again when the board resumes.
FINISHED_RUN = ("succeeded", "stopped", "failed")
FINISHED_VERIFY = ("ok", "compile_error", "runtime_error", "mismatch", "rejected", "timeout", "crashed", "not_run")

VERIFY_SETTINGS = ("backend", "device", "verify_timeout_s", "timing")   # the settings a verify-only board depends on
STOP_GRACE_S = 60.0   # after Ctrl-C, how long a task may take to store itself as interrupted


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

    @property
    def mode(self) -> str:
        return "verify-only" if self.verify_only is not None else "optimize"

    def board_name(self, now: float | None = None) -> str:
        return self.name or default_name(self.suite, now)


# ---- records -----------------------------------------------------------------------------------


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
    worker: str = ""                    # "GPU 1" or "cpu 0": where it ran

    @property
    def timed(self) -> bool:
        return self.median_ms is not None

    def speedup(self, baseline: str) -> float | None:
        return self.speedup_eager if baseline == "eager" else self.speedup_compile

    def outcome(self, baseline: str) -> Outcome:
        return Outcome(self.correct, self.speedup(baseline))

    def speedup_text(self, baseline: str) -> str:
        """"2.31x", "not timed" (correct, no GPU), or "-" (no correct kernel)."""
        if not self.correct:
            return "-"
        value = self.speedup(baseline)
        if value is None:
            return "not timed"
        return f"{value:.2f}x"

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
    fast = {b: fast_table([r.outcome(b) for r in rows]) for b in BASELINES}
    means = {b: geomean_speedup([r.outcome(b) for r in rows]) for b in BASELINES}
    correct = sum(r.correct for r in rows)
    timed = sum(r.correct and r.timed for r in rows)
    notes = []
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
    broken = [r.task for r in rows if r.status in (TASK_ERROR, ERROR, MISSING, INTERRUPTED)]
    if broken:
        notes.append(f"no result for {', '.join(broken)} (see each row's reason); they count as not correct")
    return Summary(tasks=len(rows), done=len(rows) - pending, correct=correct, timed=timed, fast=fast,
                   geomean=means, tokens=sum(r.tokens for r in rows), cost_usd=sum(r.cost_usd for r in rows),
                   wall_s=sum(r.wall_s for r in rows), notes=notes)


# ---- where boards live ----------------------------------------------------------------------------


def boards_root(results_dir: str | Path) -> Path:
    return Path(results_dir) / LEADERBOARDS_DIR


def board_dir(results_dir: str | Path, name: str) -> Path:
    return boards_root(results_dir) / name


def list_boards(results_dir: str | Path) -> list[str]:
    """Names of the stored boards, newest first."""
    root = boards_root(results_dir)
    found = [p.parent for p in root.glob(f"*/{BOARD_JSON}")]
    return [p.name for p in sorted(found, key=lambda p: (p / BOARD_JSON).stat().st_mtime, reverse=True)]


def load_board(results_dir: str | Path, name: str) -> Leaderboard | None:
    path = board_dir(results_dir, name) / BOARD_JSON
    if not path.exists():
        return None
    return Leaderboard.from_dict(json.loads(path.read_text(encoding="utf-8")))


def save_board(results_dir: str | Path, board: Leaderboard) -> Path:
    """Write leaderboard.json and leaderboard.md (atomically each); returns the board's folder."""
    folder = board_dir(results_dir, board.name)
    folder.mkdir(parents=True, exist_ok=True)
    board.updated_at = utc_now()
    _write_atomic(folder / BOARD_JSON, json.dumps(board.to_dict(), indent=2, default=str) + "\n")
    _write_atomic(folder / BOARD_MD, to_markdown(board))
    return folder


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def default_name(suite: str | Path, now: float | None = None) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(time.time() if now is None else now))
    return f"{Path(suite).stem}-{stamp}"


# ---- tables for people ----------------------------------------------------------------------------

ROW_COLUMNS = ("task", "status", "vs eager", "vs torch.compile", "% SOL", "attempts", "tokens", "cost",
               "wall", "reason")


def row_cells(row: Row) -> list[str]:
    return [row.task, row.status, row.speedup_text("eager"), row.speedup_text("compile"), row.sol_text(),
            str(row.attempts), f"{row.tokens:,}", f"${row.cost_usd:.4f}", f"{row.wall_s:.0f} s", row.reason]


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
             "(fast_0: correct).", "",
             "| against | " + " | ".join(summary_headers()) + " |",
             "|---|" + "---:|" * len(summary_headers())]
    for label, cells in summary_cells(s):
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", f"{s.correct} of {s.tasks} correct, {s.timed} timed; tokens {s.tokens:,}; "
                  f"cost ${s.cost_usd:.4f}; {s.wall_s:.0f} s of task time", ""]
    lines += [f"> {note}" for note in s.notes]
    if s.notes:
        lines.append("")
    lines += ["## Tasks", "", "| " + " | ".join(ROW_COLUMNS) + " | run |",
              "|" + "---|" * (len(ROW_COLUMNS) + 1)]
    for row in board.rows:
        lines.append("| " + " | ".join(_md_cell(c) for c in row_cells(row)) + f" | {row.run_id or '-'} |")
    return "\n".join(lines) + "\n"


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
        tasks.add_column(col, justify="left" if col in ("task", "status", "reason") else "right", no_wrap=True,
                         overflow="ellipsis", max_width=60 if col == "reason" else None)
    style = {"succeeded": "green", "ok": "green", "stopped": "yellow", PENDING: "dim"}
    for row in board.rows:
        cells = row_cells(row)
        cells[1] = Text(row.status, style=style.get(row.status, "" if row.correct else "red"))
        tasks.add_row(*cells)
    footer = Text(f"{s.correct} of {s.tasks} correct, {s.timed} timed; tokens {s.tokens:,}; "
                  f"cost ${s.cost_usd:.4f}; {s.wall_s:.0f} s of task time")
    notes = [Text(f"note: {n}", style="yellow") for n in s.notes]
    return Group(head, summary, tasks, footer, *notes)


# ---- rows from the store ----------------------------------------------------------------------------


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


# ---- scoring one kernel file (verify-only) -------------------------------------------------------


def score_kernel(task_path: str | Path, kernel_path: str | Path, config, store: Store) -> Run:
    """Verify one existing kernel and store it as a run of one attempt (proposer "none").

    Raises TaskError for an unusable task; a bad kernel is a stored verdict.
    """
    from verifier.verify import prestart_worker, verify

    # NOTE: the worker starts first: its start-up overlaps the task's loading and the device's look-up here
    with prestart_worker() as worker:
        from agent.graph import resolve_device
        from verifier.records import VerifyConfig
        from verifier.task import load_task

        task = load_task(task_path)
        device, gpu = resolve_device(config.device)
        data = Path(kernel_path).read_bytes()
        # a file that is not UTF-8 is a bad candidate, not kgen's error: it gets a verdict
        source = data.decode("utf-8", errors="replace")
        run = Run(run_id=new_run_id(task.name), task=task.name, task_path=str(task.path.resolve()),
                  config={**config.to_dict(), "kernel_path": str(Path(kernel_path).resolve())}, proposer="none",
                  backend=config.backend, device=device, gpu=gpu, started_at=utc_now())
        store.create_run(run)
        started = time.monotonic()
        verify_config = VerifyConfig(device=device, timeout_s=config.verify_timeout_s,
                                     cache_dir=store.root / "baselines", timing=config.timing)
        begun = utc_now()
        result = verify(task, source, verify_config, worker=worker)
    sol_ms = _speed_of_light_ms(task, device, gpu) if result.passed and result.timing else None
    attempt = Attempt.from_result(run.run_id, 1, 1, result, sol_ms=sol_ms, note=f"scored from {kernel_path}",
                                  started_at=begun, finished_at=utc_now())
    store.save_attempt(run, attempt, source=source)
    run.attempts, run.rounds = 1, 1
    if result.passed:
        run.best_attempt, run.best_speedup, run.best_ms, run.best_sol_pct = \
            1, attempt.speedup, attempt.median_ms, attempt.sol_pct
        store.save_best(run, source)
    run.status = "succeeded" if result.passed else "failed"
    run.stop_reason = f"{result.status}: {result.reason}"
    run.finished_at = utc_now()
    run.wall_s = time.monotonic() - started
    store.save_run(run)
    return run


def _speed_of_light_ms(task, device: str, gpu: str) -> float | None:
    """The task's speed-of-light time on this GPU, as the optimize loop's analysis computes it: a scored
    kernel's % of SOL. None, with a line on stderr, where it cannot be had (the verdict stands)."""
    from agent.graph import analyze_task

    try:
        analysis = analyze_task(task, device, gpu)
    except Exception as exc:   # noqa: BLE001 - the row keeps its verdict and leaves % of SOL out
        print(f"kgen: {task.name}: no speed-of-light time: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None
    return analysis.get("sol_ms")


def match_kernels(task_paths: list[Path], kernels_dir: Path) -> dict[str, Path | str]:
    """Each task's kernel file in a folder: task name -> the file, or the reason there is none.

    A kernel matches a task when its stem is the task's stem (a KernelBench
    solution saved under its task's name), else when it is the only file whose
    stem starts with the task's stem and a separator ("softmax_triton.py",
    "19_ReLU_cuda.py"). A file that is exactly another task's name never
    matches by prefix (sum_dim.py is not a kernel for the task sum).
    """
    files = sorted(p for p in kernels_dir.glob("*.py") if not p.name.startswith("_"))
    by_stem = {p.stem: p for p in files}
    names = {p.stem for p in task_paths}
    found: dict[str, Path | str] = {}
    for path in task_paths:
        name = path.stem
        if name in by_stem:
            found[name] = by_stem[name]
            continue
        prefixed = [p for p in files if p.stem not in names and len(p.stem) > len(name)
                    and p.stem.startswith(name) and p.stem[len(name)] in "_-."]
        if len(prefixed) == 1:
            found[name] = prefixed[0]
        elif prefixed:
            found[name] = f"several kernels match: {', '.join(p.name for p in prefixed)}; keep one or name it {name}.py"
        else:
            found[name] = f"no kernel named {name}.py (or {name}_*.py) in {kernels_dir}"
    return found


# ---- one task in its own process ------------------------------------------------------------------


@dataclass
class Job:
    """What one worker process is asked to do; written as JSON, read by `python -m agent.leaderboard`."""

    kind: str                   # "optimize" or "verify"
    task: str
    task_path: str
    config: dict[str, Any]      # OptimizeConfig.to_dict()
    result_path: str            # where the process writes {"run_id"} or {"error", "message"}
    started_path: str           # where it writes {"run_id"} as soon as the run exists
    resume: str | None = None   # a run id to continue
    kernel_path: str | None = None
    kernel_paths: list[str] | None = None   # KernelBench samples of the task, each scored (agent.kernelbench.samples)


def run_job(job: Job) -> dict[str, Any]:
    """Do one job in this process; the outcome as JSON. Only a kgen bug raises."""
    from agent.config import OptimizeConfig
    from agent.graph import optimize
    from agent.live import PlainView
    from agent.proposers.base import ProposerError
    from verifier.task import TaskError

    config = OptimizeConfig.from_dict(job.config)
    store = Store(config.results_dir)
    try:
        if job.kind == "verify":
            if job.kernel_paths:
                from agent.kernelbench.samples import score_samples
                run = score_samples(job.task_path, job.kernel_paths, config, store)
            else:
                run = score_kernel(job.task_path, job.kernel_path, config, store)
            print(f"run {run.run_id}: {run.stop_reason}", file=sys.stderr)
        else:
            view = PlainView(sys.stderr)

            def on_event(event) -> None:
                if event.kind == "start":
                    Path(job.started_path).write_text(json.dumps({"run_id": event.run.run_id}))
                view.handle(event)

            run = optimize(None if job.resume else job.task_path, config, resume=job.resume, on_event=on_event,
                           store=store)
    except TaskError as exc:
        return {"error": TASK_ERROR, "message": str(exc)}
    except (ValueError, ProposerError) as exc:   # a device or proposer that cannot be had: nothing ran
        return {"error": ERROR, "message": str(exc)}
    return {"run_id": run.run_id}


def _job_main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m agent.leaderboard JOB.json", file=sys.stderr)
        return 2
    job = Job(**json.loads(Path(argv[0]).read_text(encoding="utf-8")))
    try:
        outcome = run_job(job)
    except KeyboardInterrupt:
        outcome = {"error": INTERRUPTED, "message": "interrupted before the run was stored"}
    except Exception as exc:   # the task's row says what broke; the traceback goes to the task's log
        import traceback

        traceback.print_exc()
        outcome = {"error": ERROR, "message": f"kgen failed: {type(exc).__name__}: {exc}"}
    Path(job.result_path).write_text(json.dumps(outcome))
    return 0


# ---- the board -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Worker:
    """One slot that runs tasks one after another: a GPU, or a CPU slot."""

    label: str                          # "GPU 1", "cpu 0"
    env: dict[str, str] = field(default_factory=dict)   # set for its processes (CUDA_VISIBLE_DEVICES)


def plan_workers(device: str, *, gpus: Iterable[int] | None, workers: int | None, gpu_count: int,
                 visible: str | None = None) -> list[Worker]:
    """The workers for a board: one per GPU on CUDA (--gpus picks them), --workers N on a CPU.

    `visible` is this process's CUDA_VISIBLE_DEVICES: --gpus indexes the GPUs
    it exposes, and each worker's processes see exactly one of them.
    """
    if workers is not None and workers < 1:
        raise LeaderboardError(f"--workers must be at least 1, got {workers}")
    if device != "cuda":
        if gpus:
            raise LeaderboardError("--gpus needs a CUDA device; this board runs on the CPU (use --workers N)")
        return [Worker(f"cpu {i}") for i in range(workers or 1)]
    chosen = list(range(gpu_count)) if gpus is None else list(gpus)
    if not chosen:
        raise LeaderboardError("no GPU to run on")
    for g in chosen:
        if not 0 <= g < gpu_count:
            raise LeaderboardError(f"--gpus {g}: torch sees {gpu_count} GPU(s) here (0..{gpu_count - 1})")
    if len(set(chosen)) != len(chosen):
        raise LeaderboardError("--gpus names a GPU twice: two workers on one GPU would time each other's kernels")
    if workers is not None:
        if workers > len(chosen):
            raise LeaderboardError(f"--workers {workers}: each worker owns one GPU and {len(chosen)} are chosen "
                                   "(two timings on one GPU would both be wrong)")
        chosen = chosen[:workers]
    ids = [v.strip() for v in visible.split(",")] if visible else None
    return [Worker(f"GPU {g}", {"CUDA_VISIBLE_DEVICES": ids[g] if ids and g < len(ids) else str(g)})
            for g in chosen]


def _project_root() -> Path:
    return Path(__file__).resolve().parent.parent


class BoardRunner:
    """Runs the pending tasks of a board on its workers and keeps the board's files current."""

    def __init__(self, board: Leaderboard, results_dir: str | Path, workers: list[Worker], *,
                 kernels: dict[str, Path | tuple[Path, ...] | str] | None = None,
                 on_start: Callable[[Row, Worker], None] | None = None,
                 on_row: Callable[[Row], None] | None = None):
        self.board = board
        self.results_dir = Path(results_dir)
        self.store = Store(self.results_dir)
        self.workers = workers
        self.kernels = kernels or {}
        self.on_start = on_start
        self.on_row = on_row
        self.folder = board_dir(self.results_dir, board.name)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._procs: dict[str, subprocess.Popen] = {}
        self._lock_fd = -1          # the board's lock file, held while it runs (and by its tasks)
        self.interrupted = False

    # -- planning --

    def pending(self) -> list[Row]:
        """Rows to run now; finished rows are kept, and runs a killed board left finished are collected."""
        todo = []
        for row in self.board.rows:
            if self.is_finished(row):
                continue
            stored = self._stored_run(row.task)
            if stored is not None and stored.status in FINISHED_RUN:
                # the task finished but the board never heard (it was killed): take the result, run nothing
                self._record(row_from_run(self.store, stored, self.board.mode))
                continue
            todo.append(row)
        return todo

    def is_finished(self, row: Row) -> bool:
        return row.status in (FINISHED_VERIFY if self.board.mode == "verify-only" else FINISHED_RUN)

    def _job_paths(self, task: str) -> tuple[Path, Path, Path]:
        jobs = self.folder / "jobs"
        return jobs / f"{task}.job.json", jobs / f"{task}.started.json", jobs / f"{task}.result.json"

    def _stored_run(self, task: str) -> Run | None:
        """The run a task's worker started last, when the store still has it."""
        _, started, _ = self._job_paths(task)
        if not started.exists():
            return None
        try:
            return self.store.load_run(json.loads(started.read_text())["run_id"])
        except (KeyError, ValueError, OSError):
            return None

    # -- running --

    def run(self) -> Leaderboard:
        """Run every pending task; returns the board (Ctrl-C stops it: running tasks store themselves).

        Raises LeaderboardError when another kgen process is running this board.
        """
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / ".lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise LeaderboardError(f"leaderboard {self.board.name} is being run by another kgen process (or by "
                                       "tasks it left running); wait for it, or choose another --name") from None
            self._lock_fd = lock.fileno()
            return self._run()

    def _run(self) -> Leaderboard:
        tasks: queue.Queue[Row] = queue.Queue()
        for row in self.pending():
            tasks.put(row)
        save_board(self.results_dir, self.board)
        threads = [threading.Thread(target=self._work, args=(w, tasks), name=f"kgen-board-{w.label}", daemon=True)
                   for w in self.workers]
        for t in threads:
            t.start()
        try:
            while any(t.is_alive() for t in threads):
                for t in threads:
                    t.join(timeout=0.2)
        except KeyboardInterrupt:
            self.interrupted = True
            self._stop.set()
            self._interrupt_running()
            try:
                deadline = time.monotonic() + STOP_GRACE_S
                for t in threads:
                    t.join(timeout=max(0.0, deadline - time.monotonic()))
            except KeyboardInterrupt:   # a second Ctrl-C: no more waiting
                pass
            finally:
                self._kill_running()
            for t in threads:
                t.join(timeout=5.0)
        save_board(self.results_dir, self.board)
        return self.board

    def _work(self, worker: Worker, tasks: "queue.Queue[Row]") -> None:
        while not self._stop.is_set():
            try:
                row = tasks.get_nowait()
            except queue.Empty:
                return
            if self.on_start is not None:
                self.on_start(row, worker)
            try:
                result = self._run_task(row, worker)
            except Exception as exc:   # a fault of the board itself on this task: a row, not the end
                result = dataclasses.replace(row, status=ERROR, reason=f"kgen failed: {type(exc).__name__}: {exc}")
            result.worker = worker.label
            self._record(result)

    def _record(self, row: Row) -> None:
        with self._lock:
            self.board.rows = [row if r.task == row.task else r for r in self.board.rows]
            save_board(self.results_dir, self.board)
        if self.on_row is not None:
            self.on_row(row)

    def _run_task(self, row: Row, worker: Worker) -> Row:
        job_path, started_path, result_path = self._job_paths(row.task)
        job_path.parent.mkdir(parents=True, exist_ok=True)
        result_path.unlink(missing_ok=True)
        kind = "verify" if self.board.mode == "verify-only" else "optimize"
        kernel = None
        if kind == "verify":
            kernel = self.kernels.get(row.task)
            if not isinstance(kernel, (Path, tuple)):   # a tuple: the task's KernelBench samples
                return dataclasses.replace(row, status=MISSING, reason=str(kernel or "no kernel file"), correct=False)
        resume = None
        if kind == "optimize":
            stored = self._stored_run(row.task)
            if stored is not None and stored.status in ("running", INTERRUPTED):
                resume = stored.run_id
        if resume is None:
            started_path.unlink(missing_ok=True)
        # NOTE: runs go to this board's results folder, wherever the board was first run (it may have moved)
        config = {**self.board.config, "results_dir": str(self.results_dir)}
        job = Job(kind=kind, task=row.task, task_path=row.task_path, config=config,
                  result_path=str(result_path.resolve()), started_path=str(started_path.resolve()),
                  resume=resume, kernel_path=str(kernel.resolve()) if isinstance(kernel, Path) else None,
                  kernel_paths=[str(k.resolve()) for k in kernel] if isinstance(kernel, tuple) else None)
        job_path.write_text(json.dumps(dataclasses.asdict(job), indent=2))

        log_path = self.folder / "logs" / f"{row.task}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env.update(worker.env)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_project_root()), env.get("PYTHONPATH", "")) if p)
        started = time.monotonic()
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(f"== {utc_now()} {kind} {row.task} on {worker.label}"
                      + (f" (resuming {resume})" if resume else "") + "\n")
            log.flush()
            # NOTE: a session of its own: Ctrl-C reaches the board only, which passes one SIGINT on to each
            # task so that it stores itself as interrupted (a second one could cut that short). The task
            # holds the board's lock too, so that a task outliving a killed board keeps others out.
            proc = subprocess.Popen([sys.executable, "-m", "agent.leaderboard", str(job_path)], env=env,
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True, pass_fds=(self._lock_fd,))
            with self._lock:
                self._procs[row.task] = proc
            try:
                code = proc.wait()
            finally:
                with self._lock:
                    self._procs.pop(row.task, None)
        wall = time.monotonic() - started

        outcome = json.loads(result_path.read_text()) if result_path.exists() else None
        if outcome and outcome.get("run_id"):
            done = row_from_run(self.store, self.store.load_run(outcome["run_id"]), self.board.mode)
            if done.status == INTERRUPTED:
                done.reason = f"interrupted; run the board again (--name {self.board.name}) to continue"
            return done
        stored = self._stored_run(row.task) if kind == "optimize" else None
        base = dataclasses.replace(row, run_id=stored.run_id if stored else "", wall_s=wall, correct=False)
        if outcome:
            status = outcome.get("error", ERROR)
            return dataclasses.replace(base, status=status, reason=outcome.get("message", ""))
        if self._stop.is_set():
            return dataclasses.replace(base, status=INTERRUPTED,
                                       reason=f"interrupted; run the board again (--name {self.board.name}) to continue")
        return dataclasses.replace(base, status=ERROR,
                                   reason=f"the task's process {describe_exit(code)} without a result; "
                                          f"see {log_path}: {_last_line(log_path)}")

    def _interrupt_running(self) -> None:
        with self._lock:
            procs = list(self._procs.values())
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)

    def _kill_running(self) -> None:
        with self._lock:
            procs = list(self._procs.values())
        for proc in procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)   # its own session: the group is the task's processes
                except ProcessLookupError:
                    pass


def _last_line(path: Path, limit: int = 200) -> str:
    try:
        lines = [ln for ln in path.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:limit] if lines else ""


def open_board(results_dir: str | Path, *, name: str, suite: str | Path, task_paths: Iterable[Path], mode: str,
               config: dict[str, Any], device: str, gpu: str, kernels_dir: str = "") -> Leaderboard:
    """The board under `name`: the stored one when it exists (same suite, mode and settings), else a new one.

    Raises LeaderboardError when the name is taken by a board of another suite,
    mode or settings: its rows would not be comparable.
    """
    task_paths = list(task_paths)
    names = [p.stem for p in task_paths]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise LeaderboardError(f"{suite}: the suite names {', '.join(twice)} more than once (tasks are told apart "
                               "by file name)")
    config = scrub_config(config)
    suite_text = str(Path(suite).resolve())
    board = load_board(results_dir, name)
    if board is None:
        return Leaderboard(name=name, suite=suite_text, mode=mode, config=config, device=device, gpu=gpu,
                           kernels_dir=kernels_dir, created_at=utc_now(),
                           rows=[Row(task=p.stem, task_path=str(p.resolve())) for p in task_paths])
    if board.mode != mode:
        raise LeaderboardError(f"leaderboard {name} is a {board.mode} board; choose another --name")
    if board.suite != suite_text:
        raise LeaderboardError(f"leaderboard {name} is for the suite {board.suite}, not {suite_text}; "
                               "choose another --name")
    # a verify-only board proposes nothing: only the settings of verification make its rows comparable
    changed = config_changes(board.config, config, VERIFY_SETTINGS if mode == "verify-only" else None)
    if changed:
        raise LeaderboardError(f"leaderboard {name} was run with other settings ({'; '.join(changed)}): "
                               "rerun with the same flags, or choose another --name")
    if board.kernels_dir != kernels_dir:
        raise LeaderboardError(f"leaderboard {name} scored {board.kernels_dir}, not {kernels_dir}; "
                               "choose another --name")
    if board.device != device:
        raise LeaderboardError(f"leaderboard {name} ran on {board.device}, this one would run on {device}; "
                               "choose another --name")
    board.config = config   # the same settings; the results folder is where the board is now
    # the suite's task list is the file's as of now; rows of tasks it no longer lists are dropped
    kept = {r.task: r for r in board.rows}
    board.rows = [kept.get(p.stem) or Row(task=p.stem, task_path=str(p.resolve())) for p in task_paths]
    return board


def config_changes(stored: dict[str, Any], given: dict[str, Any], keys: Iterable[str] | None = None) -> list[str]:
    """"field: stored -> given" for each setting (of `keys`, default all) that differs, the results folder aside."""
    keys = sorted((set(keys) if keys is not None else set(stored) | set(given)) - {"results_dir"})
    stored = {**STORED_BEFORE, **stored}
    return [f"{k}: {stored.get(k)!r} -> {given.get(k)!r}" for k in keys if stored.get(k) != given.get(k)]


if __name__ == "__main__":
    sys.exit(_job_main(sys.argv[1:]))
