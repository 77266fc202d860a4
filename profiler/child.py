"""The profiled child process, as the parent sees it: the job file it is given, and how it is run and read back.

    from profiler.child import run_child, write_job
    job = write_job(workdir, task, source, mode="fallback", count_work=True)
    run, report = run_child([sys.executable, "-m", "profiler.ncu_child", str(job)], job, workdir, timeout_s=300)

The child itself is profiler/ncu_child.py: it loads the task and the
candidate, runs forward once to warm up and once inside the NVTX range
NVTX_RANGE (mode "ncu"), or under the torch profiler (mode "fallback"), and
reports back over the verifier's signed channel, or in the job's result file
where ncu stands between the sandbox and it. It runs in the verifier's
sandbox (verifier.sandbox), which bounds its time and output.
"""

from __future__ import annotations

import json
from pathlib import Path

NVTX_RANGE = "kgen"     # the child wraps the profiled forward call in this range


def write_job(workdir: Path, task, source: str, *, mode: str, count_work: bool, seed: int = 0,
              warmup_calls: int = 1, profiled_calls: int = 1) -> Path:
    """Write the candidate and the child's job file into `workdir`; return the job's path.

    `warmup_calls` forward calls run before the profiled ones (compilation, autotuning, the clocks);
    `profiled_calls` run inside the NVTX range (mode "ncu") or the torch profiler (one, in "fallback")."""
    from verifier.tensorfile import write_fresh

    # NOTE: written fresh (never through a link an earlier child planted in the same directory); the task as a
    # copy beside the candidate: the sandbox's unprivileged uid may not reach the task's own path
    candidate = workdir / "candidate.py"
    write_fresh(candidate, source.encode())
    task_copy = workdir / "task.py"
    write_fresh(task_copy, Path(task.path).read_bytes())
    job = {
        "task_path": str(task_copy),
        "candidate_path": str(candidate),
        "result_path": str(workdir / f"result-{mode}.json"),
        "mode": mode,                   # "ncu": one forward in the NVTX range; "fallback": torch profiler
        "count_work": count_work,       # also count the reference's FLOPs and bytes
        "seed": seed,
        "warmup_calls": warmup_calls,
        "profiled_calls": profiled_calls,
        "nvtx_range": NVTX_RANGE,
        "trace_path": str(workdir / "trace.json"),
    }
    path = workdir / f"job-{mode}.json"
    write_fresh(path, json.dumps(job).encode())
    return path


def run_child(argv: list[str], job_path: Path, workdir: Path, timeout_s: float):
    """Run argv in the verifier's sandbox; (SandboxResult, the child's report or {}).

    The report is the child's signed channel message; where that did not come
    back (ncu stands between the sandbox and the child), the file it wrote.
    """
    from verifier.sandbox import run_sandboxed
    from verifier.tensorfile import read_text_nofollow

    job = json.loads(job_path.read_text())
    env, job["prebuilt"] = _built_extensions(job, workdir)
    # The sandbox puts the repository on PYTHONPATH, so `-m profiler.ncu_child` imports.
    result = run_sandboxed(argv, job, timeout_s=timeout_s, output_cap_bytes=256_000, cwd=workdir, extra_env=env)
    child = result.message or {}
    result_path = Path(job["result_path"])
    if not child and result_path.exists():
        try:
            child = json.loads(read_text_nofollow(result_path))
        except (OSError, json.JSONDecodeError):
            child = {}
    return result, child


def _built_extensions(job: dict, workdir: Path) -> tuple[dict, list]:
    """(the variables under which the candidate's load_inline finds its extension built by its verification, the
    libraries lent to it as files in workdir) from verifier.inline_build, so that the profiled child does not
    compile it again; ({}, []) otherwise."""
    try:
        source = Path(job["candidate_path"]).read_text()
        if "load_inline" not in source:
            return {}, []
        from verifier.inline_build import built_env, built_libraries, lend_copies, lends_library

        if lends_library():   # the child runs as the sandbox's unprivileged uid: a copy of the library it reads
            return {}, lend_copies(built_libraries(source, "cuda"), workdir)
        return built_env(source, "cuda"), []
    except Exception:  # noqa: BLE001 - only a shortcut: without it the child builds the extension itself
        return {}, []


def output_tail(text: str, lines: int = 3) -> list[str]:
    """The last `lines` lines of a process's output: what a note quotes when the process gave no report
    (printable: the candidate wrote that output, and the note reaches a terminal and a prompt)."""
    from verifier.records import printable

    return [printable(line) for line in text.strip().splitlines()[-lines:]]
