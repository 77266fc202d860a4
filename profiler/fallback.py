"""A diagnosis without Nsight Compute: the torch profiler, compile metadata and SASS.

Where ncu is missing or may not read the GPU's counters, kgen still knows:
- each kernel of one forward call and its time, grid, block, registers and
  shared memory (the torch profiler's trace);
- for Triton kernels, the compiler's own numbers: registers, spills, shared
  memory, warps, stages (the compiled kernel objects in the JITFunction's
  per-device cache);
- the SASS (`cuobjdump --dump-sass` on the cubin): how many global loads are
  16-byte vectors, whether tensor cores (HMMA/HGMMA) are used at all;
- theoretical occupancy and waves, computed from those resources;
- the roofline, when the GPU is in the peak table.
No stall reasons and no speed-of-light counters: the diagnosis says so.

`profile_fallback(task, source)` runs `python -m profiler.ncu_child` in
"fallback" mode in the verifier's sandbox; `diagnose_fallback(child_result)`
turns its report into a `Diagnosis` with source "fallback".
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path

from profiler.diagnose import no_tensor_cores_advice
from profiler.records import Diagnosis, KernelMetrics, Occupancy, Roofline

_OPCODE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T\d]+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)")

MAX_BLOCKS_PER_SM = 32      # Ampere and Hopper; the torch properties do not report it
RESERVED_SHARED_PER_BLOCK = 1024    # bytes the driver reserves per block (sm_80 and later)


def sass_summary(sass: str) -> dict[str, int]:
    """Instruction counts that matter for diagnosis, from `cuobjdump --dump-sass` text.

    global_loads: LDG of any width; global_loads_128: the 16-byte ones (LDG.E.128,
    LDG.E.ENL2.256 counted too); async_copies: LDGSTS (cp.async) and UTMALDG (TMA);
    global_stores / global_stores_128; hmma, hgmma (warpgroup MMA), imma;
    shared_loads (LDS, LDSM); instructions: all.
    """
    counts = dict.fromkeys(("instructions", "global_loads", "global_loads_128", "global_stores",
                            "global_stores_128", "async_copies", "shared_loads", "hmma", "hgmma", "imma"), 0)
    for m in _OPCODE.finditer(sass):
        op = m.group(1)
        parts = op.split(".")
        base = parts[0]
        counts["instructions"] += 1
        wide = "128" in parts or "256" in parts
        if base == "LDG":
            counts["global_loads"] += 1
            counts["global_loads_128"] += wide
        elif base == "STG":
            counts["global_stores"] += 1
            counts["global_stores_128"] += wide
        elif base in ("LDGSTS", "UTMALDG", "UBLKCP"):
            counts["async_copies"] += 1
        elif base in ("LDS", "LDSM"):
            counts["shared_loads"] += 1
        elif base == "HMMA":
            counts["hmma"] += 1
        elif base in ("HGMMA", "UTCHMMA", "UTCQMMA"):
            counts["hgmma"] += 1
        elif base in ("IMMA", "IGMMA"):
            counts["imma"] += 1
    return counts


def theoretical_occupancy(threads_per_block: int, registers: int | None, shared_bytes: int | None,
                          props: dict) -> Occupancy | None:
    """Blocks per SM each resource allows, and the warps they add up to, as % of the SM's maximum."""
    if not threads_per_block or not props.get("max_threads_per_sm"):
        return None
    max_warps = props["max_threads_per_sm"] // 32
    warps = math.ceil(threads_per_block / 32)
    limits = {"warps": max_warps // warps, "blocks": MAX_BLOCKS_PER_SM}
    if registers:
        regs_per_warp = math.ceil(registers * 32 / 256) * 256      # allocated per warp, 256 at a time
        limits["registers"] = props.get("regs_per_sm", 65536) // (regs_per_warp * warps)
    if shared_bytes and props.get("shared_per_sm"):
        limits["shared_mem"] = props["shared_per_sm"] // (shared_bytes + RESERVED_SHARED_PER_BLOCK)
    least = min(limits.values())
    return Occupancy(achieved_pct=None, theoretical_pct=100.0 * least * warps / max_warps,
                     limiter=" and ".join(r for r, v in limits.items() if v == least), limits=limits)


def _prod(dims) -> int | None:
    if not dims:
        return None
    if isinstance(dims, (int, float)):
        return int(dims)
    return int(math.prod(int(d) for d in dims))


def diagnose_fallback(child: dict, roofline: Roofline | None = None, notes: list[str] | None = None) -> Diagnosis:
    """A Diagnosis from the fallback child's report; notes say what was not available."""
    notes = list(notes or [])
    notes.append("no ncu counters: no stall reasons, no speed-of-light %; times from the torch profiler")
    raw = child.get("kernels") or []
    total = sum(k.get("duration_us") or 0 for k in raw)
    props = child.get("device_props") or {}
    triton = {t["name"]: t for t in child.get("triton") or []}
    kernels = []
    for i, k in enumerate(raw):
        km = KernelMetrics(name=k.get("name", ""), id=i, duration_us=k.get("duration_us"),
                           time_share=(k.get("duration_us") or 0) / total if total else 0.0,
                           block_size=_prod(k.get("block")), grid_size=_prod(k.get("grid")),
                           registers_per_thread=k.get("registers_per_thread"),
                           shared_mem_bytes=k.get("shared_memory"), sm_count=props.get("sm_count"))
        meta = triton.get(km.name)
        if meta:
            km.registers_per_thread = meta.get("n_regs") or km.registers_per_thread
            km.spills = meta.get("n_spills")
            if km.shared_mem_bytes is None:
                km.shared_mem_bytes = meta.get("shared")
        kernels.append(km)
    kernels.sort(key=lambda k: -k.time_share)

    bound = roofline.roof if roofline else "unknown"
    d = Diagnosis(bound=bound, source="fallback", kernels=kernels, roofline=roofline, notes=notes,
                  total_us=total or None)
    if roofline:
        notes.append(f"bound from the roofline ({roofline.roof} roof), not from counters")
    if child.get("error"):
        notes.append(f"the candidate failed while profiling: {child['error']}")
    if not kernels:
        if not child.get("error"):
            notes.append("the torch profiler saw no GPU kernel in one forward call")
        return d

    by_name: dict[str, float] = {}
    for k in kernels:
        by_name[k.name] = by_name.get(k.name, 0.0) + (k.duration_us or 0.0)
    dominant = max(by_name, key=by_name.get)
    main = max((k for k in kernels if k.name == dominant), key=lambda k: k.duration_us or 0)
    d.kernel, d.duration_us = main.name, by_name[dominant]
    d.registers, d.spills = main.registers_per_thread, main.spills
    d.occupancy = theoretical_occupancy(main.block_size or 0, main.registers_per_thread, main.shared_mem_bytes, props)
    if d.occupancy and main.grid_size and props.get("sm_count"):
        per_wave = min(d.occupancy.limits.values()) * props["sm_count"]
        if per_wave:
            d.waves_per_sm = main.grid_size / per_wave
            from profiler.diagnose import tail_effect
            d.tail_effect = tail_effect(d.waves_per_sm)
    if d.spills:
        d.findings.append(f"Register spills ({d.spills}): fewer live values (smaller tiles, fewer stages), "
                          f"or more registers per thread (fewer warps)")
    meta = triton.get(main.name)
    sass = (meta or {}).get("sass")
    if sass:
        d.findings.extend(sass_findings(sass, roofline))
    elif meta is None:
        notes.append(f"no compile metadata or SASS for {main.name} (not a Triton kernel of the candidate)")
    elif meta.get("sass") is None:
        notes.append("no SASS: cuobjdump not found")
    if d.occupancy and d.occupancy.theoretical_pct is not None:
        notes.append("occupancy is theoretical, computed from registers, shared memory and block size")
    return d


def sass_findings(sass: dict[str, int], roofline: Roofline | None) -> list[str]:
    """What the instruction mix says: how wide the global loads are, whether tensor cores run."""
    loads, wide, copies = sass.get("global_loads", 0), sass.get("global_loads_128", 0), sass.get("async_copies", 0)
    mma = sass.get("hmma", 0) + sass.get("hgmma", 0) + sass.get("imma", 0)
    line = f"SASS: {wide} of {loads} global loads are 16-byte (LDG.128)"
    if copies:
        line += f", {copies} async copies (cp.async/TMA)"
    if mma:
        line += f"; tensor cores used ({'HGMMA (wgmma)' if sass.get('hgmma') else 'HMMA (mma.sync)'}, {mma} instructions)"
    else:
        line += "; no tensor-core instructions"
    out = [line]
    if loads and wide < loads / 2 and not copies:
        out.append("Narrow global loads: vectorize to 16 bytes per thread (contiguous, aligned runs of "
                   "4 fp32 / 8 bf16; Triton needs sizes and strides divisible by 16 to prove alignment)")
    if not mma and roofline is not None and roofline.roof == "compute":
        out.append(no_tensor_cores_advice(roofline))
    return out


def profile_fallback(task, source: str, *, timeout_s: float = 300.0, seed: int = 0, workdir: Path | None = None,
                     peaks_override: str | None = None, notes: list[str] | None = None) -> Diagnosis:
    """Run the candidate once under the torch profiler (sandboxed) and diagnose what that shows."""
    from profiler import roofline as roofline_mod
    from profiler.child import output_tail, run_child, write_job
    from verifier import cleanup

    notes = list(notes or [])
    with cleanup.scratch_dir("kgen-fallback") as tmp:
        workdir = Path(workdir or tmp)
        job_path = write_job(workdir, task, source, mode="fallback", count_work=True, seed=seed)
        argv = [sys.executable, "-m", "profiler.ncu_child", str(job_path)]
        run, child = run_child(argv, job_path, workdir, timeout_s)
    if run.timed_out:
        notes.append(f"the profiling run timed out after {timeout_s:g} s")
    elif not child:
        tail = " | ".join(output_tail(run.stderr or run.stdout))
        notes.append(f"the profiling run ended without a report (exit {run.returncode}): {tail}")
    measured = sum(k.get("duration_us") or 0 for k in child.get("kernels") or []) / 1e3
    roof = roofline_mod.from_child(child, measured_ms=measured or None, peaks_override=peaks_override)
    if roof is None and child.get("device"):
        from verifier.physics import peaks_note
        notes.append(peaks_note(child["device"], peaks_override))
    return diagnose_fallback(child, roof, notes)
