"""Leaderboards: every task of a suite optimized (or a folder of kernels scored), in one table.

    kgen leaderboard tasks/suite-small.txt --max-iters 4            # all GPUs, one worker each
    kgen leaderboard tasks/ --gpus 0,1 --name nightly                # two GPUs; rerun the same line to resume
    kgen leaderboard tasks/ --verify-only kernels/ --name mine       # score existing kernels, no proposer
    kgen leaderboard tasks/ --executor ray --ray-address auto        # GPU calls on a Ray cluster's GPUs
    python -m agent.board.job JOB.json                               # one task (what each local worker runs)

The rooms: `records.py` (rows, the summary, fast_p), `files.py` (where boards
live, load, save, resume, config changes, kernels to score), `render.py`
(markdown, terminal), `job.py` (one task in a process of its own), `executor.py`
(the `Executor` interface), `local.py` (the local executor: GPU-pinned
subprocess workers), `ray.py` (the Ray executor: loops here, GPU calls on a
cluster's GPU actors), `runner.py` (the pending tasks as jobs on an executor).

EXECUTORS names the executors `kgen leaderboard --executor` offers; each
factory takes the board's device ("cuda" or "cpu"; for ray the request, as the
cluster's GPUs decide), --gpus and --workers, ray also its own flags.
Runs themselves are ordinary runs of the store, so `kgen show RUN` and
`kgen report RUN` work on every row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from agent.registry import Registry

if TYPE_CHECKING:   # NOTE: no module of the package at import: `python -m agent.board.job` must load job.py once
    from agent.board.executor import Executor

EXECUTORS: "Registry[Executor]" = Registry("executor", flag="--executor")


@EXECUTORS.register("local")
def _local(*, device: str, gpus: Iterable[int] | None, workers: int | None) -> "Executor":
    """One process per task on this machine: one worker per GPU (--gpus), or --workers N on a CPU."""
    import os

    from agent.board.local import LocalExecutor, plan_workers

    gpu_count = 0
    if device == "cuda":
        import torch

        gpu_count = torch.cuda.device_count()
    return LocalExecutor(plan_workers(device, gpus=gpus, workers=workers, gpu_count=gpu_count,
                                      visible=os.environ.get("CUDA_VISIBLE_DEVICES")))


@EXECUTORS.register("ray")
def _ray(*, device: str, gpus: Iterable[int] | None, workers: int | None, address: str | None = None,
         loops_per_gpu: int | None = None, accelerator_type: str | None = None) -> Executor:
    """Loops here, GPU calls on a Ray cluster's GPUs (agent.board.ray); `device` is the request (auto|cpu|cuda)."""
    from agent.board.ray import LOOPS_PER_GPU, RayExecutor
    from agent.board.records import LeaderboardError

    if gpus:
        raise LeaderboardError("--gpus picks this machine's GPUs; on a Ray cluster use --workers N (GPU actors) "
                               "or --accelerator-type")
    return RayExecutor(address=address, device=device, workers=workers, accelerator_type=accelerator_type,
                       loops_per_gpu=LOOPS_PER_GPU if loops_per_gpu is None else loops_per_gpu)
