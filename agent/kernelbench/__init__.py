"""KernelBench in and out: its problem files, its sample files, its result files.

    kgen leaderboard ../shared/kernelbench/KernelBench/level1 --problems 1-20,23     # numeric order, a selection
    kgen leaderboard KernelBench/level1 --verify-only runs/my_run --name mine        # its generated samples scored
    kgen export kernelbench mine -o out/                                             # its eval_results.json + baselines

- `names.py` — problem numbers and levels from file and folder names, numeric ordering of a suite's
  folder, the `--problems 1-20,23` selection, and KernelBench's sample file names
  (`level_{L}_problem_{P}_sample_{S}_kernel.py`).
- `samples.py` — matches a folder of samples to a suite's tasks for `--verify-only` and scores every
  sample of a task as one run (one attempt per sample, the best reported).
- `export.py` — writes a board as KernelBench's `eval_results.json` (one per level) and its baseline-time
  JSON, and reads both back, so that KernelBench's own analysis runs on kgen's results.
"""
