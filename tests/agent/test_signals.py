"""SIGTERM and SIGHUP stop kgen as Ctrl-C does: the run stored as interrupted, the resume command printed.

Real processes: `python -m agent optimize` started as a user would, the signal sent once its run is
stored, the exit code and the stored run read back.

    .venv/bin/python -m pytest tests/agent/test_signals.py -q
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.store import Store

REPO = Path(__file__).resolve().parents[2]


def _start_optimize(results: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env.update(KGEN_RESULTS=str(results), PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, "-m", "agent", "optimize", "tasks/matmul.py", "--device", "cpu",
                             "--max-iters", "6", "--keep-going"], cwd=REPO, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_for_a_stored_run(results: Path, proc: subprocess.Popen, limit_s: float = 60.0) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        if (results / "kgen.sqlite").exists() and Store(results).list_runs():
            time.sleep(1.0)   # into the loop: the analysis or a verification is running
            return
        time.sleep(0.2)
    proc.kill()
    pytest.fail("no run was stored within a minute")


@pytest.mark.slow
@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)], ids=["SIGTERM", "SIGHUP"])
def test_a_stop_signal_stores_the_run_as_interrupted_and_resumable(tmp_path, signum, code):
    results = tmp_path / "results"
    proc = _start_optimize(results)
    _wait_for_a_stored_run(results, proc)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, (out[-800:], err[-1500:])
    [run] = Store(results).list_runs()
    assert run.status == "interrupted", run.stop_reason
    assert f"kgen optimize --resume {run.run_id}" in out
    assert signal.Signals(signum).name in err


def test_exit_code_names_the_signal_only_for_an_interrupted_command(monkeypatch):
    from agent import cli

    monkeypatch.setattr(cli, "_received", [])
    assert cli.exit_code(130) == 130 and cli.exit_code(0) == 0
    monkeypatch.setattr(cli, "_received", [signal.SIGTERM])
    assert cli.exit_code(130) == 143
    assert cli.exit_code(1) == 1     # a command that finished anyway keeps its own verdict
