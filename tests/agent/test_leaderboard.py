"""`kgen leaderboard` on the CPU: a real board over tasks/suite-small.txt, resuming, --verify-only, bad tasks.

The board runs the real loop, the built-in heuristic proposer and the real
verifier for each of the suite's four tasks (softmax, gelu, sum_dim,
layernorm), each task in its own process, two at a time. It is built once
per module (about a minute here: every task and every candidate is a fresh
process); the resume tests work on copies of its results folder and count
the runs in the store and the sessions in each task's log, so a task run a
second time cannot go unnoticed.

    .venv/bin/python -m pytest tests/agent/test_leaderboard.py -q
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from pathlib import Path

import pytest

from agent.cli import build_parser, main
from agent.commands.optimize import FIELDS
from agent.board.files import BOARD_JSON, load_board, match_kernels, open_board
from agent.board.local import plan_workers
from agent.board.records import LeaderboardError, Row, row_from_run
from agent.records import Run
from agent.store import Store

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tasks" / "suite-small.txt"
TASKS = ["softmax", "gelu", "sum_dim", "layernorm"]
GOOD = ROOT / "tests" / "verifier" / "candidates" / "good"
BAD = ROOT / "tests" / "verifier" / "candidates" / "bad"
KERNELBENCH = ROOT / "tests" / "verifier" / "kernelbench"


def kgen(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def board_argv(results: Path, *extra: str) -> list[str]:
    return ["leaderboard", str(SUITE), "--name", "small", "--results", str(results), "--device", "cpu",
            "--proposer", "heuristic", "--max-iters", "2", "--workers", "2", *extra]


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """The suite-small board, run once: (results folder, exit code, stdout, stderr)."""
    results = tmp_path_factory.mktemp("board") / "results"
    code, out, err = kgen(*board_argv(results))
    return results, code, out, err


@pytest.fixture
def board_copy(board, tmp_path):
    """A copy of the finished board's results folder, to resume without touching the shared one."""
    results = tmp_path / "results"
    shutil.copytree(board[0], results)
    return results


def board_file(results: Path) -> Path:
    return results / "leaderboards" / "small" / BOARD_JSON


def rows_of(results: Path, name: str = "small") -> dict[str, Row]:
    return {r.task: r for r in load_board(results, name).rows}


def runs_per_task(results: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for run in Store(results).list_runs():
        counts[run.task] = counts.get(run.task, 0) + 1
    return counts


def sessions_per_task(results: Path) -> dict[str, int]:
    """How many times the board started each task's process (one "==" header per start in its log)."""
    logs = results / "leaderboards" / "small" / "logs"
    return {t: (logs / f"{t}.log").read_text().count("\n== ") + 1 for t in TASKS}


def edit_rows(results: Path, **changes_by_task: dict) -> None:
    data = json.loads(board_file(results).read_text())
    for row in data["rows"]:
        row.update(changes_by_task.get(row["task"], {}))
    board_file(results).write_text(json.dumps(data))


# ---- the board -----------------------------------------------------------------------------------


def test_board_writes_json_and_markdown(board):
    results, code, out, err = board
    assert code == 0, err[-3000:]
    data = json.loads(board_file(results).read_text())
    assert [r["task"] for r in data["rows"]] == TASKS
    markdown = (results / "leaderboards" / "small" / "leaderboard.md").read_text()
    assert all(f"| {t} | succeeded |" in markdown for t in TASKS), markdown + "\n" + err[-3000:]


def test_board_counts_every_task_correct(board):
    summary = json.loads(board_file(board[0]).read_text())["summary"]
    fast_0 = summary["fast"]["eager"][0]
    assert (summary["tasks"], summary["correct"], summary["timed"]) == (4, 4, 0)
    assert (fast_0["count"], fast_0["total"], fast_0["value"]) == (4, 4, 1.0)


def test_board_on_a_cpu_reports_fast_p_as_na_not_zero(board):
    results, _, out, _ = board
    summary = json.loads(board_file(results).read_text())["summary"]
    for baseline in ("eager", "compile"):
        assert [f["value"] for f in summary["fast"][baseline][1:]] == [None, None, None]
        assert summary["geomean"][baseline] is None
    assert "n/a" in out and "not timed" in out
    assert "nothing was timed" in (results / "leaderboards" / "small" / "leaderboard.md").read_text()


def test_each_row_points_at_its_stored_run(board):
    results = board[0]
    store = Store(results)
    for task, row in rows_of(results).items():
        run = store.load_run(row.run_id)
        assert run.task == task and run.proposer == "heuristic" and row.attempts == run.attempts >= 1
        assert Path(row.kernel_path).read_text() == store.best_source(run.run_id)
        assert row.speedup_text("eager") == "not timed"


def test_board_keeps_a_log_per_task(board):
    log = (board[0] / "leaderboards" / "small" / "logs" / "softmax.log").read_text()
    assert "optimize softmax on cpu" in log and "attempt 1" in log


def test_progress_reports_tasks_done_and_passing(board):
    err = board[3]
    assert "4/4 done; passing 4/4" in err and "fast_1 so far" in err


# ---- resuming ------------------------------------------------------------------------------------


def test_rerunning_a_finished_board_runs_nothing(board_copy):
    before_runs, before_sessions = runs_per_task(board_copy), sessions_per_task(board_copy)
    code, out, err = kgen(*board_argv(board_copy))
    assert code == 0
    assert "4 already done" in err
    assert runs_per_task(board_copy) == before_runs             # no new run in the store
    assert sessions_per_task(board_copy) == before_sessions     # no task process started


def test_json_prints_the_board_as_leaderboard_json_holds_it(board_copy):
    code, out, _ = kgen(*board_argv(board_copy, "--json"))
    assert code == 0
    data = json.loads(out)                           # stdout holds the one JSON document and nothing else
    assert data == json.loads((board_copy / "leaderboards" / "small" / BOARD_JSON).read_text())
    assert [r["task"] for r in data["rows"]] == TASKS and data["summary"]["correct"] == 4


def test_resume_runs_only_the_unfinished_task(board_copy):
    old_gelu = rows_of(board_copy)["gelu"]
    edit_rows(board_copy, gelu={"status": "pending", "correct": False})
    (board_copy / "leaderboards" / "small" / "jobs" / "gelu.started.json").unlink()   # as if never started
    before_runs, before_sessions = runs_per_task(board_copy), sessions_per_task(board_copy)

    code, _, err = kgen(*board_argv(board_copy))
    assert code == 0, err
    after_runs, after_sessions = runs_per_task(board_copy), sessions_per_task(board_copy)
    assert after_runs == {**before_runs, "gelu": before_runs["gelu"] + 1}
    assert after_sessions == {**before_sessions, "gelu": before_sessions["gelu"] + 1}
    gelu = rows_of(board_copy)["gelu"]
    assert gelu.correct and gelu.run_id != old_gelu.run_id


def test_a_task_that_finished_while_the_board_was_killed_is_collected_not_rerun(board_copy):
    edit_rows(board_copy, softmax={"status": "pending", "correct": False, "run_id": ""})
    before_runs, before_sessions = runs_per_task(board_copy), sessions_per_task(board_copy)

    code, _, _ = kgen(*board_argv(board_copy))
    assert code == 0
    assert runs_per_task(board_copy) == before_runs and sessions_per_task(board_copy) == before_sessions
    softmax = rows_of(board_copy)["softmax"]
    assert softmax.status == "succeeded" and softmax.run_id and softmax.correct


def test_an_interrupted_task_continues_its_run(board_copy):
    store = Store(board_copy)
    run = store.load_run(rows_of(board_copy)["sum_dim"].run_id)
    run.status = "interrupted"
    store.save_run(run)
    edit_rows(board_copy, sum_dim={"status": "interrupted"})
    before_runs = runs_per_task(board_copy)

    code, _, err = kgen(*board_argv(board_copy))
    assert code == 0, err
    assert runs_per_task(board_copy) == before_runs            # the same run went on; none was started
    resumed = rows_of(board_copy)["sum_dim"]
    assert resumed.run_id == run.run_id and resumed.status == "succeeded"
    assert f"resuming {run.run_id}" in (board_copy / "leaderboards" / "small" / "logs" / "sum_dim.log").read_text()


def test_reusing_a_name_with_other_settings_is_refused(board_copy):
    code, _, err = kgen(*board_argv(board_copy, "--max-iters", "3"))
    assert code == 2
    assert "max_iters: 2 -> 3" in err


def test_a_board_stored_before_timing_was_a_setting_resumes_as_events_only():
    from agent.board.files import config_changes

    old = {"backend": "triton", "max_iters": 2}          # stored before --timing existed: timed with events
    assert config_changes(old, {"backend": "triton", "max_iters": 2, "timing": "events"}) == []
    assert config_changes(old, {"backend": "triton", "max_iters": 2, "timing": "graph"}) == [
        "timing: 'events' -> 'graph'"]


def test_the_boards_settings_line_names_the_timing_method(board_copy):
    board = load_board(board_copy, "small")
    assert f"timing {board.config['timing']}" in (board_copy / "leaderboards" / "small" / "leaderboard.md").read_text()


def test_a_board_that_is_running_cannot_be_run_twice(board_copy):
    import fcntl

    with open(board_copy / "leaderboards" / "small" / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)     # as a running session (or its tasks) holds it
        code, _, err = kgen(*board_argv(board_copy))
    assert code == 2 and "being run by another kgen process" in err


def test_a_row_carries_its_runs_tokens_and_cost(tmp_path):
    store = Store(tmp_path)
    run = Run(run_id="20261129-120000-softmax-cccc", task="softmax", task_path="/t/softmax.py", status="stopped",
              stop_reason="2 round(s) done", attempts=2, prompt_tokens=1200, completion_tokens=300, cost_usd=0.021,
              wall_s=42.0)
    store.create_run(run)
    row = row_from_run(store, run)
    assert (row.tokens, row.cost_usd, row.wall_s, row.attempts) == (1500, 0.021, 42.0, 2)
    assert not row.correct and row.speedup_text("eager") == "-"


# ---- verify-only ---------------------------------------------------------------------------------


def test_verify_only_scores_a_folder_of_kernels(tmp_path):
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    shutil.copy(GOOD / "softmax.py", kernels / "softmax.py")
    shutil.copy(BAD / "wrong_result.py", kernels / "softmax_v0.py")                  # not matched: softmax.py is
    shutil.copy(KERNELBENCH / "19_ReLU_triton.py", kernels / "19_ReLU_triton.py")   # named like its task
    shutil.copy(BAD / "wrong_result.py", kernels / "sum_dim.py")                     # a softmax kernel: wrong
    suite = tmp_path / "suite.txt"
    suite.write_text("\n".join(str(p) for p in (ROOT / "tasks" / "softmax.py", KERNELBENCH / "19_ReLU.py",
                                                ROOT / "tasks" / "sum_dim.py", ROOT / "tasks" / "layernorm.py")))
    results = tmp_path / "results"
    code, out, err = kgen("leaderboard", str(suite), "--verify-only", str(kernels), "--name", "mine",
                          "--results", str(results), "--device", "cpu", "--workers", "2")

    board_rows = rows_of(results, "mine")
    assert {t: r.status for t, r in board_rows.items()} == \
        {"softmax": "ok", "19_ReLU": "ok", "sum_dim": "mismatch", "layernorm": "missing"}
    assert code == 1                                   # a task had no kernel to score
    summary = json.loads((results / "leaderboards" / "mine" / BOARD_JSON).read_text())["summary"]
    assert (summary["fast"]["eager"][0]["count"], summary["tasks"]) == (2, 4)
    assert board_rows["19_ReLU"].kernel_path.endswith("19_ReLU_triton.py")
    assert "no kernel named layernorm.py" in board_rows["layernorm"].reason
    run = Store(results).load_run(board_rows["softmax"].run_id)
    assert run.proposer == "none" and run.attempts == 1 and run.tokens == 0
    assert Store(results).best_source(run.run_id) == (GOOD / "softmax.py").read_text()


def test_kernels_match_tasks_by_name_then_by_unique_prefix(tmp_path):
    for name in ("softmax.py", "softmax_v2.py", "19_ReLU_cuda.py", "gelu_a.py", "gelu_b.py", "sum_dim.py"):
        (tmp_path / name).write_text("")
    tasks = [Path(f"/t/{n}.py") for n in ("softmax", "19_ReLU", "gelu", "sum", "sum_dim", "layernorm")]
    found = match_kernels(tasks, tmp_path)
    assert found["softmax"] == tmp_path / "softmax.py"           # the exact name wins over softmax_v2.py
    assert found["19_ReLU"] == tmp_path / "19_ReLU_cuda.py"      # a KernelBench solution named like its task
    assert "several kernels match" in found["gelu"]
    assert isinstance(found["sum"], str)                         # sum_dim.py is sum_dim's, not sum's
    assert found["sum_dim"] == tmp_path / "sum_dim.py"
    assert "no kernel named layernorm.py" in found["layernorm"]


# ---- tasks that cannot run -------------------------------------------------------------------------


def test_a_malformed_or_crashing_task_is_a_row_not_an_abort(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "broken.py").write_text("class Model(:\n")
    # a well-formed task whose import kills the process: the worker dies without a word
    (suite / "exits.py").write_text("import os\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    pass\n\n\n"
                                    "def get_inputs():\n    return []\n\n\ndef get_init_inputs():\n    return []\n\n\n"
                                    "os._exit(3)\n")
    results = tmp_path / "results"
    code, out, err = kgen("leaderboard", str(suite), "--name", "bad", "--results", str(results), "--device", "cpu",
                          "--proposer", "heuristic")
    assert code == 1
    board_rows = rows_of(results, "bad")
    assert board_rows["broken"].status == "task_error" and "not valid Python" in board_rows["broken"].reason
    assert board_rows["exits"].status == "error" and "exited with code 3" in board_rows["exits"].reason
    assert "broken" in out and "exits" in out


# ---- flags and workers ------------------------------------------------------------------------------


def test_leaderboard_takes_every_optimize_flag():
    parser = build_parser()
    args = parser.parse_args(["leaderboard", "tasks/"])
    missing = [dest for dest in FIELDS if not hasattr(args, dest)]
    assert missing == []


def test_one_worker_per_gpu_each_seeing_only_its_gpu():
    workers = plan_workers("cuda", gpus=[0, 2], workers=None, gpu_count=4, visible="4,5,6,7")
    assert [w.env["CUDA_VISIBLE_DEVICES"] for w in workers] == ["4", "6"]
    assert [w.label for w in workers] == ["GPU 0", "GPU 2"]


def test_more_workers_than_gpus_is_refused():
    with pytest.raises(LeaderboardError, match="each worker owns one GPU"):
        plan_workers("cuda", gpus=[0], workers=2, gpu_count=2)


def test_a_gpu_named_twice_is_refused():
    with pytest.raises(LeaderboardError, match="twice"):
        plan_workers("cuda", gpus=[1, 1], workers=None, gpu_count=2)


def test_cpu_workers_run_as_asked_and_refuse_gpus():
    assert len(plan_workers("cpu", gpus=None, workers=3, gpu_count=0)) == 3
    with pytest.raises(LeaderboardError, match="--gpus needs a CUDA device"):
        plan_workers("cpu", gpus=[0], workers=None, gpu_count=0)


def test_a_suite_naming_one_task_twice_is_refused(tmp_path):
    paths = [tmp_path / "a" / "softmax.py", tmp_path / "b" / "softmax.py"]
    with pytest.raises(LeaderboardError, match="softmax more than once"):
        open_board(tmp_path, name="x", suite=tmp_path, task_paths=paths, mode="optimize", config={},
                   device="cpu", gpu="")


def test_a_scored_kernel_gets_its_percent_of_speed_of_light(tmp_path, monkeypatch):
    # a verify-only row has no optimize loop behind it: its % of SOL comes from the same analysis
    import agent.analysis
    import verifier.verify
    from agent.analysis import Analysis
    from agent.config import OptimizeConfig
    from agent.board.job import score_kernel
    from verifier.records import Timing, VerifyResult

    timed = VerifyResult(status="ok", reason="correct on every trial", task="softmax", ran=True,
                         timing=Timing(0.5, 0.49, 0.5, 0.49, 0.52, 100, method="graph"),
                         baselines={"eager": Timing(1.0, 0.99, 1.0, 0.99, 1.02, 100, method="graph")})
    timed.speedups = {"eager": 2.0}
    monkeypatch.setattr(verifier.verify, "verify", lambda task, source, config, worker=None: timed)
    monkeypatch.setattr(agent.analysis, "device_and_gpu", lambda requested: ("cuda", "NVIDIA H200"))
    monkeypatch.setattr(agent.analysis, "analyze_task", lambda task, device, gpu: Analysis(sol_ms=0.25))
    store = Store(tmp_path / "results")
    run = score_kernel(ROOT / "tasks" / "softmax.py", GOOD / "softmax.py", OptimizeConfig(), store)
    assert run.best_sol_pct == pytest.approx(50.0)
    assert store.load_attempt(run.run_id, 1).sol_pct == pytest.approx(50.0)


@pytest.mark.parametrize("device_ms, status", [(0.47, "succeeded"), (1.0, "failed")])
def test_a_scored_kernels_claim_is_cross_checked_and_a_refuted_one_rejected(device_ms, status, tmp_path,
                                                                           monkeypatch):
    # as on a GPU with ncu: the verdict a timed one (0.5 ms claimed), ncu's measurement stood in, the decision real
    import agent.analysis
    import agent.graph
    import verifier.verify
    from agent.analysis import Analysis
    from agent.board.job import score_kernel
    from agent.config import OptimizeConfig
    from verifier import timing
    from verifier.records import Timing, VerifyResult

    timed = VerifyResult(status="ok", reason="correct on every trial", task="softmax", ran=True,
                         timing=Timing(0.5, 0.49, 0.5, 0.49, 0.52, 100, method="graph"), speedups={"eager": 2.0})
    checked = []

    def ncu(device, config):
        return lambda task, source, result: checked.append(source) or timing.ncu_check(
            result.timing.median_ms, device_ms, kernels=1, streams=1, calls=3)

    monkeypatch.setattr(verifier.verify, "verify", lambda task, source, config, worker=None: timed)
    monkeypatch.setattr(agent.analysis, "device_and_gpu", lambda requested: ("cuda", "NVIDIA H200"))
    monkeypatch.setattr(agent.analysis, "analyze_task", lambda task, device, gpu: Analysis(sol_ms=0.25))
    monkeypatch.setattr(agent.graph, "default_crosscheck_fn", ncu)
    store = Store(tmp_path / "results")
    run = score_kernel(ROOT / "tasks" / "softmax.py", GOOD / "softmax.py", OptimizeConfig(), store)
    assert checked == [(GOOD / "softmax.py").read_text()]
    assert run.status == status
    attempt = store.load_attempt(run.run_id, 1)
    if status == "failed":
        assert attempt.status == "rejected" and run.best_attempt is None and store.best_source(run.run_id) is None
        assert run.stop_reason.startswith("rejected: timing inconsistent: claimed 0.5000 ms per call")
        assert run.best_ncu_check.startswith("ncu cross-check: inconsistent")
    else:
        assert attempt.status == "ok" and run.best_attempt == 1
        assert run.best_ncu_check.startswith("ncu cross-check: consistent (claimed 0.5000 ms")


def test_a_board_refuses_to_run_where_the_sandbox_is_incomplete_unless_told(tmp_path, monkeypatch, capsys):
    from agent.cli import main
    from agent.commands import leaderboard as command

    monkeypatch.setattr(command, "sandbox_missing", lambda: ["pids cap"])
    suite = tmp_path / "suite.txt"
    suite.write_text(str(Path(__file__).resolve().parents[2] / "tasks" / "softmax.py") + "\n")
    code = main(["leaderboard", str(suite), "--device", "cpu", "--results", str(tmp_path / "results"),
                 "--max-iters", "1"])
    assert code == 2
    err = capsys.readouterr().err
    assert "cannot enforce pids cap" in err and "--allow-incomplete-isolation" in err
    assert not (tmp_path / "results" / "leaderboards").exists()


def test_a_board_refuses_to_run_where_the_candidate_would_keep_uid_0(tmp_path, monkeypatch, capsys):
    from agent.cli import main
    from verifier.sandbox import confinement, drops_uid

    if not (drops_uid() and confinement().get("pid_namespace")):
        pytest.skip("kgen is not root here, or the OS confinement does not hold")
    private = tmp_path / "private-lib"    # a PYTHONPATH entry uid 65534 cannot read: the sandbox keeps uid 0
    private.mkdir(mode=0o700)
    private.chmod(0o700)
    root = Path(__file__).resolve().parents[2]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root), str(private)]))
    suite = tmp_path / "suite.txt"
    suite.write_text(str(root / "tasks" / "softmax.py") + "\n")
    code = main(["leaderboard", str(suite), "--device", "cpu", "--results", str(tmp_path / "results"),
                 "--max-iters", "1"])
    assert code == 2
    err = capsys.readouterr().err
    assert f"unprivileged uid (uid 0: {private} is not readable by uid 65534)" in err, err


def test_the_sandbox_here_is_complete():
    from agent.commands.leaderboard import sandbox_missing

    # this machine and CI (cgroup v1, root): every confinement holds, so boards run without the flag
    missing = sandbox_missing()
    if missing:
        import sys

        from verifier.sandbox import run_sandboxed

        notes = run_sandboxed([sys.executable, "-c", "pass"], {}, timeout_s=60).isolation
        assert missing == [], [n for n in notes if "NOT" in n]
