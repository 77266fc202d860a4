"""Verifying one candidate kernel for one task: static checks, then the judge and a candidate process.

    from verifier.task import load_task
    from verifier.verify import verify
    result = verify(load_task("tasks/softmax.py"), open("kernel.py").read())
    result.status, result.reason, result.speedups

The verdict is decided by the judge (verifier.judge), in this process, which
never runs candidate code; the candidate's code runs in a sandboxed candidate
process (verifier.candidate) that only answers the judge's requests. On a
machine without a GPU, Triton candidates run under the Triton interpreter on
the task's small inputs and CUDA candidates are compiled with nvcc only
(status "not_run": nothing was executed); where even that cannot be done (no
nvcc, or a torch built without its CUDA headers for `load_inline`), the status is
"not_checkable", decided before any process starts, and the reason says what
this machine lacks and to check the kernel on a GPU machine. On a GPU the candidate is checked
on the task's real inputs and timed against eager (timed by the judge once the
candidate process has ended) and torch.compile (default and
max-autotune-no-cudagraphs, timed once per GPU, task and torch version in a
trusted job of its own, verifier.baseline_job, and cached under results/baselines/).

A load_inline candidate's extension is compiled before the candidate process gets its job, as a phase of
its own (verifier.inline_build: the literal load_inline arguments read from the syntax tree, built in a
sandboxed build process, cached by source across candidates and runs); the candidate process then finds
it built. On a GPU that keeps nvcc out of the GPU's time, and the same source again costs no compile.

The candidate process can be started before the candidate is known, so that its
start-up (Python, torch, triton, CUDA) overlaps the caller's own work:

    worker = prestart_worker()                  # first thing: it imports while the task loads
    result = verify(task, source, config, worker=worker)

    with WorkerPool() as pool:                  # a loop: each verification finds a warm process
        result = pool.verify(task, source, config)
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import secrets
import sys
import threading
import time
from pathlib import Path

from verifier import cleanup
from verifier.judge import SMALL_SHAPES_FLAG, CandidateProcess, judge
from verifier.protocols import reported_ms
from verifier.records import Task, Timing, VerifyConfig, VerifyResult
from verifier.sandbox import describe_exit, run_sandboxed
from verifier.static import check_source
from verifier.wire import PRESTART_PHASE

REVIEW_SPEEDUP = 10.0   # above this over eager, a person should look
BASELINE_JOB = [sys.executable, "-m", "verifier.baseline_job"]


def resolve_device(requested: str) -> str:
    if requested in ("cpu", "cuda"):
        if requested == "cuda":
            import torch

            if not torch.cuda.is_available():
                raise RuntimeError("--device cuda was asked for, but torch sees no CUDA GPU here")
        return requested
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def detect_backend(source: str) -> str:
    """'triton', 'cupy' or 'load_inline', from what the source builds its kernels with.

    NOTE: a label for the verdict and for the CPU's compile-only path, never a switch for a check: what the
    candidate process checks of a forward follows from what it launched (verifier.candidate)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ""
    names, modules = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Import):
            modules |= {a.name.split(".")[0] for a in node.names}
            names |= {a.name.rsplit(".", 1)[-1] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            modules.add((node.module or "").split(".")[0])
            names |= {a.name for a in node.names}   # `from torch.utils.cpp_extension import load_inline as L`
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant):
            names.add(node.args[1].value)   # getattr(cpp_extension, "load_inline") builds the same extension
    if "load_inline" in names:
        return "load_inline"
    if {"RawModule", "RawKernel", "ElementwiseKernel", "ReductionKernel"} & names:
        return "cupy"
    return "triton" if "triton" in modules or "triton" in names or "jit" in names else ""


def prestart_worker(output_cap_bytes: int = VerifyConfig.output_cap_bytes) -> CandidateProcess:
    """verify()'s sandboxed candidate process, started now, ahead of its job; give it to verify(..., worker=)."""
    return CandidateProcess(output_cap_bytes)


class WorkerPool:
    """One pre-started candidate process kept ready: each verification takes it, its successor starts after.

    take() is thread-safe (the loop verifies candidates in parallel threads on a CPU); at most one process
    waits idle. NOTE: the successor starts after the job, not beside it: its start-up imports torch and
    creates a CUDA context, and nothing of that may run on the GPU while a candidate is being timed.
    It overlaps what the loop does between verifications instead (profiling, the next proposal).
    """

    def __init__(self, output_cap_bytes: int = VerifyConfig.output_cap_bytes, warm: bool = True):
        """warm=False: no process until take() or refill() (the caller knows when the GPU is free)."""
        self.output_cap_bytes = output_cap_bytes
        self._lock = threading.Lock()
        self._closed = False
        self._ready: CandidateProcess | None = prestart_worker(output_cap_bytes) if warm else None

    def take(self) -> CandidateProcess:
        """A started process, for one verify(): the warm one if there is one, else a fresh one."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the worker pool is closed")
            worker, self._ready = self._ready, None
        if worker is None or not worker.alive:   # taken by another thread, or killed while it waited (idle limit)
            if worker is not None:
                worker.close()
            worker = prestart_worker(self.output_cap_bytes)
        return worker

    def refill(self) -> None:
        """Start the next warm process, unless one is waiting already or the pool is closed."""
        with self._lock:
            if self._closed or self._ready is not None:
                return
            self._ready = prestart_worker(self.output_cap_bytes)

    def verify(self, task: Task, source: str, config: VerifyConfig = VerifyConfig()) -> VerifyResult:
        """verify() on a warm process: the same verdict, less waiting."""
        try:
            with self.take() as worker:
                return verify(task, source, config, worker=worker)
        finally:
            self.refill()

    def close(self) -> None:
        """Stop the idle process; processes already taken end with their jobs."""
        with self._lock:
            self._closed = True
            worker, self._ready = self._ready, None
        if worker is not None:
            worker.close()

    def __enter__(self) -> "WorkerPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def verify(task: Task, source: str, config: VerifyConfig = VerifyConfig(),
           worker: CandidateProcess | None = None) -> VerifyResult:
    """Check (and on a GPU, time) one candidate. Never raises for a bad kernel.

    `worker`: a pre-started candidate process (prestart_worker) to run the job in; it is closed when verify
    returns or raises, used or not. Without one, a process is started here."""
    try:
        return _verify(task, source, config, worker).made_printable()
    finally:
        if worker is not None:
            worker.close()


def _verify(task: Task, source: str, config: VerifyConfig, worker: CandidateProcess | None) -> VerifyResult:
    from verifier.config_checks import check_verify_config

    # NOTE: kgen's misuse, so it raises: no caller (a CLI flag, the loop, a script) may verify with a setting
    # that weakens the verdict (zero trials said "correct on every trial" of none)
    check_verify_config(config)
    started = time.perf_counter()
    backend = detect_backend(source)
    device = resolve_device(config.device)

    problem = check_source(source)
    if problem:
        return VerifyResult(status=problem.status, reason=problem.reason, task=task.name, backend=backend,
                            wall_s=time.perf_counter() - started)

    if device == "cpu" and backend in ("cupy", "load_inline"):
        unchecked = not_checkable(task, backend, started)
        if unchecked is not None:
            return unchecked

    cached, baseline_problem = None, ""
    phases = {"static checks": time.perf_counter() - started}
    if device == "cuda" and config.time_it and config.baselines:
        t0 = time.perf_counter()
        try:
            cached = cached_baselines(task, config)
        except BaselineError as exc:
            baseline_problem = str(exc)
        phases["torch.compile baselines (cached after the first)"] = time.perf_counter() - t0

    built = None
    if backend == "load_inline":
        # The extension's compile, a phase of its own before the candidate process gets its job (its time is
        # the CPU's, not the GPU's), cached by source across candidates and runs (verifier.inline_build).
        from verifier import inline_build

        try:
            built = inline_build.prebuild(inline_build.plan_builds(source), device, timeout_s=config.timeout_s,
                                          output_cap_bytes=config.output_cap_bytes)
        except Exception as exc:  # noqa: BLE001 - kgen's own trouble: the candidate process builds it, as before
            built = inline_build.Prebuilt(note=f"load_inline: no build before the candidate process (kgen's own "
                                               f"failure: {type(exc).__name__}: {str(exc)[:160]})")
        if built.key or built.note:
            phases[inline_build.PHASE] = built.seconds
        if built.problem is not None:
            p = built.problem
            return VerifyResult(status=p["status"], reason=p["reason"], feedback=p["feedback"], task=task.name,
                                backend=backend, flags=[built.note] if built.note else [],
                                device="none (nvcc only)" if device == "cpu" else _gpu_name(),
                                wall_s=time.perf_counter() - started,
                                phases={**phases, "the rest (the build decided: no candidate process)":
                                        max(0.0, time.perf_counter() - started - sum(phases.values()))})

    process = worker if worker is not None else CandidateProcess(config.output_cap_bytes, prestart=False)
    prestarted = worker is not None
    try:
        result, stages = judge(task, source, config, process, device=device, backend=backend,
                               build_env=built.env if built is not None else None,
                               libraries=built.libraries if built is not None else None)
    finally:
        if worker is None:
            process.close()
    if built is not None and built.note:
        result.flags.append(built.note)
    if device == "cpu":
        interpreted = backend not in ("cupy", "load_inline")   # what ran on this CPU ran under Triton's interpreter
        result.device = "cpu (Triton interpreter)" if interpreted else "none (nvcc only)"
        if interpreted and result.ran:
            result.flags.append(task.derived_note or (SMALL_SHAPES_FLAG if task.has_small_inputs else
                                "task has no get_small_inputs(): checked on get_inputs() under the interpreter, "
                                "and nothing was timed"))
    if baseline_problem:
        result.flags.append(baseline_problem)
    if result.passed and result.timing and cached:
        for key, t in cached.items():
            if key != "eager":
                result.baselines[key] = t
    if result.passed and result.timing:
        _speedups(result)
    result.wall_s = time.perf_counter() - started
    result.phases = _phases(phases, stages, result.wall_s, prestarted)
    return result


def not_checkable(task: Task, backend: str, started: float) -> VerifyResult | None:
    """The verdict for a CUDA candidate this machine can neither run nor compile; None when nvcc can compile it.

    NOTE: decided here, before the candidate's process: nvcc failing on a torch without CUDA headers would read
    as the kernel's compile error, and nothing about the kernel would have been learnt."""
    from verifier.devices import cuda_checkable_here

    ok, why = cuda_checkable_here(backend)
    if ok:
        return None
    return VerifyResult(status="not_checkable", task=task.name, backend=backend, device="cpu (no GPU)",
                        reason=f"not checkable here: {why}; nothing was compiled or run. To check it, run kgen "
                               f"verify on a GPU machine (there it is compiled, checked and timed)",
                        wall_s=time.perf_counter() - started)


def _gpu_name() -> str:
    import torch

    return torch.cuda.get_device_name()


def _phases(parent: dict[str, float], stages: dict[str, float], wall_s: float, prestarted: bool) -> dict[str, float]:
    """Where the time went: the process's pre-start (before the job, beside the caller's own work), the
    parent's stages, the candidate process's start-up and the judge's stages, and the rest of the wall time."""
    stages = dict(stages)
    prestart = {PRESTART_PHASE: stages.pop(PRESTART_PHASE)} if PRESTART_PHASE in stages else {}
    rest = "sandbox: hand-over, rest of the start-up, exit" if prestarted else \
        "sandbox: process start, Python start-up, exit"
    known = {**parent, **stages}
    return {**prestart, **known, rest: max(0.0, wall_s - sum(known.values()))}


def _speedups(result: VerifyResult) -> None:
    cand = reported_ms(result.timing)     # the protocol's statistic: the mean for kernelbench, else the median
    result.speedups = {k: reported_ms(t) / cand for k, t in result.baselines.items() if cand > 0}
    for name, t in result.baselines.items():
        # NOTE: a call that cannot be captured in a CUDA graph is timed with events instead; for the candidate
        # the judge says so, for a baseline (often timed in another process, then cached) it is said here
        if t.method != result.timing.method:
            result.flags.append(f"{name} was timed as {t.method}, the candidate as {result.timing.method}: "
                                f"that speedup compares two timing methods")
    eager = result.speedups.get("eager")
    if eager is not None and eager > REVIEW_SPEEDUP:
        result.flags.append(f"{eager:.1f}x faster than eager: above {REVIEW_SPEEDUP:.0f}x, review by hand")


# ----------------------------------------------------------------------------------------------
# baseline cache


def baseline_key(task: Task, gpu: str, method: str = "events") -> str:
    import torch

    text = f"{gpu}|{torch.__version__}|{task.source}"
    name = task.name if method == "events" else f"{task.name}-{method}"   # events keys predate the method
    return f"{name}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


class BaselineError(RuntimeError):
    """The baselines could not be timed; the message says why (one line plus the child's last words)."""


# NOTE: a failure is remembered for the life of the process: a loop that verifies many candidates of one
# task must not recompile (and fail) the same baselines before every one of them.
_FAILED: dict[Path, str] = {}


def _baseline_failure(res) -> str:
    if res.timed_out:
        why = "timed out"
    elif res.limit:
        why = res.limit
    elif res.message:
        reason = str(res.message.get("reason") or "").strip()
        why = f"{res.message.get('status')}: {reason.splitlines()[0] if reason else 'no reason given'}"
    else:
        why = f"the process {describe_exit(res.returncode)}" + (f" ({res.channel_problem})" if res.channel_problem else "")
    last = [line for line in res.stderr.strip().splitlines() if line.strip()][-3:]
    return why + (": " + " | ".join(line.strip()[:200] for line in last) if last else "")


def cached_baselines(task: Task, config: VerifyConfig) -> dict[str, Timing]:
    """torch.compile baselines for this (GPU, task, torch): read from the cache or timed once and stored.

    Raises BaselineError, saying why, when the baselines could not be timed (nothing is cached then)."""
    import torch

    gpu = torch.cuda.get_device_name()
    path = Path(config.cache_dir) / gpu.replace(" ", "_") / f"{baseline_key(task, gpu, config.timing)}.json"
    if path.exists():
        data = json.loads(path.read_text())
        if set(data.get("compile_modes", [])) >= set(config.compile_modes):
            return {k: Timing(**v) for k, v in data["baselines"].items()}
    if path in _FAILED:
        raise BaselineError(_FAILED[path])
    # NOTE: the task goes in as a copy in a directory of the job's own: the sandbox's unprivileged uid may not
    # reach the task's path
    with cleanup.scratch_dir("kgen-baseline") as here:
        task_copy = Path(here) / "task.py"
        task_copy.write_text(task.source)
        job = {"kind": "baselines", "task_path": str(task_copy), "device": "cuda", "seed": config.seed,
               "hidden_seed": secrets.randbelow(2**31 - 1), "reps": config.reps, "warmup": config.warmup,
               "timing": config.timing,
               "compile_modes": list(config.compile_modes)}
        res = run_sandboxed(BASELINE_JOB, job, timeout_s=max(config.timeout_s, 900),
                            output_cap_bytes=config.output_cap_bytes, cwd=Path(here))
    if not res.message or res.message.get("status") != "ok":
        _FAILED[path] = f"torch.compile baselines for {task.name} not timed: {_baseline_failure(res)}"
        raise BaselineError(_FAILED[path])
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written whole and renamed into place: another process (a leaderboard worker on another GPU of the same
    # model) may be reading or writing the same entry.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"gpu": gpu, "torch": torch.__version__, "task": task.name,
                                "compile_modes": list(config.compile_modes),
                                "torch_flags": res.message.get("torch_flags"),
                                "baselines": res.message["baselines"],
                                "phases": res.message.get("phases"),
                                "measured": time.strftime("%Y-%m-%d %H:%M:%S")}, indent=2))
    os.replace(tmp, path)
    return {k: Timing(**v) for k, v in res.message["baselines"].items()}
