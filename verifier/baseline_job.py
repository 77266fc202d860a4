"""The torch.compile baselines, timed in a sandboxed process of their own: `python -m verifier.baseline_job`.

Run by verifier.verify.cached_baselines, once per (GPU, task, torch), cached. Trusted code only: no
candidate is imported here, so its one result message (over the sandbox's signed channel,
verifier.channel) is believed. The sandbox is for what torch.compile may do to a process (its compile
workers, a crash in Inductor), not for trust. It reads one line {"key", "job"} on stdin; the job names
the task file, the timing method, reps, warm-up and compile modes; it times eager and each mode on the
same fresh inputs (verifier.inputs, from a seed drawn by the caller) with verifier.timing.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import traceback


def main() -> None:
    hello = json.loads(sys.stdin.readline())
    sys.stdin.close()
    from verifier.channel import ChildChannel

    chan = ChildChannel(int(os.environ.pop("KGEN_RESULT_FD")), bytes.fromhex(hello["key"]))
    phases: dict[str, float] = {}
    try:
        message = baselines(hello["job"], phases)
    except BaseException as exc:  # noqa: BLE001 - the caller must hear why
        message = {"status": "crashed", "reason": f"{type(exc).__name__}: {str(exc)[:300]}",
                   "feedback": traceback.format_exc()[-1500:]}
    message["phases"] = [[name, secs] for name, secs in phases.items()]
    sys.stdout.flush()
    sys.stderr.flush()
    chan.send(message)
    os._exit(0)


def time_compiled(model, buffers, refresh, mode: str, job: dict, flush) -> dict:
    import torch

    from verifier import timing

    key = "compile" if mode == "default" else f"compile-{mode.replace('-no-cudagraphs', '')}"
    compiled = torch.compile(model, mode=None if mode == "default" else mode)
    t, _, _ = timing.time_call(lambda: compiled(*buffers), refresh, method=job.get("timing", "events"),
                               reps=job["reps"], warmup=job["warmup"], flush=flush)
    return {key: t.__dict__}


def baselines(job: dict, phases: dict) -> dict:
    import torch

    from verifier import timing
    from verifier.inputs import build_seeded, make_inputs, refresh_seed
    from verifier.task import import_task_module

    last = time.perf_counter()

    def mark(name: str) -> None:
        nonlocal last
        now = time.perf_counter()
        phases[name] = now - last
        last = now

    # NOTE: torch.compile's generated kernels are built in a cache of this job alone: the shared Triton
    # cache is writable by candidates, and a baseline must not load a kernel that a candidate left there.
    os.environ["TRITON_CACHE_DIR"] = os.path.join(tempfile.mkdtemp(prefix="baseline-"), "triton")
    task_mod = import_task_module(os.path.abspath(job["task_path"]), "kgen_task")
    init = list(task_mod.get_init_inputs())
    model = build_seeded(lambda: task_mod.Model(*init), job["seed"], "cuda").to("cuda")
    gen, seed = task_mod.get_inputs, job["hidden_seed"]
    buffers = make_inputs(gen, refresh_seed(seed, -100), "cuda")

    def refresh(rep: int) -> None:
        fresh = make_inputs(gen, refresh_seed(seed, rep), "cuda")
        for b, f in zip(buffers, fresh):
            if isinstance(b, torch.Tensor):
                b.copy_(f)

    # Baselines use what users get: torch's defaults (cuBLAS TF32 off, cuDNN TF32 on).
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = True
    flags = {"cuda.matmul.allow_tf32": False, "cudnn.allow_tf32": True}
    flush = timing.l2_flush_buffer()
    mark("start, import torch, build the model")
    out = {"torch_flags": flags, "device": torch.cuda.get_device_name(), "ran": True}
    with torch.no_grad():
        started = time.perf_counter()
        t, _, _ = timing.time_call(lambda: model(*buffers), refresh, method=job.get("timing", "events"),
                                   reps=job["reps"], warmup=job["warmup"], flush=flush)
        base = {"eager": t.__dict__}
        mark("time eager")
        for mode in job.get("compile_modes") or []:
            base.update(time_compiled(model, buffers, refresh, mode, job, flush))
            mark(f"compile and time {mode}")
    out["baselines"] = base
    out["wall_s"] = time.perf_counter() - started
    out["status"], out["reason"] = "ok", "baselines timed"
    return out


if __name__ == "__main__":
    main()
