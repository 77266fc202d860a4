"""Leaderboards: every task of a suite optimized (or a folder of kernels scored), in one table.

    kgen leaderboard tasks/suite-small.txt --max-iters 4            # all GPUs, one worker each
    kgen leaderboard tasks/ --gpus 0,1 --name nightly                # two GPUs; rerun the same line to resume
    kgen leaderboard tasks/ --verify-only kernels/ --name mine       # score existing kernels, no proposer
    python -m agent.board.job JOB.json                               # one task (what each local worker runs)

The rooms: `records.py` (rows, the summary, fast_p), `files.py` (where boards
live, load, save, resume, config changes, kernels to score), `render.py`
(markdown, terminal), `job.py` (one task in a process of its own), `executor.py`
(the `Executor` interface), `local.py` (the local executor: GPU-pinned
subprocess workers), `runner.py` (the pending tasks as jobs on an executor).

EXECUTORS names the executors `kgen leaderboard --executor` offers; each
factory takes the board's device ("cuda" or "cpu"), --gpus and --workers.
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
