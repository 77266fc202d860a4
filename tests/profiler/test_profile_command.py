"""`kgen profile`: diagnosing captured ncu output, and the no-GPU message."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from agent.commands import profile

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).resolve().parents[2]
SOFTMAX_TASK = ROOT / "tasks" / "softmax.py"


def args(**given) -> argparse.Namespace:
    base = dict(task=None, kernel=None, ncu_csv=None, details=None, json=False, raw=False, timeout=60.0)
    return argparse.Namespace(**{**base, **given})


def test_captured_csv_prints_the_diagnosis(capsys):
    code = profile.run(args(ncu_csv=str(FIXTURES / "transpose_conflicts_raw.csv"),
                            details=str(FIXTURES / "transpose_conflicts_details.csv")))
    out = capsys.readouterr().out
    assert code == 0
    assert "memory-bound" in out and "mio_throttle" in out and "swizzle" in out
    assert len(out.strip().splitlines()) <= 25


def test_captured_csv_as_json_round_trips(capsys):
    from profiler.records import Diagnosis

    assert profile.run(args(ncu_csv=str(FIXTURES / "matmul_tl_dot_raw.csv"), json=True)) == 0
    d = Diagnosis.from_dict(json.loads(capsys.readouterr().out))
    assert d.bound == "compute" and d.kernel == "matmul_kernel"


def test_a_file_without_kernel_rows_exits_1(tmp_path, capsys):
    empty = tmp_path / "empty.csv"
    empty.write_text("==PROF== nothing was profiled\n")
    assert profile.run(args(ncu_csv=str(empty))) == 1
    assert "no kernel rows" in capsys.readouterr().err


def test_missing_file_and_mixed_arguments_are_usage_errors(tmp_path, capsys):
    assert profile.run(args(ncu_csv=str(tmp_path / "absent.csv"))) == 2
    assert profile.run(args(ncu_csv=str(FIXTURES / "softmax_raw.csv"), task="t.py", kernel="k.py")) == 2
    assert profile.run(args(task="t.py")) == 2
    assert profile.run(args(details=str(FIXTURES / "softmax_details.csv"))) == 2


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message given without a GPU")
def test_task_and_kernel_without_a_gpu_exit_2_with_a_clear_message(tmp_path, capsys):
    kernel = tmp_path / "kernel.py"
    kernel.write_text("class ModelNew: pass\n")
    assert profile.run(args(task=str(SOFTMAX_TASK), kernel=str(kernel))) == 2
    err = capsys.readouterr().err
    assert "CUDA GPU" in err and "--ncu-csv" in err


def test_register_adds_the_subcommand():
    parser = argparse.ArgumentParser()
    profile.register(parser.add_subparsers())
    parsed = parser.parse_args(["profile", "--ncu-csv", "raw.csv", "--json"])
    assert parsed.func is profile.run and parsed.ncu_csv == "raw.csv" and parsed.json


@pytest.mark.skipif(not (ROOT / "agent" / "cli.py").exists(), reason="agent/cli.py not present")
def test_python_m_agent_profile_ncu_csv():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "agent", "profile", "--ncu-csv", str(FIXTURES / "softmax_raw.csv")],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "memory-bound" in done.stdout and "long_scoreboard" in done.stdout
