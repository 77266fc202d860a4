"""`kgen verify`: the printed verdict says how the kernel was timed; the worker started first never outlives it."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from kernelbench_prompts import kernelbench_prompts
from processes import alive as _alive
from agent.cli import main
from agent.commands.verify import render
from verifier.records import Timing, VerifyResult


def timed(method: str) -> VerifyResult:
    t = Timing(median_ms=0.2716, min_ms=0.26, mean_ms=0.272, p10_ms=0.265, p90_ms=0.28, reps=100,
               host_ms=0.0119, method=method)
    eager = Timing(median_ms=0.5655, min_ms=0.55, mean_ms=0.566, p10_ms=0.56, p90_ms=0.57, reps=100, method=method)
    return VerifyResult(status="ok", reason="correct on every trial", task="softmax", backend="triton",
                        device="NVIDIA H200", ran=True, trials=5, timing=t, baselines={"eager": eager},
                        speedups={"eager": 0.5655 / 0.2716}, floor_ms=0.169, wall_s=14.5)


@pytest.mark.parametrize("method, words", [("graph", "(CUDA graph replays)"),
                                           ("events", "(each call as issued, the host's cost included)")])
def test_the_candidates_time_names_its_method(method, words):
    text = render(timed(method), "softmax.py")
    line = next(x for x in text.splitlines() if x.startswith("candidate:"))
    assert "0.2716 ms median of 100 " + words in line
    assert "speedup 2.08x" in text


# ---- the worker started first


ROOT = Path(__file__).resolve().parents[2]
GOOD_KERNEL = ROOT / "tests" / "verifier" / "candidates" / "good" / "softmax.py"


@pytest.fixture
def workers(monkeypatch) -> list:
    """Every worker `kgen verify` pre-starts, held here: only the command can have stopped them."""
    import verifier.verify as verify_mod

    started = []
    real = verify_mod.prestart_worker

    def held(*args, **kwargs):
        started.append(real(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(verify_mod, "prestart_worker", held)
    return started


@pytest.mark.parametrize("case", ["malformed task", "missing kernel", "no GPU for --device cuda"])
def test_an_early_exit_is_one_line_exit_2_and_stops_the_worker(case, tmp_path, workers, capsys):
    bad_task = tmp_path / "bad.py"
    bad_task.write_text("class Model(:\n")
    argv = {"malformed task": ["verify", str(bad_task), str(GOOD_KERNEL)],
            "missing kernel": ["verify", str(ROOT / "tasks" / "softmax.py"), str(tmp_path / "nope.py")],
            "no GPU for --device cuda": ["verify", str(ROOT / "tasks" / "softmax.py"), str(GOOD_KERNEL),
                                         "--device", "cuda"]}[case]
    if case.startswith("no GPU"):
        import torch

        if torch.cuda.is_available():
            pytest.skip("there is a GPU here")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("kgen: error: ") and err.count("\n") == 1, err
    if case == "missing kernel":   # said before anything starts
        assert workers == []
        return
    assert len(workers) == 1 and not workers[0].alive
    time.sleep(0.1)
    assert not _alive(workers[0].pid)


def test_an_exchange_directory_that_is_not_writable_is_said_before_anything_starts(tmp_path, workers, monkeypatch,
                                                                                      capsys):
    monkeypatch.setenv("KGEN_EXCHANGE_DIR", str(tmp_path / "missing"))
    assert main(["verify", str(ROOT / "tasks" / "softmax.py"), str(GOOD_KERNEL), "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("kgen: error: KGEN_EXCHANGE_DIR=") and err.count("\n") == 1, err
    assert workers == []


@pytest.mark.parametrize("case, words", [("folder", "is a directory, expected a kernel .py file"),
                                         ("latin-1", "not UTF-8 text (byte 0xe9 at offset 16)")])
def test_a_kernel_path_that_is_no_kernel_file_says_what_it_is(case, words, tmp_path, workers, capsys):
    kernel = tmp_path / "kernel.py"
    if case == "folder":
        kernel.mkdir()
    else:
        kernel.write_bytes("# written in caf\u00e9 style\nclass ModelNew: pass\n".encode("latin-1"))
    started = time.monotonic()
    assert main(["verify", str(ROOT / "tasks" / "softmax.py"), str(kernel)]) == 2
    assert time.monotonic() - started < 2.0     # before the task is loaded
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1, err
    assert workers == []


def test_a_verdict_with_no_backend_or_device_prints_no_question_marks():
    result = VerifyResult(status="rejected", reason="no class ModelNew defined", task="softmax")
    head = render(result, "k.py").splitlines()[0]
    assert "?" not in head and head == "REJECTED       softmax  k.py"
    assert render(timed("graph"), "k.py").splitlines()[0].endswith("[triton on NVIDIA H200]")


def test_a_verified_kernel_ran_on_the_worker_started_first(workers, capsys):
    assert main(["verify", str(ROOT / "tasks" / "softmax.py"), str(GOOD_KERNEL), "--device", "cpu", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "ok"
    # NOTE: the phases' names, not their seconds: how long the task took to load beside the worker is the machine's
    assert "sandbox: hand-over, rest of the start-up, exit" in result["phases"]
    assert any(name.startswith("start-up: kgen") and "pre-started" in name for name in result["phases"])
    assert len(workers) == 1 and not workers[0].alive and not _alive(workers[0].pid)


# ---- --strict: the ncu cross-check


@pytest.mark.parametrize("device", ["auto", "cpu"])
def test_strict_without_a_gpu_is_refused_before_anything_runs(device, workers, capsys):
    if device == "auto":
        import torch

        if torch.cuda.is_available():
            pytest.skip("there is a GPU here")
    argv = ["verify", str(ROOT / "tasks" / "softmax.py"), str(GOOD_KERNEL), "--strict", "--device", device]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("kgen: error: --strict: the ncu cross-check needs a GPU and Nsight Compute (ncu)")
    assert "without --strict" in err and err.count("\n") == 1, err
    assert workers == []


@pytest.mark.parametrize("device_ms, code, words", [
    (0.2576, 0, "ncu cross-check: consistent (claimed 0.2716 ms per call"),
    (0.5000, 1, "ncu cross-check: inconsistent (timing inconsistent: claimed 0.2716 ms per call"),
    (None, 2, "ncu cross-check: not run (ncu may not read the GPU's performance counters"),
])
def test_strict_exits_zero_only_on_a_consistent_check(device_ms, code, words, monkeypatch, capsys):
    import contextlib

    import agent.commands.verify as command
    import profiler.crosscheck
    import verifier.verify
    from verifier import timing

    def measured(task, source, result, **kwargs):
        if device_ms is None:
            return profiler.crosscheck.not_run("ncu may not read the GPU's performance counters (ERR_NVGPUCTRPERM)")
        return timing.ncu_check(result.timing.median_ms, device_ms, kernels=1, streams=1, calls=3)

    # as on a GPU with ncu: the verdict is a timed one, the measurement ncu's stand-in, the decision the real one
    monkeypatch.setattr(command, "strict_refusal", lambda device: None)
    monkeypatch.setattr(verifier.verify, "prestart_worker", lambda: contextlib.nullcontext(None))
    monkeypatch.setattr(verifier.verify, "verify", lambda task, source, config, worker=None: timed("graph"))
    monkeypatch.setattr(profiler.crosscheck, "cross_check", measured)
    assert main(["verify", str(ROOT / "tasks" / "softmax.py"), str(GOOD_KERNEL), "--strict"]) == code
    captured = capsys.readouterr()
    assert words in captured.out
    assert captured.out.startswith("REJECTED" if code == 1 else "OK")
    if code == 2:
        assert "the strict check was not made, so this is no pass" in captured.err


# ---- a kernel this machine cannot check: exit 3, neither passed nor failed

KB_PROMPTS = kernelbench_prompts()


def test_kernelbench_cuda_example_without_nvcc_exits_3_not_checkable(tmp_path):
    import os
    import subprocess
    import sys

    if not (KB_PROMPTS / "model_new_ex_add.py").exists():
        pytest.skip("KernelBench's prompts are not on this machine")
    # a machine with no CUDA toolkit: PATH without nvcc, no CUDA_HOME
    path = os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                           if d and not (Path(d) / "nvcc").exists())
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_HOME", "CUDA_PATH")}
    env.update(PATH=path, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "agent", "verify", str(KB_PROMPTS / "model_ex_add.py"),
                           str(KB_PROMPTS / "model_new_ex_add.py"), "--device", "cpu"],
                          cwd=tmp_path, env=env, text=True, capture_output=True, timeout=120)
    assert done.returncode == 3, (done.stdout, done.stderr[-1500:])
    assert done.stdout.startswith("NOT_CHECKABLE"), done.stdout
    assert "not checkable here: no nvcc here" in done.stdout and "GPU machine" in done.stdout


@pytest.mark.parametrize("status", ["not_run", "not_checkable"])
def test_a_kernel_not_checked_here_exits_3(status, monkeypatch, capsys):
    import verifier.verify as verify_mod

    def not_checked(task, source, config, worker=None):
        if worker is not None:
            worker.close()
        return VerifyResult(status=status, reason="no GPU here", task=task.name, backend="load_inline")

    monkeypatch.setattr(verify_mod, "verify", not_checked)
    assert main(["verify", str(ROOT / "tasks" / "softmax.py"), str(GOOD_KERNEL), "--device", "cpu"]) == 3
    assert "not a verdict on the kernel" in capsys.readouterr().out


def test_a_failed_kernel_still_exits_1(monkeypatch):
    import verifier.verify as verify_mod

    def failed(task, source, config, worker=None):
        if worker is not None:
            worker.close()
        return VerifyResult(status="compile_error", reason="nvcc failed", task=task.name, backend="load_inline")

    monkeypatch.setattr(verify_mod, "verify", failed)
    assert main(["verify", str(ROOT / "tasks" / "softmax.py"), str(GOOD_KERNEL), "--device", "cpu"]) == 1
