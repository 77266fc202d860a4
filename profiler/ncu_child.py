"""The program the profiler runs, under ncu or alone, to profile one candidate.

    python -m profiler.ncu_child JOB.json

The job (written by profiler/child.py `write_job`) names the task file, the
candidate file, where to write the result, and a mode:

- "ncu": build the task's inputs and the candidate's ModelNew on the GPU, call
  forward to warm up (compilation, autotuning; `warmup_calls`, one for a
  profile), then `profiled_calls` more inside the NVTX range "kgen", which is
  the one ncu's `--nvtx-include kgen/` profiles (one for a profile, several for
  the cross-check of a claimed time, profiler/crosscheck.py);
- "fallback": the same two calls, the second under the torch profiler; then
  the kernel list with times and launch resources from its trace, and each
  Triton kernel's compile metadata (registers, spills, shared memory) and SASS
  instruction counts (cuobjdump --dump-sass on its cubin).

With `count_work`, it also counts the reference Model's FLOPs and bytes on the
same inputs (verifier/physics.py), after the profiled call. The result is one
JSON object, sent over the sandbox's signed channel (verifier/channel.py) when
there is one and written to the job's result_path; a candidate that raises is
reported there as `error`, and the exit status is 1.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path


def load_module(name: str, path: str):
    """Import a file as a module (a real file, so Triton can read its kernels' source)."""
    from verifier.task import import_task_module

    return import_task_module(Path(path), name)


def _to_cuda(obj):
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.cuda()
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_cuda(o) for o in obj)
    return obj


def build(job: dict):
    """(reference Model, ModelNew, inputs) on the GPU, parameters matched as the verifier does."""
    import torch

    task = load_module("kgen_task", job["task_path"])
    if job.get("prebuilt"):   # the verification's load_inline libraries, copied beside the candidate
        from verifier.inline_build import use_lent_libraries

        use_lent_libraries(job["prebuilt"])
    candidate = load_module("kgen_candidate", job["candidate_path"])
    init = task.get_init_inputs() if hasattr(task, "get_init_inputs") else []
    torch.manual_seed(job["seed"])
    reference = task.Model(*init)
    torch.manual_seed(job["seed"])
    model = candidate.ModelNew(*init)
    # Same-named, same-shaped parameters and buffers start equal, so data-dependent
    # kernels see the values they would see in verification.
    ref_state = reference.state_dict()
    own = {k: v for k, v in model.state_dict().items() if k in ref_state and ref_state[k].shape == v.shape}
    with torch.no_grad():
        for name, value in own.items():
            value.copy_(ref_state[name])
    torch.manual_seed(job["seed"] + 1)
    inputs = _to_cuda(list(task.get_inputs()))
    return reference.cuda(), model.cuda(), inputs, candidate


def run(job: dict, result: dict) -> None:
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device visible to the profiling process")
    result["device"] = torch.cuda.get_device_name()
    props = torch.cuda.get_device_properties(0)
    result["device_props"] = {
        "sm_count": props.multi_processor_count,
        "regs_per_sm": getattr(props, "regs_per_multiprocessor", 65536),
        "max_threads_per_sm": getattr(props, "max_threads_per_multi_processor", 2048),
        "shared_per_sm": getattr(props, "shared_memory_per_multiprocessor", 0),
        "l2_bytes": getattr(props, "L2_cache_size", 0),
    }
    reference, model, inputs, candidate = build(job)
    with torch.no_grad():
        for _ in range(job["warmup_calls"]):
            model(*inputs)                  # warm-up: compile, autotune, load modules
        torch.cuda.synchronize()
        if job["mode"] == "ncu":
            with torch.cuda.nvtx.range(job["nvtx_range"]):
                for _ in range(job["profiled_calls"]):
                    model(*inputs)
                torch.cuda.synchronize()
        else:
            result["kernels"] = profiled_kernels(model, inputs, job["trace_path"])
            result["triton"] = triton_kernels(candidate)
    if job.get("count_work"):
        from verifier.physics import count_work

        result["work"] = count_work(reference, inputs).to_dict()


def profiled_kernels(model, inputs, trace_path: str) -> list[dict]:
    """Every GPU kernel of one forward call, from the torch profiler's trace."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        model(*inputs)
        torch.cuda.synchronize()
    prof.export_chrome_trace(trace_path)
    events = json.loads(Path(trace_path).read_text()).get("traceEvents", [])
    kernels = []
    for ev in events:
        if ev.get("cat") != "kernel":
            continue
        args = ev.get("args", {})
        kernels.append({
            "name": ev.get("name", ""),
            "duration_us": float(ev.get("dur", 0.0)),
            "grid": args.get("grid"),
            "block": args.get("block"),
            "registers_per_thread": args.get("registers per thread"),
            "shared_memory": args.get("shared memory"),
            "est_occupancy_pct": args.get("est. achieved occupancy %"),
        })
    return kernels


def triton_kernels(candidate) -> list[dict]:
    """Compile metadata and SASS counts of every Triton kernel the candidate compiled."""
    try:
        from triton.runtime.jit import JITFunction
    except ImportError:
        return []
    from profiler.fallback import sass_summary

    out = []
    seen = set()
    for obj in list(vars(candidate).values()):
        fn = obj
        while not isinstance(fn, JITFunction) and hasattr(fn, "fn"):   # Autotuner, Heuristics wrap a JITFunction
            fn = fn.fn
        if not isinstance(fn, JITFunction) or id(fn) in seen:
            continue
        seen.add(id(fn))
        # NOTE: triton 3.x keeps compiled kernels per device in device_caches[device][0] (key -> CompiledKernel).
        for caches in getattr(fn, "device_caches", {}).values():
            for compiled in list(caches[0].values()):
                if hasattr(compiled, "result"):
                    compiled = compiled.result()
                meta = compiled.metadata
                entry = {
                    "name": compiled.name,
                    "n_regs": getattr(compiled, "n_regs", None),
                    "n_spills": getattr(compiled, "n_spills", None),
                    "shared": getattr(meta, "shared", None),
                    "num_warps": getattr(meta, "num_warps", None),
                    "num_stages": getattr(meta, "num_stages", None),
                }
                cubin = compiled.asm.get("cubin") if hasattr(compiled, "asm") else None
                sass = dump_sass(cubin) if cubin else None
                entry["sass"] = sass_summary(sass) if sass else None
                out.append(entry)
    return out


def dump_sass(cubin: bytes) -> str | None:
    """`cuobjdump --dump-sass` of a cubin, or None when cuobjdump is nowhere to be found."""
    tool = shutil.which("cuobjdump")
    if tool is None:
        try:
            from triton import knobs
            tool = knobs.nvidia.cuobjdump.path
        except Exception:
            tool = None
    if not tool:
        return None
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        done = subprocess.run([tool, "--dump-sass", f.name], capture_output=True, text=True, timeout=60)
    return done.stdout if done.returncode == 0 else None


def open_channel():
    """The sandbox's signed result channel, when this process was started by it, else None.

    The key arrives on stdin, read once before any candidate code is imported.
    """
    if "KGEN_RESULT_FD" not in os.environ:
        return None
    try:
        hello = json.loads(sys.stdin.readline() or "{}")
        sys.stdin.close()
        from verifier.channel import ChildChannel

        return ChildChannel(int(os.environ.pop("KGEN_RESULT_FD")), bytes.fromhex(hello["key"]))
    except (ValueError, KeyError, OSError):
        return None


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__)
        return 2
    channel = open_channel()
    job = json.loads(Path(argv[0]).read_text())
    result: dict = {"device": None, "work": None, "error": None}
    status = 0
    try:
        run(job, result)
    except BaseException as exc:       # the candidate's failure is data for the parent
        frames = traceback.format_exception(type(exc), exc, exc.__traceback__)
        result["error"] = f"{type(exc).__name__}: {exc}"[:1000]
        result["traceback"] = "".join(frames)[-4000:]
        status = 1
    # NOTE: both ways back: the signed channel is preferred, but under ncu the
    # channel's inherited descriptor may not reach this process; the file then serves.
    Path(job["result_path"]).write_text(json.dumps(result))
    if channel is not None:
        try:
            channel.send(result)
        except OSError:
            pass
    return status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
