"""Profile one candidate: Nsight Compute where it can read the GPU's counters, else the torch-profiler fallback.

    from profiler.profile import profile_candidate
    diagnosis = profile_candidate(task, source, timeout_s=300)      # a Diagnosis, never an exception
    print(diagnosis.to_text())

`profile_candidate(task, source)` writes a job for `python -m
profiler.ncu_child` (profiler/child.py), runs it under ncu once in the
verifier's sandbox, collecting the raw metrics and the sections into one
report, prints both pages from that report (`ncu --import`, no GPU work), and
returns a `Diagnosis` (profiler/diagnose.py). Where the report gives no kernel
rows it profiles again in two passes (raw metrics, then section details), as
kgen did before, and says so in the notes: on the H200 each pass cost 9-15 s,
mostly starting the profiled process (benchmarks/profiler.md). Without ncu, or
without permission to read the GPU's counters, it falls back to the torch
profiler (profiler/fallback.py) and says why in the diagnosis' notes.
"""

from __future__ import annotations

import time
from pathlib import Path

from profiler.child import output_tail, run_child, write_job
from profiler.ncu import (find_ncu, import_page, ncu_argv, ncu_export_argv, ncu_problem, parse_details_csv,
                          parse_raw_csv)
from profiler.records import Diagnosis, KernelMetrics
from verifier import cleanup


def profile_candidate(task, source: str, *, timeout_s: float = 300.0, ncu: str | None = None,
                      details: bool = True, seed: int = 0, peaks_override: str | None = None) -> Diagnosis:
    """Profile one candidate for `task` (a verifier Task) and diagnose it.

    One ncu pass over one warm forward call (raw metrics and section details
    into one report, both pages printed from it); where that gives no kernel
    rows, two passes as before (raw metrics, then the section details with
    ncu's rules). Each pass is a fresh sandboxed process with `timeout_s`.
    With details=False, the raw metrics alone, in one pass. The candidate is
    not verified here: profile a kernel that passed `verify`. A candidate that
    fails to run is a Diagnosis with bound "unknown" and the error in its
    notes, never an exception.
    """
    from profiler import diagnose as diagnose_mod
    from profiler import fallback, roofline as roofline_mod

    ncu_path = ncu or find_ncu()
    with cleanup.scratch_dir("kgen-profile") as tmp:
        workdir = Path(tmp)

        def without_counters(why: str) -> Diagnosis:
            return fallback.profile_fallback(task, source, timeout_s=timeout_s, seed=seed, workdir=workdir,
                                             peaks_override=peaks_override, notes=[why])

        if ncu_path is None:
            return without_counters("ncu not found (PATH, KGEN_NCU, /opt/nvidia/nsight-compute): no hardware counters")
        job_path = write_job(workdir, task, source, mode="ncu", count_work=True, seed=seed)
        passes: dict[str, float] = {}
        notes: list[str] = []
        kernels: list[KernelMetrics] = []
        raw_text, details_text = "", None
        two_passes = not details
        if details:
            report = workdir / "profile.ncu-rep"
            t0 = time.perf_counter()
            run, child = run_child(ncu_export_argv(ncu_path, report, job_path), job_path, workdir, timeout_s)
            passes["ncu (metrics and sections, one pass)"] = time.perf_counter() - t0
            problem = ncu_problem(run.stdout + "\n" + run.stderr)
            if problem:
                return without_counters(problem)
            if report.exists():
                t0 = time.perf_counter()
                raw_text = import_page(ncu_path, report, "raw", timeout_s)
                details_text = import_page(ncu_path, report, "details", timeout_s)
                passes["ncu --import (both pages)"] = time.perf_counter() - t0
                kernels = parse_raw_csv(raw_text)
            if not kernels and not run.timed_out and not child.get("error"):
                # An ncu that could not export, or a report it could not read back: profile the old way.
                tail = output_tail(raw_text or run.stderr or run.stdout, 1)
                notes.append("one ncu pass into a report gave no kernel rows"
                             + (f" ({tail[0][:160]})" if tail else "") + ": profiled again in two passes")
                two_passes, details_text = True, None
                # written again: the profiled run could write to its folder, candidate.py included
                job_path = write_job(workdir, task, source, mode="ncu", count_work=True, seed=seed)
        if two_passes:
            raw_log = workdir / "raw.csv"
            t0 = time.perf_counter()
            run, child = run_child(ncu_argv(ncu_path, "raw", raw_log, job_path), job_path, workdir, timeout_s)
            passes["ncu raw metrics"] = time.perf_counter() - t0
            raw_text = (_read_log(raw_log) if raw_log.exists() else "") + "\n" + run.stdout
            problem = ncu_problem(raw_text + "\n" + run.stderr)
            if problem:
                return without_counters(problem)
            kernels = parse_raw_csv(raw_text)
        if run.timed_out:
            notes.append(f"ncu run timed out after {timeout_s:g} s")
        if child.get("error"):
            notes.append(f"the candidate failed under ncu: {child['error']}")
        if not kernels:
            if not notes:
                tail = output_tail(run.stderr or run.stdout or raw_text)
                notes.append("ncu profiled no kernel in the NVTX range 'kgen' (does forward launch a kernel?)"
                             + (": " + " | ".join(tail) if tail else ""))
            return Diagnosis(bound="unknown", source="ncu", notes=notes, passes_s=passes)
        kernel_details = parse_details_csv(details_text) if details_text else []
        if details_text is not None and not kernel_details:
            notes.append("ncu's section details (and its advice) are missing from the report")
        if details and two_passes:
            job_path = write_job(workdir, task, source, mode="ncu", count_work=False, seed=seed)
            details_log = workdir / "details.csv"
            t0 = time.perf_counter()
            drun, dchild = run_child(ncu_argv(ncu_path, "details", details_log, job_path), job_path, workdir,
                                     timeout_s)
            passes["ncu section details"] = time.perf_counter() - t0
            details_text = (_read_log(details_log) if details_log.exists() else "") + "\n" + drun.stdout
            kernel_details = parse_details_csv(details_text)
            if not kernel_details:
                notes.append("ncu's section details (and its advice) are missing: the second pass "
                             + ("timed out" if drun.timed_out else "gave no rows"))
        roof = roofline_mod.from_child(child, measured_ms=sum(k.duration_us or 0 for k in kernels) / 1e3,
                                       peaks_override=peaks_override)
        if roof is None and child.get("device"):
            from verifier.physics import peaks_note
            notes.append(peaks_note(child["device"], peaks_override))
        diagnosis = diagnose_mod.diagnose(kernels, kernel_details, roof)
        diagnosis.notes.extend(notes)
        diagnosis.passes_s = passes
        return diagnosis


def _read_log(path: Path) -> str:
    """ncu's log, which the profiled child could have replaced: never through a link (to a file of root's)."""
    from verifier.tensorfile import read_text_nofollow

    try:
        return read_text_nofollow(path)
    except OSError:
        return ""
