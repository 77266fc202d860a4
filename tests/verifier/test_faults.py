"""Faults of a candidate are results, never crashes of kgen; the next candidate verifies normally.

One fault per test: a kernel that never ends, a segfault, an illegal memory access (GPU), an
allocation larger than the machine, 100 MB of output, a fork bomb, a thread flood, and candidate
files that are not UTF-8, empty or not Python (through `kgen verify` too: a verdict and exit 1).

    .venv/bin/python -m pytest tests/verifier/test_faults.py -q
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from processes import running
from verifier.records import VerifyConfig
from verifier.sandbox import run_sandboxed
from verifier.task import load_task
from verifier.verify import verify

ROOT = Path(__file__).resolve().parents[2]
CANDIDATES = Path(__file__).resolve().parent / "candidates"
SOFTMAX = ROOT / "tasks" / "softmax.py"
GOOD = (CANDIDATES / "good" / "softmax.py").read_text()
CPU = VerifyConfig(device="cpu", timeout_s=60)
GPU = VerifyConfig(device="cuda", timeout_s=240, reps=20, warmup=3, baselines=False)

HEADER = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl
'''
# A Triton kernel that stores 2**40 elements past its output: a wild pointer on any device.
WILD_STORE = HEADER + '''
@triton.jit
def wild_kernel(
    out_ptr,                # *[n] output
    n,                      # elements
    BLOCK: tl.constexpr,    # elements per program
):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs + (1 << 40), tl.zeros((BLOCK,), dtype=tl.float32), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        wild_kernel[(triton.cdiv(out.numel(), 1024),)](out, out.numel(), BLOCK=1024)
        return out
'''
HUGE_ALLOCATION = HEADER + '''
@triton.jit
def touch_kernel(
    ptr,                    # *fp32 [1] scratch
):
    tl.store(ptr, 1.0)


class ModelNew(nn.Module):
    def forward(self, x):
        scratch = torch.empty(10**13, dtype=torch.float32, device=x.device)
        touch_kernel[(1,)](scratch)
        return scratch
'''
# The known-good kernel, plus 100 MB printed on the first call.
LOUD = GOOD + '''

_said = []


class Loud(ModelNew):
    def forward(self, x):
        if not _said:
            _said.append(True)
            print("x" * 100_000_000)
        return super().forward(x)


ModelNew = Loud
'''
THREAD_FLOOD = GOOD.replace("import torch\n", "import threading\nimport time\nimport torch\n", 1) + '''

class Flood(ModelNew):
    def forward(self, x):
        for _ in range(6000):
            threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
        return super().forward(x)


ModelNew = Flood
'''
FORK_LOOP = GOOD.replace("import torch\n", "import os\nimport torch\n", 1) + '''

class Forks(ModelNew):
    def forward(self, x):
        for _ in range(300):
            try:
                if os.fork() == 0:
                    os._exit(0)
            except OSError:
                pass
        return super().forward(x)


ModelNew = Forks
'''


def check(source: str, config: VerifyConfig = CPU, *, static: bool = True):
    from unittest import mock

    task = load_task(SOFTMAX)
    if static:
        return verify(task, source, config)
    with mock.patch("verifier.verify.check_source", lambda s: None):
        return verify(task, source, config)


def test_infinite_kernel_loop_times_out_and_the_next_candidate_verifies():
    hang = (CANDIDATES / "bad" / "hang_kernel.py").read_text()
    result = check(hang, VerifyConfig(device="cpu", timeout_s=12))
    assert result.status == "timeout" and "process group was killed" in result.reason
    assert check(GOOD).status == "ok"


def test_wild_store_segfault_is_crashed_with_sigsegv():
    """Under the interpreter a store through a wild pointer is a real segfault of the worker."""
    result = check(WILD_STORE)
    assert result.status == "crashed", (result.status, result.reason)
    assert "SIGSEGV" in result.reason
    # where it died, from its fatal-signal stack: the kernel's store (the interpreter runs it in Python), in a
    # checked call of forward
    line = next(i for i, text in enumerate(WILD_STORE.splitlines(), 1) if "tl.store(out_ptr + offs + (1 << 40)" in text)
    assert f"at line {line} of the candidate's file, in wild_kernel; in a checked call of its forward" \
        in result.reason, result.reason
    assert "its last words" in result.feedback and "Segmentation fault" in result.feedback
    assert check(GOOD).status == "ok"


def test_sandbox_reports_a_segfaulting_child(tmp_path):
    script = tmp_path / "segv.py"
    script.write_text("import ctypes\nctypes.string_at(0)\n")
    res = run_sandboxed([sys.executable, str(script)], {}, timeout_s=30)
    assert res.returncode == -11 and res.message is None and not res.timed_out


def test_allocation_larger_than_memory_is_a_runtime_error():
    result = check(HUGE_ALLOCATION)
    assert result.status == "runtime_error", (result.status, result.reason)
    assert "allocate" in result.reason
    assert check(GOOD).status == "ok"


def test_100_mb_of_output_is_capped_and_the_verdict_comes_back():
    result = check(LOUD)
    assert result.status == "ok", (result.status, result.reason)
    assert len(result.stdout) <= CPU.output_cap_bytes
    assert any("output capped" in f for f in result.flags)


def test_thread_flood_is_killed_with_a_reason():
    result = check(THREAD_FLOOD, static=False)
    assert result.status == "crashed", (result.status, result.reason)
    assert "started too many threads" in result.reason
    assert check(GOOD).status == "ok"


def test_fork_loop_is_refused_at_run_time():
    result = check(FORK_LOOP, static=False)
    assert result.status == "rejected", (result.status, result.reason)
    assert "starting a process (fork)" in result.reason


def _child(tmp_path, body: str) -> list[str]:
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(body))
    return [sys.executable, str(script)]


def test_sandbox_kills_a_fork_bomb_beyond_the_process_cap(tmp_path):
    res = run_sandboxed(_child(tmp_path, '''
        import os, time
        print(os.getpid(), flush=True)
        for _ in range(200):
            if os.fork() == 0:
                time.sleep(120)
                os._exit(0)
        time.sleep(120)'''), {}, timeout_s=60, max_processes=32)
    assert "started too many processes" in res.limit and res.message is None
    assert res.wall_s < 30
    time.sleep(0.3)
    # NOTE: the forks run in the sandbox's own PID namespace; they are found by their script's path
    assert running(str(tmp_path)) == []


def test_sandbox_kills_a_thread_flood_beyond_the_thread_cap(tmp_path):
    res = run_sandboxed(_child(tmp_path, '''
        import threading, time
        for _ in range(2000):
            threading.Thread(target=time.sleep, args=(120,), daemon=True).start()
        time.sleep(120)'''), {}, timeout_s=60, max_threads=500)
    assert "started too many threads" in res.limit and res.message is None
    assert res.wall_s < 30


@pytest.mark.parametrize("content, code, words", [
    # not text at all: the file given is not a kernel file, a usage error naming the byte (exit 2)
    (b"\xff\xfe\x00\x81 not text \x00\x9c", 2, "not UTF-8 text (byte 0xff at offset 0)"),
    (b"", 1, "empty"),
    (b"class ModelNew(:\n    pass\n", 1, "not valid Python"),
])
def test_kgen_verify_gives_a_verdict_for_unreadable_candidates(tmp_path, content, code, words):
    kernel = tmp_path / "kernel.py"
    kernel.write_bytes(content)
    done = subprocess.run([sys.executable, "-m", "agent", "verify", str(SOFTMAX), str(kernel), "--device", "cpu"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == code, (done.stdout, done.stderr[-1500:])
    assert "Traceback" not in done.stderr + done.stdout
    assert words in (done.stdout if code == 1 else done.stderr)


@pytest.mark.gpu
def test_infinite_kernel_loop_on_gpu_times_out_and_the_gpu_stays_usable():
    hang = (CANDIDATES / "bad" / "hang_kernel.py").read_text()
    result = check(hang, VerifyConfig(device="cuda", timeout_s=60, baselines=False))
    assert result.status == "timeout"
    after = check(GOOD, GPU)
    assert after.status == "ok", (after.status, after.reason)


@pytest.mark.gpu
def test_illegal_memory_access_on_gpu_is_a_result_and_the_gpu_stays_usable():
    result = check(WILD_STORE, GPU)
    assert result.status in ("runtime_error", "crashed"), (result.status, result.reason)
    assert "illegal memory access" in (result.reason + result.feedback).lower() or result.status == "crashed"
    after = check(GOOD, GPU)
    assert after.status == "ok", (after.status, after.reason)
