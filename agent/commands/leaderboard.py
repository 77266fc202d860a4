"""`kgen leaderboard SUITE`: optimize every task of a suite (or score a folder of kernels), one table.

    kgen leaderboard tasks/suite-small.txt --max-iters 4          # every GPU here, one worker each
    kgen leaderboard tasks/ --gpus 0,1 --name nightly --model gpt-4.1
    kgen leaderboard tasks/ --name nightly                          # again: finished tasks are skipped
    kgen leaderboard tasks/ --verify-only kernels/ --name mine      # existing kernels, no proposer
    kgen leaderboard tasks/ --device cpu --workers 2                # no GPU: correctness only
    kgen leaderboard tasks/ --executor ray --ray-address auto      # a Ray cluster's GPUs (docs/distributed.md)

SUITE is a folder of task files or a text file listing them. The optimize
flags are `kgen optimize`'s and apply to every task. On a GPU each worker owns
one GPU (`--gpus`, default all of them): a task's timing and profiling never
share a GPU with another's. On a CPU `--workers N` tasks run at once; nothing
is timed there, so the speedup columns say "not timed" and fast_p for p > 0 is
n/a. With `--verify-only DIR`, each task's kernel is the file of DIR named
like it (`softmax.py`, or a single `softmax_*.py`), or its KernelBench samples
(`level_1_problem_19_sample_0_kernel.py`, ...: all scored, the best reported).
A folder SUITE is taken in numeric order (1, 2, ..., 10, ..., 100); `--problems
1-20,23` keeps those problem numbers (`level2:1-5` where levels are folders).

The board is written to <results>/leaderboards/<name>/leaderboard.json and
leaderboard.md after every task, and printed at the end (--json: the same
JSON as leaderboard.json, on stdout). Running it again
with the same --name (and the same settings) skips the finished tasks.
A task that cannot be loaded or whose run fails is a row that says why.

Exit codes: 0 every task has a result; 1 some task could not be run (a
malformed task file, a missing kernel, a kgen failure); 2 bad usage;
130 / 143 / 129 interrupted by Ctrl-C / SIGTERM / SIGHUP: the tasks in flight
store their runs as interrupted (run and row), and the command that continues
the board (the same --name) is printed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from agent.board import EXECUTORS
from agent.board.records import BoardConfig
from agent.commands.optimize import add_optimize_flags
from agent.config import OptimizeConfig
from agent.flags import positive_int
from verifier.records import printable


def register(sub) -> None:
    p = sub.add_parser("leaderboard", help="optimize every task of a suite (or score a folder of kernels): fast_p table",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("suite", help="a folder of task files, or a text file listing them")
    p.add_argument("--name", help="the board's name (default SUITE-DATE); the same name again resumes it")
    p.add_argument("--workers", type=positive_int, metavar="N",
                   help="tasks at once: on a CPU default 1; on a GPU at most one per GPU")
    p.add_argument("--gpus", metavar="0,1,...", help="GPUs to use, one worker each (default all)")
    p.add_argument("--verify-only", metavar="DIR",
                   help="score the kernels in DIR (one per task, named like it) with no proposer")
    p.add_argument("--problems", metavar="SPEC", help="only these KernelBench problems, by number: 1-20,23 or level2:1-5")
    p.add_argument("--allow-incomplete-isolation", action="store_true",
                   help="run the board even where the sandbox cannot enforce all of its confinement here "
                        "(say, no pids cgroup); each verdict still names what was not in force")
    p.add_argument("--json", action="store_true",
                   help="print the board (rows, settings, summary) as JSON on stdout instead of the tables")
    p.add_argument("--executor", default=BoardConfig.executor, choices=EXECUTORS.names,
                   help=f"where the tasks run (default {BoardConfig.executor}: a process per task on this machine)")
    ray = p.add_argument_group("--executor ray (docs/distributed.md)")
    ray.add_argument("--ray-address", metavar="auto|HOST:PORT",
                     help="the Ray cluster to join (default: start a one-node cluster on this machine)")
    ray.add_argument("--loops-per-gpu", type=int, metavar="N", help="task loops in flight per GPU (default 2)")
    ray.add_argument("--accelerator-type", metavar="TYPE", help="only GPUs of this Ray accelerator type (H200)")
    add_optimize_flags(p.add_argument_group("optimize settings (as for kgen optimize; applied to every task)"))
    p.set_defaults(func=run)


def _error(message: str) -> int:
    print(f"kgen leaderboard: error: {message}", file=sys.stderr)
    return 2


def parse_gpus(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ValueError(f"--gpus takes GPU indices separated by commas, e.g. 0,1; got {text!r}") from None


def sandbox_missing() -> list[str]:
    """The confinements (verifier.sandbox.PROPERTIES) a sandbox cannot enforce on this machine: one trivial run."""
    from verifier.sandbox import run_sandboxed

    res = run_sandboxed([sys.executable, "-c", "pass"], {}, timeout_s=60)
    return list(res.isolation_missing)


def resume_command(args, name: str) -> str:
    """The command that continues this board: its suite and --name (the optimize settings are the stored
    board's), with the flags that say where and how it runs, which the board does not store."""
    import shlex

    argv = ["kgen", "leaderboard", args.suite, "--name", name]
    for flag, value in (("--results", args.results), ("--verify-only", args.verify_only),
                        ("--problems", args.problems), ("--workers", args.workers), ("--gpus", args.gpus),
                        ("--ray-address", args.ray_address), ("--loops-per-gpu", args.loops_per_gpu),
                        ("--accelerator-type", args.accelerator_type)):
        if value is not None:
            argv += [flag, str(value)]
    if args.executor != BoardConfig.executor:
        argv += ["--executor", args.executor]
    if args.allow_incomplete_isolation:
        argv.append("--allow-incomplete-isolation")
    return " ".join(shlex.quote(a) for a in argv)


def board_config_from_args(args):
    """The BoardConfig the flags describe (ValueError for a malformed --gpus)."""
    return BoardConfig(suite=args.suite, name=args.name, workers=args.workers, gpus=parse_gpus(args.gpus),
                       verify_only=args.verify_only, executor=args.executor)


def run(args) -> int:
    from agent.commands.optimize import config_from_args
    from agent.commands.show import make_console
    from agent.analysis import device_and_gpu
    from agent.board.files import load_board, open_board
    from agent.board.records import ERROR, HARNESS_ERROR, INTERRUPTED, MISSING, PENDING, TASK_ERROR, LeaderboardError
    from agent.board.render import rich_board
    from agent.board.runner import BoardRunner
    from agent.kernelbench.names import outside_selection, suite_tasks
    from agent.kernelbench.samples import match_samples
    from verifier.task import TaskError

    try:
        explicit = config_from_args(args)
        board_config = board_config_from_args(args)
    except ValueError as exc:
        return _error(str(exc))
    try:
        task_paths = suite_tasks(board_config.suite, args.problems)   # a folder in numeric order; --problems
    except (TaskError, ValueError) as exc:
        return _error(str(exc))
    kernels_dir = board_config.verify_only
    if kernels_dir is not None and not Path(kernels_dir).is_dir():
        return _error(f"--verify-only {kernels_dir}: not a folder of kernels")

    name, mode = board_config.board_name(), board_config.mode
    config = explicit
    stored = load_board(explicit.results_dir, name) if board_config.name else None
    lost = outside_selection([r.task for r in stored.rows], task_paths) if stored and args.problems else []
    if lost:   # a board keeps only the rows of the tasks it runs: a narrower selection would drop these
        return _error(f"leaderboard {name} also holds {', '.join(lost[:3])}{' ...' if len(lost) > 3 else ''}, outside "
                      f"--problems {args.problems}: run it with a selection that keeps them, or choose another --name")
    if stored is not None and stored.mode == mode:
        # settings left off the command line are the stored board's, so that the same --name resumes it;
        # those given must match (open_board says which do not)
        try:
            config = config_from_args(args, OptimizeConfig.from_dict(
                {**stored.config, "results_dir": explicit.results_dir}))
        except ValueError as exc:
            return _error(str(exc))

    if board_config.executor == "local":   # (a Ray cluster's nodes say so in each verdict of theirs)
        missing = sandbox_missing()
        if missing and not args.allow_incomplete_isolation:
            return _error(f"the sandbox cannot enforce {', '.join(missing)} on this machine, so this board's verdicts "
                          "would claim a confinement they did not have; fix that (docs/threat-model.md) or run "
                          "with --allow-incomplete-isolation to publish them, each naming what was missing")
        if missing:
            print(f"kgen leaderboard: note: isolation incomplete here (not in force: {', '.join(missing)}); "
                  "every verdict names it", file=sys.stderr)
    if kernels_dir is None:   # a board that proposes kernels: the proposer must be able to honour the flags
        errors, notes = config.proposer_problems()
        if errors:
            return _error(errors[0])
        for note in notes:
            print(f"kgen leaderboard: note: {note}", file=sys.stderr)
    ray = {"address": args.ray_address, "loops_per_gpu": args.loops_per_gpu, "accelerator_type": args.accelerator_type}
    on_ray = board_config.executor == "ray"   # the cluster's GPUs decide the device there, not this machine's
    if not on_ray and any(v is not None for v in ray.values()):
        return _error("--ray-address, --loops-per-gpu and --accelerator-type need --executor ray")
    try:
        device, gpu = (config.device, "") if on_ray else device_and_gpu(config.device)
    except ValueError as exc:
        return _error(str(exc))
    try:
        executor = EXECUTORS.make(board_config.executor, device=device, gpus=board_config.gpus,
                                  workers=board_config.workers, **(ray if on_ray else {}))
        if on_ray:
            device, gpu = executor.machine
        kernels_dir = str(Path(kernels_dir).resolve()) if kernels_dir else ""
        board = open_board(config.results_dir, name=name, suite=board_config.suite, task_paths=task_paths,
                           mode=mode, config=config.to_dict(), device=device, gpu=gpu, kernels_dir=kernels_dir)
    except LeaderboardError as exc:
        return _error(str(exc))
    found = match_samples(task_paths, Path(kernels_dir)) if kernels_dir else None   # KernelBench samples too
    kernels = found.kernels if found else None
    for line in found.unmatched if found else []:
        print(f"kgen leaderboard: not scored: {line}", file=sys.stderr)

    view = make_progress(sys.stderr, board)
    runner = BoardRunner(board, config.results_dir, executor, kernels=kernels, on_start=view.started,
                         on_row=view.finished)
    done = [r for r in board.rows if runner.is_finished(r)]
    view.already(done)
    view.line(f"leaderboard {name}: {len(board.rows)} tasks ({len(done)} already done), {mode}, "
              f"{len(executor.slots)} worker(s): {', '.join(executor.slots)}; folder {runner.folder}")
    try:
        with view:
            board = runner.run()
    except LeaderboardError as exc:
        return _error(str(exc))

    if args.json:
        import json

        print(json.dumps(board.to_dict(), indent=2, default=str))
    else:
        make_console().print(rich_board(board))
        print(f"written: {runner.folder / 'leaderboard.json'}  {runner.folder / 'leaderboard.md'}")
        print(f"review: kgen show {name}    kgen report {name}")
    if runner.interrupted:
        print(f"interrupted; continue with: {resume_command(args, name)}", file=sys.stderr)
        return 130
    unrun = [r.task for r in board.rows
             if r.status in (ERROR, HARNESS_ERROR, INTERRUPTED, MISSING, PENDING, TASK_ERROR)]
    return 1 if unrun else 0


# ---- progress --------------------------------------------------------------------------------------


class _Progress:
    """Tasks done, passing, and fast_1 so far: a rich progress bar on a terminal, lines otherwise."""

    def __init__(self, stream, board, live: bool):
        self.stream = stream
        self.board = board
        self.total = len(board.rows)
        self.done = 0
        self.passing = 0
        self.rows = []
        self.started_at = time.monotonic()
        self.live = live
        self._progress = None
        self._bar = None

    def __enter__(self):
        if self.live:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                      TextColumn("{task.fields[stats]}"), TimeElapsedColumn(),
                                      console=Console(file=self.stream), transient=False)
            self._progress.__enter__()
            self._bar = self._progress.add_task("tasks", total=self.total, completed=self.done,
                                                stats=self._stats())
        return self

    def __exit__(self, *exc):
        if self._progress is not None:
            self._progress.__exit__(*exc)

    def _stats(self) -> str:
        from agent.fastp import fast_p

        counted = [r for r in self.rows if r.counted]   # a harness error is no kernel's result (agent.board.records)
        outcomes = [r.outcome("eager") for r in counted]
        timeable = self.board.device != "cpu"
        f1 = fast_p(outcomes, 1.0, timeable=timeable) if outcomes else None
        f1c = fast_p([r.outcome("compile") for r in counted], 1.0, timeable=timeable) if outcomes else None
        text = f"passing {self.passing}/{self.done}"
        if f1 is not None:
            text += f"  fast_1 so far: eager {f1.text()}, compile {f1c.text()}"
        return text

    def already(self, rows) -> None:
        """Rows finished by an earlier session of the board: counted, not run again."""
        self.rows.extend(rows)
        self.done += len(rows)
        self.passing += sum(r.correct for r in rows)

    def line(self, text: str) -> None:
        text = printable(text)   # NOTE: a row's reason is text a candidate chose: shown, never obeyed
        if self._progress is not None:
            self._progress.console.print(text, markup=False, highlight=False)
        else:
            print(f"kgen: {text}", file=self.stream, flush=True)

    def started(self, row, worker: str) -> None:
        if self._progress is None:
            self.line(f"{row.task}: started on {worker}")

    def finished(self, row) -> None:
        from agent.board.records import INTERRUPTED

        if row.status == INTERRUPTED:     # not done: the next session of the board continues it
            self.line(f"{row.task}: {row.reason}")
            return
        self.done += 1
        self.passing += int(row.correct)
        self.rows.append(row)
        speed = f", {row.speedup_text('eager')} vs eager, {row.speedup_text('compile')} vs compile" if row.correct else ""
        self.line(f"{row.task}: {row.status}{speed} - {row.reason[:120]}")
        if self._progress is not None:
            self._progress.update(self._bar, completed=self.done, stats=self._stats())
        else:
            self.line(f"{self.done}/{self.total} done; {self._stats()}")


def make_progress(stream, board) -> _Progress:
    return _Progress(stream, board, live=stream.isatty())
