"""Nsight Compute: run a candidate under `ncu` and parse what it prints.

Two halves:

- the parser, `parse_raw_csv` (`--csv --page raw --metrics METRICS`: one row
  per kernel launch) and `parse_details_csv` (`--csv --page details
  --print-details all` for SECTIONS: one row per section metric, plus ncu's
  rule rows). Both take ncu's output as it comes: the program's own stdout
  lines and ncu's `==PROF==` lines interleaved, numbers with thousands
  separators ("3,175,520"), a units row, "n/a" for metrics with no value;
- the runner, `profile_candidate(task, source)`: writes a job for
  `python -m profiler.ncu_child` (which runs ModelNew.forward once to warm up,
  then once inside the NVTX range "kgen"), runs it under ncu once in the
  verifier's sandbox, collecting the raw metrics and the sections into one
  report, prints both pages from that report (`ncu --import`, no GPU work), and
  returns a `Diagnosis`. Where the report gives no kernel rows it profiles again
  in two passes (raw metrics, then section details), as kgen did before, and
  says so in the notes: on the H200 each pass cost 9-15 s, mostly starting the
  profiled process (benchmarks/profiler.md). Without ncu, or without
  permission to read the GPU's counters, it falls back to the torch profiler
  (profiler/fallback.py) and says why in the diagnosis' notes.

Parse a captured file: `python -m profiler.ncu RAW.csv [DETAILS.csv]`.
"""

from __future__ import annotations

import csv
import glob
import json
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from profiler.records import Diagnosis, KernelMetrics, Rule

# The raw-page metrics: speed-of-light, occupancy and its limiters, launch shape,
# tensor-pipe use, shared-memory bank conflicts, and every warp-stall reason.
METRICS = (
    "gpu__time_duration.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "l1tex__throughput.avg.pct_of_peak_sustained_active",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "sm__maximum_warps_per_active_cycle_pct",
    "launch__occupancy_limit_registers",
    "launch__occupancy_limit_shared_mem",
    "launch__occupancy_limit_warps",
    "launch__occupancy_limit_blocks",
    "launch__registers_per_thread",
    "launch__shared_mem_per_block_static",
    "launch__shared_mem_per_block_dynamic",
    "launch__block_size",
    "launch__grid_size",
    "launch__waves_per_multiprocessor",
    "smsp__average_warp_latency_per_inst_issued.ratio",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
    "smsp__sass_inst_executed_op_global_ld.sum",
    "smsp__sass_inst_executed_op_shared_ld.sum",
) + tuple(
    f"smsp__average_warps_issue_stalled_{reason}_per_issue_active.ratio"
    for reason in ("barrier", "branch_resolving", "dispatch_stall", "drain", "gmma", "imc_miss",
                   "lg_throttle", "long_scoreboard", "math_pipe_throttle", "membar", "mio_throttle",
                   "misc", "no_instruction", "not_selected", "selected", "short_scoreboard",
                   "sleeping", "tex_throttle", "wait")
)

SECTIONS = ("SpeedOfLight", "LaunchStats", "Occupancy", "WarpStateStats",
            "MemoryWorkloadAnalysis", "ComputeWorkloadAnalysis", "SchedulerStats")

NVTX_RANGE = "kgen"     # the child wraps the profiled forward call in this range

_STALL = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")

# Scale to base units (ns for time, bytes for sizes) whatever ncu's --print-units chose.
_TIME_NS = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6,
            "s": 1e9, "second": 1e9}
_BYTES = {"byte": 1, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12,
          "kb": 1e3, "mb": 1e6, "gb": 1e9, "kib": 1024, "mib": 1024 ** 2, "gib": 1024 ** 3}


@dataclass
class KernelDetails:
    """One launch's section metrics and rule results from the details page."""

    name: str
    id: int
    metrics: dict[str, float | str] = field(default_factory=dict)   # "Section Name/Metric Name" -> value
    rules: list[Rule] = field(default_factory=list)

    def get(self, section: str, metric: str) -> float | None:
        value = self.metrics.get(f"{section}/{metric}")
        return value if isinstance(value, float) else None


# ---------------------------------------------------------------- parsing

def parse_number(text: str | None) -> float | None:
    """ncu's number ("3,175,520", "79.11", "n/a", "", "no data") as a float, or None."""
    if text is None:
        return None
    text = text.strip().replace(",", "")
    if not text or text.lower() in ("n/a", "na", "no data", "-", "nan"):
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _records(text: str) -> list[list[str]]:
    """The CSV records in ncu's output, skipping every line that is not one.

    ncu quotes every field, so a record starts with a double quote; anything
    else (the program's own prints, "==PROF==" and "==WARNING==" lines) is
    skipped. A record whose quotes are not balanced at the line's end goes on
    on the next line (a field with a newline in it).
    """
    records, pending = [], ""
    for line in text.splitlines():
        if not pending and not line.startswith('"'):
            continue
        pending = f"{pending}\n{line}" if pending else line
        if pending.count('"') % 2:
            continue
        try:
            records.extend(csv.reader([pending]))
        except csv.Error:
            pass
        pending = ""
    return records


def _int(value: float | None) -> int | None:
    return int(round(value)) if value is not None else None


def parse_raw_csv(text: str) -> list[KernelMetrics]:
    """Every kernel launch in a `--csv --page raw` output, time shares filled in.

    A launch's time share is its gpu__time_duration over the sum of all
    launches' durations (0 where ncu gave no duration). A metric missing from
    the header, or printed as "n/a", is None in the typed fields.
    """
    header: list[str] | None = None
    units: dict[str, str] = {}
    kernels: list[KernelMetrics] = []
    for rec in _records(text):
        if rec and rec[0] == "ID":
            header, units = rec, {}
            continue
        if header is None:
            continue
        if len(rec) == len(header) + 1 and rec[-1] == "":
            rec = rec[:-1]          # a trailing comma
        if len(rec) != len(header):
            continue                # a stray line that happens to start with a quote
        if rec[0] == "" and not units:
            units = dict(zip(header, rec))
            continue
        if not rec[0].strip().isdigit():
            continue
        kernels.append(_kernel_from_row(dict(zip(header, rec)), units))
    total = sum(k.duration_us for k in kernels if k.duration_us)
    for k in kernels:
        k.time_share = (k.duration_us or 0.0) / total if total else 0.0
    return kernels


def _kernel_from_row(row: dict[str, str], units: dict[str, str]) -> KernelMetrics:
    def num(metric: str) -> float | None:
        return parse_number(row.get(metric))

    def time_us(metric: str) -> float | None:
        value = num(metric)
        if value is None:
            return None
        return value * _TIME_NS.get(units.get(metric, "ns").strip().lower(), 1.0) / 1e3

    def size_bytes(metric: str) -> int | None:
        value = num(metric)
        if value is None:
            return None
        return int(value * _BYTES.get(units.get(metric, "byte").strip().lower(), 1))

    stalls = {}
    for column, value in row.items():
        m = _STALL.match(column)
        if m and parse_number(value) is not None:
            stalls[m.group(1)] = parse_number(value)
    limits = {}
    for what in ("registers", "shared_mem", "warps", "blocks"):
        value = num(f"launch__occupancy_limit_{what}")
        if value is not None:
            limits[what] = int(value)
    static, dynamic = (size_bytes("launch__shared_mem_per_block_static"),
                       size_bytes("launch__shared_mem_per_block_dynamic"))
    # Keep the kernel's own metrics; the device's attributes are the same for every row.
    raw = {k: v for k, v in row.items()
           if "__" in k and (not k.startswith("device__attribute_")
                             or k in ("device__attribute_display_name", "device__attribute_clock_rate",
                                      "device__attribute_multiprocessor_count"))}
    return KernelMetrics(
        name=row.get("Kernel Name", "") or row.get("Function Name", ""),
        id=int(row.get("ID", "0").strip() or 0),
        duration_us=time_us("gpu__time_duration.sum"),
        block_size=_int(num("launch__block_size")),
        grid_size=_int(num("launch__grid_size")),
        sm_sol_pct=num("sm__throughput.avg.pct_of_peak_sustained_elapsed"),
        mem_sol_pct=num("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"),
        dram_pct=num("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
        l1_pct=num("l1tex__throughput.avg.pct_of_peak_sustained_active"),
        l2_pct=num("lts__throughput.avg.pct_of_peak_sustained_elapsed"),
        achieved_occupancy_pct=num("sm__warps_active.avg.pct_of_peak_sustained_active"),
        theoretical_occupancy_pct=num("sm__maximum_warps_per_active_cycle_pct"),
        occupancy_limits=limits,
        registers_per_thread=_int(num("launch__registers_per_thread")),
        shared_mem_bytes=(static or 0) + (dynamic or 0) if static is not None or dynamic is not None else None,
        waves_per_sm=num("launch__waves_per_multiprocessor"),
        tensor_pct=num("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"),
        lsu_pct=num("sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active"),
        bank_conflicts=_int(num("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum")),
        global_loads=_int(num("smsp__sass_inst_executed_op_global_ld.sum")),
        shared_loads=_int(num("smsp__sass_inst_executed_op_shared_ld.sum")),
        dram_read_bytes=size_bytes("dram__bytes_read.sum"),
        dram_write_bytes=size_bytes("dram__bytes_write.sum"),
        warp_latency_cycles=num("smsp__average_warp_latency_per_inst_issued.ratio"),
        sm_count=_int(num("launch__sm_count") or num("device__attribute_multiprocessor_count")),
        clock_khz=num("device__attribute_clock_rate"),
        stalls=stalls,
        raw=raw,
    )


def parse_details_csv(text: str) -> list[KernelDetails]:
    """Every launch's section metrics and rules in a `--csv --page details` output.

    Metric rows are keyed "Section Name/Metric Name" (the first row of a name
    wins: later ones repeat it in a chart's body); rule rows become `Rule`s
    with ncu's estimated speedup where it gives one.
    """
    header: list[str] | None = None
    by_id: dict[int, KernelDetails] = {}
    for rec in _records(text):
        if rec and rec[0] == "ID":
            header = rec
            continue
        if header is None or not rec or not rec[0].strip().isdigit():
            continue
        row = dict(zip(header, rec))     # metric rows stop after "Metric Value"; rule rows run to the end
        if "Metric Name" not in row and "Rule Name" not in row:
            continue
        kid = int(rec[0])
        det = by_id.setdefault(kid, KernelDetails(name=row.get("Kernel Name", ""), id=kid))
        if row.get("Rule Name"):
            det.rules.append(Rule(name=row["Rule Name"], type=row.get("Rule Type", ""),
                                  text=" ".join(row.get("Rule Description", "").split()),
                                  est_speedup_pct=parse_number(row.get("Estimated Speedup")),
                                  section=row.get("Section Name", ""), kernel=det.name))
        elif row.get("Metric Name"):
            key = f"{row.get('Section Name', '')}/{row['Metric Name']}"
            if key not in det.metrics:
                value = parse_number(row.get("Metric Value"))
                det.metrics[key] = value if value is not None else row.get("Metric Value", "")
    return [by_id[k] for k in sorted(by_id)]


# ---------------------------------------------------------------- running

def find_ncu() -> str | None:
    """The ncu executable: $KGEN_NCU, then PATH, then the usual install folders."""
    if os.environ.get("KGEN_NCU"):
        return os.environ["KGEN_NCU"]
    found = shutil.which("ncu")
    if found:
        return found
    for pattern in ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu",
                    "/usr/local/cuda-*/bin/ncu", "/usr/local/cuda/nsight-compute-*/ncu"):
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[-1]
    return None


def ncu_problem(output: str) -> str | None:
    """Why ncu could not read the GPU's counters, from its output, or None."""
    if "ERR_NVGPUCTRPERM" in output:
        return ("ncu may not read the GPU's performance counters (ERR_NVGPUCTRPERM): run as root, or "
                "load the driver with NVreg_RestrictProfilingToAdminUsers=0")
    if "LibraryNotLoaded" in output:
        return ("ncu could not load its profiling library on this machine (LibraryNotLoaded): "
                "counters are unavailable here (a sandboxed or virtualised GPU, or a driver mismatch)")
    m = re.search(r"==ERROR==\s*(.+)", output)
    if m and "profiler" in m.group(1).lower():
        return f"ncu failed: {m.group(1).strip()}"
    return None


def _collect(ncu: str) -> list[str]:
    """What every profiling run of ncu shares: the "kgen" NVTX range only, clocks left to the card."""
    return [ncu, "--clock-control", "none", "--nvtx", "--nvtx-include", f"{NVTX_RANGE}/", "--target-processes", "all"]


def _child(job_path: Path) -> list[str]:
    return [sys.executable, "-m", "profiler.ncu_child", str(job_path)]


def _sections() -> list[str]:
    return [arg for section in SECTIONS for arg in ("--section", section)]


def _page(page: str) -> list[str]:
    """The CSV page to print: "raw" (the METRICS, one row per launch) or "details" (sections and rules)."""
    if page == "raw":
        return ["--page", "raw", "--metrics", ",".join(METRICS)]
    return ["--page", "details", "--print-details", "all"]


def ncu_argv(ncu: str, page: str, log_file: Path, job_path: Path) -> list[str]:
    """The command line for one ncu pass ("raw" or "details") over the child."""
    return (_collect(ncu) + ["--csv", "--print-units", "base", "--log-file", str(log_file)] + _page(page)
            + (_sections() if page != "raw" else []) + _child(job_path))


def ncu_export_argv(ncu: str, report: Path, job_path: Path) -> list[str]:
    """The command line for one ncu pass over the child that collects the raw metrics and the
    sections into one report file (`report`, ending in .ncu-rep)."""
    return (_collect(ncu) + ["--export", str(report), "--force-overwrite", "--metrics", ",".join(METRICS)]
            + _sections() + _child(job_path))


def ncu_import_argv(ncu: str, report: Path, page: str) -> list[str]:
    """The command line that prints one page ("raw" or "details") of a report as CSV."""
    return [ncu, "--import", str(report), "--csv", "--print-units", "base"] + _page(page)


def import_page(ncu: str, report: Path, page: str, timeout_s: float) -> str:
    """One page of a report as ncu prints it, or "" (with ncu's complaint) when it would not."""
    import subprocess

    # Reading a report runs no candidate code and needs no GPU: a plain subprocess with a time limit.
    try:
        done = subprocess.run(ncu_import_argv(ncu, report, page), capture_output=True, text=True,
                              errors="replace", timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"==ERROR== ncu --import failed: {exc}"
    return done.stdout + ("\n" + done.stderr if done.returncode else "")


def write_job(workdir: Path, task, source: str, *, mode: str, count_work: bool, seed: int = 0) -> Path:
    """Write the candidate and the child's job file into `workdir`; return the job's path."""
    candidate = workdir / "candidate.py"
    candidate.write_text(source)
    job = {
        "task_path": str(Path(task.path).resolve()),
        "candidate_path": str(candidate),
        "result_path": str(workdir / f"result-{mode}.json"),
        "mode": mode,                   # "ncu": one forward in the NVTX range; "fallback": torch profiler
        "count_work": count_work,       # also count the reference's FLOPs and bytes
        "seed": seed,
        "nvtx_range": NVTX_RANGE,
        "trace_path": str(workdir / "trace.json"),
    }
    path = workdir / f"job-{mode}.json"
    path.write_text(json.dumps(job))
    return path


def run_child(argv: list[str], job_path: Path, workdir: Path, timeout_s: float):
    """Run argv in the verifier's sandbox; (SandboxResult, the child's report or {}).

    The report is the child's signed channel message; where that did not come
    back (ncu stands between the sandbox and the child), the file it wrote.
    """
    from verifier.sandbox import run_sandboxed

    job = json.loads(job_path.read_text())
    # The sandbox puts the repository on PYTHONPATH, so `-m profiler.ncu_child` imports.
    result = run_sandboxed(argv, job, timeout_s=timeout_s, output_cap_bytes=256_000, cwd=workdir)
    child = result.message or {}
    result_path = Path(job["result_path"])
    if not child and result_path.exists():
        try:
            child = json.loads(result_path.read_text())
        except json.JSONDecodeError:
            child = {}
    return result, child


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
    with tempfile.TemporaryDirectory(prefix="kgen-profile-") as tmp:
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
                tail = (raw_text or run.stderr or run.stdout).strip().splitlines()[-1:]
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
            raw_text = (raw_log.read_text(errors="replace") if raw_log.exists() else "") + "\n" + run.stdout
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
                tail = (run.stderr or run.stdout or raw_text).strip().splitlines()[-3:]
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
            details_text = (details_log.read_text(errors="replace") if details_log.exists() else "") + "\n" + drun.stdout
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


def main(argv: list[str]) -> int:
    from profiler.diagnose import diagnose

    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 2
    kernels = parse_raw_csv(Path(argv[0]).read_text(errors="replace"))
    details = parse_details_csv(Path(argv[1]).read_text(errors="replace")) if len(argv) > 1 else None
    print(diagnose(kernels, details).to_text())
    return 0 if kernels else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
