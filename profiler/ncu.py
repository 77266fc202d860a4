"""Nsight Compute: the metrics kgen asks for, the command lines that ask, and the parsing of what ncu prints.

- the metrics (METRICS) and sections (SECTIONS) collected, and where ncu is
  (`find_ncu`: PATH, KGEN_NCU, /opt/nvidia/nsight-compute) and what stops it
  (`ncu_problem`: no permission to read the counters, no GPU);
- the command lines: one pass into a report (`ncu_export_argv`), its pages
  printed back with no GPU work (`ncu_import_argv`, `import_page`), or one
  page a pass (`ncu_argv`);
- the parser, `parse_raw_csv` (`--csv --page raw --metrics METRICS`: one row
  per kernel launch) and `parse_details_csv` (`--csv --page details
  --print-details all` for SECTIONS: one row per section metric, plus ncu's
  rule rows). Both take ncu's output as it comes: the program's own stdout
  lines and ncu's `==PROF==` lines interleaved, numbers with thousands
  separators ("3,175,520"), a units row, "n/a" for metrics with no value.

Running a candidate under it, and falling back without it, is
profiler/profile.py's; the profiled child's job file is profiler/child.py's.

Parse a captured file: `python -m profiler.ncu RAW.csv [DETAILS.csv]`.
"""

from __future__ import annotations

import csv
import glob
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from profiler.child import NVTX_RANGE
from profiler.records import KernelMetrics, Rule

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
        stream="/".join(row.get(column, "").strip() for column in ("Process ID", "Context", "Stream")),
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


# The cross-check's pass (profiler/crosscheck.py): the device time of each launch and nothing else, so that
# ncu needs one pass and replays no kernel.
TIME_METRICS = ("gpu__time_duration.sum",)


def ncu_time_argv(ncu: str, log_file: Path, job_path: Path) -> list[str]:
    """The command line for the cross-check's pass over the child: gpu__time_duration of every launch in the
    range, caches left as the calls leave them (`--cache-control none`: ncu flushes nothing, so a kernel is
    never slower under it than in the calls it checks)."""
    return (_collect(ncu) + ["--cache-control", "none", "--csv", "--print-units", "base", "--log-file", str(log_file),
                             "--page", "raw", "--metrics", ",".join(TIME_METRICS)] + _child(job_path))


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
