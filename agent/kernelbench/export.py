"""A board in KernelBench's result formats, and those formats read back.

    kgen export kernelbench BOARD -o out/      # out/<board>_level1/eval_results.json, out/baseline_time_torch.json, ...
    python scripts/benchmark_eval_analysis.py run_name=<board>_level1 level=1 hardware=kgen \\
        baseline=baseline_time_torch baseline_file=out/baseline_time_torch.json eval_results_dir=out   # in KernelBench

The shapes are KernelBench's as its scripts write and read them (at commit 423217d):

- `eval_results.json`, one per run of one level (scripts/eval_from_generations.py writes it,
  scripts/benchmark_eval_analysis.py reads it): `{"<problem id>": [{"sample_id", "compiled",
  "correctness", "metadata", "runtime", "runtime_stats"}, ...]}`, problem ids in numeric order.
  `runtime` is the mean in ms (-1.0 when not timed) and `runtime_stats` is `{"mean", "std", "min",
  "max", "num_trials", "hardware", "device"}` ({} when not timed), rounded to 3 significant figures
  as its get_timing_stats rounds them.
- the baseline-time JSON (scripts/generate_baseline_time.py): `{"level<L>": {"<problem file name>":
  runtime_stats}}`, one file per baseline: `baseline_time_torch.json` (eager),
  `baseline_time_torch_compile_inductor_default.json` and one per other compile mode kgen timed.

Each row of the board is a problem (its number from the task file's name, its level from its
folder's, `level1/19_ReLU.py`, or --level); its samples are the KernelBench sample files a
--verify-only board scored (by their sample ids), else the one kernel it scored, else an
optimize run's best kernel (sample 0). Times are the board's protocol's (the metadata's
`kgen_timing` says which): compare them with baselines of the same protocol; `--timing
kernelbench` is KernelBench's own. Baselines come from each problem's verified attempts, or from
kgen's baseline cache where the task was timed but no kernel passed. KernelBench's analysis reads
sample 0 only, counts every problem of its level (absent ones as failures), and skips a problem
its baseline file lacks: `ExportResult.missing_baselines` lists those.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.config import STORED_BEFORE
from agent.kernelbench.names import parse_sample_name, problem_number, task_level
from agent.records import Attempt, Run
from agent.store import Store

EVAL_RESULTS = "eval_results.json"
EAGER_FILE = "baseline_time_torch"
COMPILED = ("ok", "mismatch", "runtime_error", "rejected", "not_run")   # statuses of a kernel that built
# kgen's status -> the metadata key KernelBench files that kind of failure under
ERROR_KEYS = {"compile_error": "compilation_error", "runtime_error": "runtime_error", "mismatch": "correctness_issue"}


def sig3(value: float) -> float:
    """Rounded to 3 significant figures, as KernelBench's get_timing_stats writes its times."""
    return float(f"{value:.3g}")


@dataclass
class RuntimeStats:
    """KernelBench's `runtime_stats` (and a baseline entry): ms, 3 significant figures."""

    mean: float
    min: float
    num_trials: int
    hardware: str
    device: str
    std: float | None = None        # None where the protocol kept no std (graph, events): left out of the JSON
    max: float | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mean": self.mean}
        if self.std is not None:
            out["std"] = self.std
        out["min"] = self.min
        if self.max is not None:
            out["max"] = self.max
        out.update(num_trials=self.num_trials, hardware=self.hardware, device=self.device)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "RuntimeStats":
        return cls(mean=float(data["mean"]), min=float(data["min"]), num_trials=int(data["num_trials"]),
                   hardware=str(data.get("hardware", "")), device=str(data.get("device", "")),
                   std=float(data["std"]) if "std" in data else None,
                   max=float(data["max"]) if "max" in data else None)

    @classmethod
    def from_timing(cls, timing, hardware: str, device: str) -> "RuntimeStats":
        return cls(mean=sig3(timing.mean_ms), min=sig3(timing.min_ms), num_trials=timing.reps, hardware=hardware,
                   device=device, std=sig3(timing.std_ms) if timing.std_ms is not None else None,
                   max=sig3(timing.max_ms) if timing.max_ms is not None else None)


@dataclass
class EvalSample:
    """One entry of a problem's list in eval_results.json."""

    sample_id: int
    compiled: bool
    correctness: bool
    metadata: dict[str, Any]            # KernelBench's free-form metadata (hardware, errors) plus kgen_* keys
    runtime: float = -1.0               # the mean in ms; -1.0 when not timed, as KernelBench writes it
    runtime_stats: RuntimeStats | None = None

    def to_json(self) -> dict[str, Any]:
        return {"sample_id": self.sample_id, "compiled": self.compiled, "correctness": self.correctness,
                "metadata": self.metadata, "runtime": self.runtime,
                "runtime_stats": self.runtime_stats.to_json() if self.runtime_stats else {}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "EvalSample":
        stats = data["runtime_stats"]
        return cls(sample_id=int(data["sample_id"]), compiled=bool(data["compiled"]),
                   correctness=bool(data["correctness"]), metadata=dict(data["metadata"]),
                   runtime=float(data["runtime"]), runtime_stats=RuntimeStats.from_json(stats) if stats else None)


@dataclass
class ExportResult:
    """What `kgen export kernelbench` wrote, and what it could not."""

    files: list[Path] = field(default_factory=list)
    runs: dict[int, str] = field(default_factory=dict)          # level -> the run name its eval_results.json is under
    skipped: list[str] = field(default_factory=list)            # "task: why it is not in the export"
    missing_baselines: list[str] = field(default_factory=list)  # "level L problem NAME: no <baseline> time"


def baseline_file_name(key: str) -> str:
    """kgen's baseline key -> KernelBench's file stem: eager -> baseline_time_torch, compile -> ..._default."""
    if key == "eager":
        return EAGER_FILE
    mode = "default" if key == "compile" else key.removeprefix("compile-")
    return f"baseline_time_torch_compile_inductor_{mode}"


# ---- from a board ---------------------------------------------------------------------------------


def export_board(board, store: Store, out_dir: str | Path, *, level: int | None = None) -> ExportResult:
    """Write `board` (a Leaderboard, its runs in `store`) under out_dir in KernelBench's formats.

    `level` gives the level of tasks whose folder does not name one. ValueError when no row can be written."""

    out = Path(out_dir)
    result = ExportResult()
    evals: dict[int, dict[int, list[EvalSample]]] = {}
    baselines: dict[str, dict[int, dict[str, RuntimeStats]]] = {}
    exported: set[tuple[int, str]] = set()     # (level, problem file name) of every problem written
    method = board.config.get("timing") or STORED_BEFORE["timing"]   # a board stored before --timing: events
    for row in board.rows:
        number, lvl = problem_number(row.task_path), task_level(row.task_path) or level
        if number is None:
            result.skipped.append(f"{row.task}: not a KernelBench problem (no leading problem number)")
            continue
        if lvl is None:
            result.skipped.append(f"{row.task}: no level (its folder is not named level1, level2, ...; give --level)")
            continue
        if not row.run_id or not row.counted:   # a harness error: kgen failed, no kernel was judged
            result.skipped.append(f"{row.task}: {row.status}, nothing was scored ({row.reason or 'no run'})")
            continue
        run = store.load_run(row.run_id)
        attempts = sorted(store.load_attempts(run.run_id), key=lambda a: a.number)
        name = Path(row.task_path).name
        samples = []
        for sample_id, attempt in _samples(run, attempts, board.mode):
            verdict = attempt.verify
            samples.append(_eval_sample(sample_id, attempt, verdict, run, method))
            if verdict is not None:
                for key, timing in verdict.baselines.items():
                    per_level = baselines.setdefault(key, {}).setdefault(lvl, {})
                    if name not in per_level:   # the first sample's (in sample order) stands for the problem
                        per_level[name] = RuntimeStats.from_timing(timing, _hardware(run, verdict), run.device)
        if not samples:
            result.skipped.append(f"{row.task}: its run {run.run_id} holds no attempt")
            continue
        evals.setdefault(lvl, {})[number] = sorted(samples, key=lambda s: s.sample_id)
        exported.add((lvl, name))
        if not any(name in baselines.get(k, {}).get(lvl, {}) for k in baselines):
            for key, timing in _cached_baselines(row.task_path, run, store, method).items():
                baselines.setdefault(key, {}).setdefault(lvl, {})[name] = \
                    RuntimeStats.from_timing(timing, run.gpu, run.device)
    if not evals:
        raise ValueError(f"leaderboard {board.name}: no row to export ({'; '.join(result.skipped) or 'no rows'})")

    out.mkdir(parents=True, exist_ok=True)
    for lvl, problems in sorted(evals.items()):
        run_name = f"{board.name}_level{lvl}"
        path = out / run_name / EVAL_RESULTS
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {str(p): [s.to_json() for s in problems[p]] for p in sorted(problems)}
        path.write_text(json.dumps(data, indent=4) + "\n", encoding="utf-8")
        result.files.append(path)
        result.runs[lvl] = run_name
    keys = sorted(baselines, key=lambda k: (k != "eager", k)) or ["eager"]
    for key in keys:
        path = out / f"{baseline_file_name(key)}.json"
        levels = baselines.get(key, {})
        data = {f"level{lvl}": {n: s.to_json() for n, s in sorted(levels.get(lvl, {}).items(), key=_by_number)}
                for lvl in sorted(evals)}
        path.write_text(json.dumps(data, indent=4) + "\n", encoding="utf-8")
        result.files.append(path)
        for (lvl, name) in sorted(exported, key=lambda k: (k[0], _by_number((k[1], None)))):
            if name not in levels.get(lvl, {}):
                result.missing_baselines.append(f"level {lvl} {name}: no {key} time in {path.name}")
    return result


def _by_number(item: tuple[str, Any]) -> tuple:
    return problem_number(item[0]) or 0, item[0]


def _samples(run: Run, attempts: list[Attempt], mode: str) -> list[tuple[int, Attempt]]:
    """(sample id, attempt) for each sample of a row's run."""
    kernel_paths = (run.config or {}).get("kernel_paths")
    if mode == "verify-only" and kernel_paths:
        out = []
        for attempt in attempts:
            name = parse_sample_name(kernel_paths[attempt.number - 1]) if attempt.number <= len(kernel_paths) else None
            out.append((name.sample if name else attempt.number - 1, attempt))
        return out
    if mode == "verify-only":
        return [(0, attempts[0])] if attempts else []
    best = next((a for a in attempts if a.number == run.best_attempt), None)
    last = next((a for a in reversed(attempts) if a.verify is not None), attempts[-1] if attempts else None)
    chosen = best or last
    return [(0, chosen)] if chosen is not None else []


def _hardware(run: Run, verdict) -> str:
    return run.gpu or verdict.device


def _eval_sample(sample_id: int, attempt: Attempt, verdict, run: Run, method: str) -> EvalSample:
    hardware = _hardware(run, verdict) if verdict else run.gpu
    metadata: dict[str, Any] = {"hardware": hardware, "device": run.device, "kgen_status": attempt.status,
                                "kgen_reason": attempt.reason, "kgen_run": run.run_id, "kgen_attempt": attempt.number,
                                "kgen_timing": method}
    if attempt.status in ERROR_KEYS:
        metadata[ERROR_KEYS[attempt.status]] = attempt.reason
    if verdict is not None and verdict.passed:
        metadata["correctness_trials"] = f"({verdict.trials} / {verdict.trials})"
    timing = verdict.timing if verdict is not None and verdict.passed else None
    if timing is None:
        return EvalSample(sample_id, attempt.status in COMPILED, attempt.passed, metadata)
    metadata["kgen_timing"] = timing.method
    metadata["kgen_median_ms"] = timing.median_ms
    stats = RuntimeStats.from_timing(timing, hardware, run.device)
    return EvalSample(sample_id, True, True, metadata, runtime=stats.mean, runtime_stats=stats)


def _cached_baselines(task_path: str, run: Run, store: Store, method: str) -> dict:
    """The baselines kgen's cache holds for this task, GPU, torch and protocol ({} when none): a task whose
    kernels all failed was still timed there before its candidates ran."""
    if run.device != "cuda" or not run.gpu:
        return {}
    try:
        from verifier.records import Timing
        from verifier.task import load_task
        from verifier.verify import baseline_key

        task = load_task(task_path)
        path = store.root / "baselines" / run.gpu.replace(" ", "_") / f"{baseline_key(task, run.gpu, method)}.json"
        if not path.exists():
            return {}
        return {k: Timing(**v) for k, v in json.loads(path.read_text())["baselines"].items()}
    except Exception:   # noqa: BLE001 - a task file moved or a cache entry unreadable: the baseline is missing
        return {}


# ---- reading them back ------------------------------------------------------------------------------


def read_eval_results(path: str | Path) -> dict[int, list[EvalSample]]:
    """eval_results.json: problem id -> its samples. KeyError/ValueError for a file not of that shape."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return {int(pid): [EvalSample.from_json(s) for s in samples] for pid, samples in data.items()}


def read_baselines(path: str | Path) -> dict[int, dict[str, RuntimeStats]]:
    """A baseline-time JSON: level -> problem file name -> stats."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    out = {}
    for key, problems in data.items():
        if not key.startswith("level"):
            raise ValueError(f"{path}: {key!r} is not a level (level1, level2, ...)")
        out[int(key.removeprefix("level"))] = {name: RuntimeStats.from_json(s) for name, s in problems.items()}
    return out


def analysis_command(out_dir: str | Path, run_name: str, level: int, baseline: str = EAGER_FILE) -> str:
    """The line that runs KernelBench's own analysis on an export (from a KernelBench checkout)."""
    out = Path(out_dir).resolve()
    return (f"uv run python scripts/benchmark_eval_analysis.py run_name={run_name} level={level} hardware=kgen "
            f"baseline={baseline} baseline_file={out / (baseline + '.json')} eval_results_dir={out}")
