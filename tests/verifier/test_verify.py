"""End to end through the sandbox: known-good kernels pass, known-bad ones get the right status and reason.

Each case is a real candidate file under tests/verifier/candidates/, run by
the verifier exactly as `kgen verify` runs it (CPU: Triton interpreter on the
task's small inputs; CUDA sources compiled with nvcc, not run).
"""

import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kernelbench_prompts import kernelbench_prompts
from processes import alive as _alive
from verifier.records import VerifyConfig
from verifier.task import load_task
from verifier.verify import WorkerPool, prestart_worker, verify
from verifier.candidate import PRESTART_PHASE

ROOT = Path(__file__).resolve().parents[2]
CANDIDATES = Path(__file__).resolve().parent / "candidates"
CPU = VerifyConfig(device="cpu", timeout_s=120)

GOOD_TRITON = ["softmax", "log_softmax", "layernorm", "rmsnorm", "gelu", "pointwise_chain", "sum_dim", "matmul",
               "swiglu", "cross_entropy", "cumsum", "max_dim", "mean_dim", "transpose"]
KERNELBENCH = Path(__file__).resolve().parent / "kernelbench"


def run(task: str, candidate: Path, config: VerifyConfig = CPU):
    return verify(load_task(ROOT / "tasks" / f"{task}.py"), candidate.read_text(), config)


@pytest.mark.parametrize("task", GOOD_TRITON)
def test_known_good_triton_candidate_passes(task):
    result = run(task, CANDIDATES / "good" / f"{task}.py")
    assert result.status == "ok", (result.reason, result.feedback[-800:])
    assert result.ran and result.trials == 5
    assert result.timing is None  # nothing is timed without a GPU
    assert "cpu (Triton interpreter)" in result.device


@pytest.mark.parametrize("name, status, words", [
    ("wrong_result", "mismatch", "elements differ"),
    ("triton_compile_error", "compile_error", "ModelNew.forward"),
    ("runtime_error", "runtime_error", "in ModelNew.forward"),
    ("torch_fallback", "rejected", "torch did the work"),
    ("no_modelnew", "rejected", "no class ModelNew"),
    ("mutates_input", "rejected", "input 0"),
])
def test_known_bad_candidate_gets_status_and_reason(name, status, words):
    result = run("softmax", CANDIDATES / "bad" / f"{name}.py")
    assert result.status == status, (result.status, result.reason)
    assert words in result.reason, result.reason


def test_a_tensor_printed_in_forward_is_named_as_the_host_read_it_is():
    result = run("gelu", CANDIDATES / "bad" / "print_output_values.py")
    assert result.status == "rejected", (result.status, result.reason)
    assert "Tensor.__repr__" in result.reason and "print its shape instead" in result.reason, result.reason
    assert "switched off" not in result.reason


def test_mismatch_feedback_shows_indices_and_values():
    result = run("softmax", CANDIDATES / "bad" / "wrong_result.py")
    assert "first mismatching indices" in result.feedback
    assert "got" in result.feedback and "expected" in result.feedback


@pytest.mark.parametrize("name", ["hang", "hang_kernel"])
def test_hang_times_out_and_kgen_returns(name):
    config = VerifyConfig(device="cpu", timeout_s=15)
    result = run("softmax", CANDIDATES / "bad" / f"{name}.py", config)
    assert result.status == "timeout"
    assert "process group was killed" in result.reason
    assert result.wall_s < 40


def test_cuda_compile_error_reports_nvcc_message():
    result = run("softmax", CANDIDATES / "bad" / "cuda_compile_error.py")
    assert result.status == "compile_error", result.reason
    assert "nvcc failed" in result.feedback + result.reason
    assert "error" in result.feedback


def test_cupy_candidate_compiles_but_is_not_run_without_gpu():
    cupy_files = sorted((CANDIDATES / "cuda").glob("*cupy*.py"))
    assert cupy_files, "a cupy candidate is expected under candidates/cuda/"
    task = cupy_files[0].stem.split("_cupy")[0]
    result = run(task, cupy_files[0])
    assert result.status == "not_run", (result.reason, result.feedback[-600:])
    assert "nothing was run" in result.reason and not result.ran


def test_kernelbench_task_and_triton_solution_pass_unchanged():
    # KernelBench files carry no kgen extras: no get_small_inputs, no ATOL.
    task = load_task(KERNELBENCH / "19_ReLU.py")
    assert not task.has_small_inputs
    result = verify(task, (KERNELBENCH / "19_ReLU_triton.py").read_text(), CPU)
    assert result.status == "ok", (result.reason, result.feedback[-600:])
    assert any("get_small_inputs" in f for f in result.flags)


@pytest.mark.slow
def test_kernelbench_load_inline_solution_compiles_with_nvcc():
    task = load_task(KERNELBENCH / "19_ReLU.py")
    result = verify(task, (KERNELBENCH / "19_ReLU_cuda.py").read_text(), VerifyConfig(device="cpu", timeout_s=400))
    assert result.status == "not_run", (result.reason, result.feedback[-600:])
    assert "load_inline" in result.reason


def test_cli_exit_codes(tmp_path):
    import subprocess
    import sys

    good = subprocess.run([sys.executable, "-m", "agent", "verify", "tasks/softmax.py",
                           str(CANDIDATES / "good" / "softmax.py"), "--device", "cpu"],
                          cwd=ROOT, capture_output=True, text=True)
    assert good.returncode == 0 and "OK" in good.stdout and "not timed" in good.stdout
    bad = subprocess.run([sys.executable, "-m", "agent", "verify", "tasks/softmax.py",
                          str(CANDIDATES / "bad" / "wrong_result.py"), "--json"],
                         cwd=ROOT, capture_output=True, text=True)
    import json

    assert bad.returncode == 1 and json.loads(bad.stdout)["status"] == "mismatch"


@pytest.mark.gpu
@pytest.mark.parametrize("task", ["softmax", "layernorm", "rmsnorm", "cross_entropy", "pointwise_chain", "swiglu"])
def test_known_good_candidate_is_timed_on_gpu(task):
    result = run(task, CANDIDATES / "good" / f"{task}.py", VerifyConfig(device="cuda", baselines=False, reps=30))
    assert result.status == "ok", (result.reason, result.feedback[-600:])
    assert result.timing.median_ms > 0 and "eager" in result.speedups
    assert result.floor_ms is None or result.floor_ms < result.timing.median_ms


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["softmax_cupy", "softmax_load_inline", "softmax_load_inline_default_stream"])
def test_cuda_candidates_run_on_gpu(name):
    result = run("softmax", CANDIDATES / "cuda" / f"{name}.py", VerifyConfig(device="cuda", baselines=False, reps=30))
    assert result.status == "ok", (result.reason, result.feedback[-600:])
    assert result.timing.median_ms > 0
    if name == "softmax_load_inline_default_stream":   # the legacy default stream and a device-wide wait in forward
        assert result.timing.method == "events" and any("not capturable in a CUDA graph" in f or "capture missed" in f
                                                        for f in result.flags), result.flags


def test_failed_baselines_say_why_and_are_not_retried(tmp_path, monkeypatch):
    # A real baselines job in the real sandbox, on a machine whose torch has no CUDA: it fails in the
    # child, and the caller gets one line saying why instead of silently missing torch.compile numbers.
    import torch

    import verifier.verify as verify_mod

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Test GPU")
    monkeypatch.setattr(verify_mod, "_FAILED", {})
    calls = []
    real = verify_mod.run_sandboxed
    monkeypatch.setattr(verify_mod, "run_sandboxed", lambda *a, **k: calls.append(1) or real(*a, **k))
    task = load_task(ROOT / "tasks" / "softmax.py")
    config = VerifyConfig(device="cuda", cache_dir=tmp_path, timeout_s=120)
    with pytest.raises(verify_mod.BaselineError) as first:
        verify_mod.cached_baselines(task, config)
    message = str(first.value)
    assert message.startswith("torch.compile baselines for softmax not timed: ")
    assert "CUDA" in message and "\n" not in message
    with pytest.raises(verify_mod.BaselineError, match="softmax not timed"):
        verify_mod.cached_baselines(task, config)
    assert len(calls) == 1
    assert not list(tmp_path.rglob("*.json"))


def test_verdict_says_where_the_time_went():
    r = run("softmax", CANDIDATES / "good" / "softmax.py")
    assert r.passed, r.reason
    stages = list(r.phases)
    assert stages.index("start and import torch") < stages.index("import task and candidate") \
        < stages.index("correctness trials (first call compiles)") < stages.index("hidden re-check")
    assert stages[-1] == "sandbox: process start, Python start-up, exit"
    assert all(secs >= 0 for secs in r.phases.values())
    assert abs(sum(r.phases.values()) - r.wall_s) < 0.5


@pytest.mark.gpu
@pytest.mark.parametrize("path", [CANDIDATES / "good" / "softmax.py", CANDIDATES / "cuda" / "softmax_cupy.py"],
                         ids=lambda p: p.stem)
def test_graph_timing_on_gpu(path):
    config = VerifyConfig(device="cuda", baselines=False, reps=30, timing="graph")
    result = run("softmax", path, config)
    assert result.status == "ok", (result.reason, result.feedback[-600:])
    assert result.baselines["eager"].method == "graph"
    if path.stem == "softmax":      # a Triton launch on torch's current stream is captured
        assert result.timing.method == "graph", result.flags
    elif result.timing.method == "events":      # cupy may launch on a stream of its own: then it says so
        assert any("not capturable in a CUDA graph" in f or "the CUDA graph capture missed" in f
                   for f in result.flags), result.flags
    assert result.timing.median_ms > 0


# ---- pre-started workers


def test_prestarted_worker_passes_a_good_candidate_and_says_where_its_start_went():
    worker = prestart_worker()
    r = verify(load_task(ROOT / "tasks" / "softmax.py"), (CANDIDATES / "good" / "softmax.py").read_text(), CPU,
               worker=worker)
    assert r.passed and r.trials == 5, (r.reason, r.feedback[-800:])
    stages = list(r.phases)
    assert stages[0] == PRESTART_PHASE and r.phases[PRESTART_PHASE] > 0
    assert "start and import torch" not in stages   # done before the job: not counted again in it
    assert stages.index("import task and candidate") < stages.index("correctness trials (first call compiles)")
    assert stages[-1] == "sandbox: hand-over, rest of the start-up, exit"
    job = sum(secs for name, secs in r.phases.items() if name != PRESTART_PHASE)
    assert abs(job - r.wall_s) < 0.5
    assert any("from the job's hand-over" in note for note in r.isolation)
    assert not worker.alive and not _alive(worker.pid)


def test_static_check_failure_stops_the_prestarted_worker():
    worker = prestart_worker()
    r = verify(load_task(ROOT / "tasks" / "softmax.py"), (CANDIDATES / "bad" / "no_modelnew.py").read_text(), CPU,
               worker=worker)
    assert r.status == "rejected" and "no class ModelNew" in r.reason
    assert not r.isolation   # decided before any process ran
    assert not worker.alive and not _alive(worker.pid)


def test_pool_hands_out_distinct_workers_and_leaves_nothing_behind():
    pool = WorkerPool()
    first, second = pool.take(), pool.take()
    pids = [first.pid, second.pid]
    assert pids[0] != pids[1] and first.alive and second.alive
    first.close()
    second.close()
    pool.close()
    time.sleep(0.2)
    assert not any(_alive(pid) for pid in pids)
    leftover = [int(p) for p in os.listdir("/proc") if p.isdigit() and _is_worker_of(int(p), os.getpid())]
    assert leftover == []
    with pytest.raises(RuntimeError):
        pool.take()


def _is_worker_of(pid: int, parent: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return ppid == parent and b"verifier.candidate" in cmdline and _alive(pid)


def test_pool_take_is_thread_safe():
    with WorkerPool() as pool:
        with ThreadPoolExecutor(max_workers=4) as threads:
            taken = list(threads.map(lambda _: pool.take(), range(4)))
        assert len({w.pid for w in taken}) == 4
        for w in taken:
            w.close()


def test_pool_starts_the_next_worker_only_after_the_job(monkeypatch):
    # a successor warming up (torch import, CUDA context) beside a job would run while that job is timed
    import verifier.verify as verify_mod

    during = []

    def job(task, source, config, worker=None):
        during.append([p for p in _worker_pids() if p != worker.pid])
        worker.close()
        return "verdict"

    monkeypatch.setattr(verify_mod, "verify", job)
    with WorkerPool() as pool:
        assert pool.verify(None, "", CPU) == "verdict"
        assert during == [[]]          # no other worker while the job ran
        assert len(_worker_pids()) == 1   # its successor, started once the job ended
    time.sleep(0.2)
    assert _worker_pids() == []


def _worker_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and _is_worker_of(int(p), os.getpid())]


def test_pool_verifies_candidate_after_candidate():
    task = load_task(ROOT / "tasks" / "softmax.py")
    with WorkerPool() as pool:
        good = pool.verify(task, (CANDIDATES / "good" / "softmax.py").read_text(), CPU)
        bad = pool.verify(task, (CANDIDATES / "bad" / "wrong_result.py").read_text(), CPU)
    assert good.passed, (good.reason, good.feedback[-800:])
    assert bad.status == "mismatch"
    assert PRESTART_PHASE in good.phases and PRESTART_PHASE in bad.phases


# ---- CUDA candidates this machine cannot check -------------------------------------------------------

# KernelBench's own CUDA example pair (its few-shot "add"): a load_inline elementwise add and its problem
KB_PROMPTS = kernelbench_prompts()
KB_ADD, KB_ADD_CUDA = KB_PROMPTS / "model_ex_add.py", KB_PROMPTS / "model_new_ex_add.py"


def _kernelbench_add_pair():
    if not KB_ADD_CUDA.exists():
        pytest.skip("KernelBench's prompts are not on this machine")
    return load_task(KB_ADD), KB_ADD_CUDA.read_text()


@pytest.fixture
def torch_without_cuda_headers(monkeypatch, tmp_path):
    """This process's torch as a CPU build without c10/cuda looks: its include folder holds no CUDA headers."""
    from torch.utils import cpp_extension

    monkeypatch.setattr(cpp_extension, "include_paths", lambda *a, **k: [str(tmp_path)])


def test_load_inline_candidate_without_torch_cuda_headers_is_not_checkable_not_a_compile_error(
        torch_without_cuda_headers):
    task, source = _kernelbench_add_pair()
    result = verify(task, source, CPU)
    assert result.status == "not_checkable", (result.status, result.reason)
    assert "no CUDA headers" in result.reason and "GPU machine" in result.reason, result.reason
    assert not result.ran and not result.checked_here and not result.passed


def test_a_not_checkable_candidate_starts_no_process(torch_without_cuda_headers):
    task, source = _kernelbench_add_pair()
    with prestart_worker() as worker:
        result = verify(task, source, CPU, worker=worker)
    assert result.status == "not_checkable"
    assert "import task and candidate" not in result.phases   # the candidate was never imported anywhere


def test_cupy_candidate_without_nvcc_is_not_checkable(monkeypatch):
    from verifier import devices

    monkeypatch.setattr(devices.shutil, "which", lambda name: None)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    cupy_file = sorted((CANDIDATES / "cuda").glob("*cupy*.py"))[0]
    result = run(cupy_file.stem.split("_cupy")[0], cupy_file)
    assert result.status == "not_checkable", (result.status, result.reason)
    assert "no nvcc" in result.reason and result.backend == "cupy"


@pytest.mark.slow
def test_kernelbench_cuda_example_compiles_with_nvcc_and_is_not_run_here():
    from verifier.devices import cuda_checkable_here

    if not cuda_checkable_here("load_inline")[0]:
        pytest.skip(f"load_inline cannot be compiled here: {cuda_checkable_here('load_inline')[1]}")
    task, source = _kernelbench_add_pair()
    result = verify(task, source, VerifyConfig(device="cpu", timeout_s=400))
    assert result.status == "not_run", (result.status, result.reason, result.feedback[-600:])
    assert "compiled with nvcc" in result.reason and not result.checked_here


@pytest.mark.parametrize("source, backend", [
    ("import triton\n", "triton"),
    ("from triton import jit as J\n", "triton"),                      # no name spells triton or jit
    ("import triton.language as tl\n", "triton"),
    ("from torch.utils.cpp_extension import load_inline as L\n", "load_inline"),
    ("import cupy\nk = cupy.RawKernel('', 'k')\n", "cupy"),
    ("import triton\nNOTE = 'load_inline'\n", "triton"),              # a string is no build
    ("import triton\nf = getattr(cpp_extension, 'load_inline')\n", "load_inline"),
    ("import torch\n", ""),
])
def test_the_backend_label_reads_imports_and_calls_not_stray_strings(source, backend):
    from verifier.verify import detect_backend

    assert detect_backend(source) == backend
