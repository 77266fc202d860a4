"""`kgen profile`: why a kernel is as fast as it is.

    kgen profile TASK KERNEL [--json] [--timeout S]
        runs the candidate's forward once under Nsight Compute (or, without it,
        the torch profiler) on this machine's GPU and prints the diagnosis:
        what bounds it, the top stall reasons with their fixes, occupancy,
        waves, registers, spills, bank conflicts, ncu's own advice, roofline.
    kgen profile --ncu-csv RAW.csv [--details DETAILS.csv] [--json]
        diagnoses ncu output captured elsewhere (`ncu --csv --page raw
        --metrics ...`, and optionally `--page details --print-details all`);
        needs no task and no GPU.

Profile a kernel that passed `kgen verify`: profiling does not check results.
Exit codes: 0 diagnosed; 1 nothing to diagnose (no kernel ran, no rows
parsed); 2 bad usage, a missing file, or no GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("profile", help="diagnose why a kernel is slow (Nsight Compute, roofline)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("task", nargs="?", help="task file (KernelBench format)")
    p.add_argument("kernel", nargs="?", help="candidate file defining ModelNew")
    p.add_argument("--ncu-csv", metavar="RAW.csv", help="diagnose captured `ncu --csv --page raw` output instead")
    p.add_argument("--details", metavar="DETAILS.csv", help="with --ncu-csv: the `--page details` output too")
    p.add_argument("--json", action="store_true", help="print the Diagnosis as JSON")
    p.add_argument("--raw", action="store_true", help="with --json: include every raw counter of each kernel")
    p.add_argument("--timeout", type=float, default=300.0, help="wall-clock limit per profiling pass, s (default 300)")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.ncu_csv:
        if args.task or args.kernel:
            return _usage("--ncu-csv diagnoses a captured file: give no TASK or KERNEL with it")
        return _from_csv(args)
    if args.details:
        return _usage("--details goes with --ncu-csv")
    if not args.task or not args.kernel:
        return _usage("give TASK and KERNEL, or --ncu-csv RAW.csv")
    return _from_task(args)


def _usage(message: str) -> int:
    print(f"kgen profile: error: {message}", file=sys.stderr)
    return 2


def _read(path: str) -> str | None:
    p = Path(path)
    if not p.is_file():
        print(f"kgen profile: error: {path}: no such file", file=sys.stderr)
        return None
    return p.read_text(errors="replace")


def _from_csv(args) -> int:
    from profiler.diagnose import diagnose
    from profiler.ncu import parse_details_csv, parse_raw_csv

    raw = _read(args.ncu_csv)
    if raw is None:
        return 2
    details = None
    if args.details:
        text = _read(args.details)
        if text is None:
            return 2
        details = parse_details_csv(text)
    kernels = parse_raw_csv(raw)
    if not kernels:
        print(f"kgen profile: {args.ncu_csv}: no kernel rows found (expected `ncu --csv --page raw` output)",
              file=sys.stderr)
        return 1
    _print(diagnose(kernels, details), args)
    return 0


def _from_task(args) -> int:
    from verifier.task import TaskError, load_task

    task = load_task(args.task)
    kernel = Path(args.kernel)
    if not kernel.is_file():
        raise TaskError(f"{args.kernel}: no such kernel file")
    try:
        import torch
        has_gpu = torch.cuda.is_available()
    except ImportError:
        has_gpu = False
    if not has_gpu:
        print("kgen profile: error: profiling runs the kernel on a CUDA GPU and none is visible here; "
              "to diagnose ncu output captured elsewhere use `kgen profile --ncu-csv RAW.csv "
              "[--details DETAILS.csv]`", file=sys.stderr)
        return 2
    from profiler.profile import profile_candidate

    diagnosis = profile_candidate(task, kernel.read_text(errors="replace"), timeout_s=args.timeout)
    _print(diagnosis, args)
    return 0 if diagnosis.kernels else 1


def _print(diagnosis, args) -> None:
    if args.json:
        print(json.dumps(diagnosis.to_dict(raw=getattr(args, "raw", False)), indent=2))
    else:
        print(diagnosis.to_text())
