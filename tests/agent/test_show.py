"""`kgen show`: runs, tasks and leaderboards in the terminal, read from a hand-made results folder.

The folder holds a GPU-style run of softmax (a compile error, then two timed
kernels, the best one profiled), a CPU run of gelu, and a leaderboard of both.

    .venv/bin/python -m pytest tests/agent/test_show.py -q
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.cli import main
from agent.board.files import save_board
from agent.board.records import Leaderboard, row_from_run
from agent.records import Attempt, Run
from agent.store import Store
from profiler.records import Diagnosis
from verifier.records import VerifyResult

ROOT = Path(__file__).resolve().parents[2]
KERNEL = (ROOT / "tests" / "verifier" / "candidates" / "good" / "softmax.py").read_text()
BEST_MARK = "# the best kernel of this test"


def timing(ms: float) -> dict:
    return {"median_ms": ms, "min_ms": ms, "mean_ms": ms, "p10_ms": ms, "p90_ms": ms, "reps": 100}


def verdict(status: str, ms: float | None = None) -> VerifyResult:
    data = {"status": status, "reason": "", "floor_ms": 0.2}
    if ms is not None:
        baselines = {"eager": timing(0.6), "compile": timing(0.5), "compile-max-autotune": timing(0.48)}
        data.update(timing=timing(ms), baselines=baselines,
                    speedups={k: v["median_ms"] / ms for k, v in baselines.items()})
    return VerifyResult.from_dict(data)


PROFILE = Diagnosis.from_dict({"bound": "memory", "source": "ncu", "kernel": "softmax_row_kernel", "mem_sol_pct": 61.0, "sm_sol_pct": 20.0,
           "mem_unit": "DRAM",
           "top_stalls": [{"reason": "long_scoreboard", "ratio": 3.0, "share": 0.52, "fix": "more loads in flight"},
                          {"reason": "barrier", "ratio": 1.0, "share": 0.2, "fix": "fewer barriers"}]})


def make_results(root: Path) -> dict[str, str]:
    """A results folder: a timed softmax run, an untimed gelu run, and a board of both; returns their ids."""
    store = Store(root)
    gpu = Run(run_id="20261129-100000-softmax-aaaa", task="softmax", task_path=str(ROOT / "tasks" / "softmax.py"),
              proposer="openai", model="test-model", backend="triton", device="cuda", gpu="NVIDIA H200",
              started_at="2026-11-29T10:00:00+00:00")
    store.create_run(gpu)
    specs = [("compile_error", None, "not valid Python (line 3)"), ("ok", 0.48, "correct on every trial"),
             ("ok", 0.384, "correct on every trial")]
    for number, (status, ms, reason) in enumerate(specs, 1):
        verify = verdict(status, ms)
        if number == 3:     # the best kernel's claim against ncu's device time, as the loop's end stores it
            from verifier import timing as verifier_timing

            verify.ncu_check = verifier_timing.ncu_check(ms, 0.351, kernels=1, streams=1, calls=3)
        attempt = Attempt(run_id=gpu.run_id, number=number, round=number, status=status, reason=reason,
                          feedback="SyntaxError: invalid syntax" if status != "ok" else "", verify=verify,
                          median_ms=ms, speedup=min(verify.speedups.values()) if ms else None,
                          prompt_tokens=100, completion_tokens=50)
        source = KERNEL.replace("LOOP_BLOCK = 4096", f"LOOP_BLOCK = {1024 * number}")
        store.save_attempt(gpu, attempt, source=source + (f"\n{BEST_MARK}\n" if number == 3 else ""))
    store.save_profile(gpu, 3, PROFILE, "Diagnosis (ncu) of softmax_row_kernel\nBound: memory")
    gpu.best_attempt, gpu.best_ms, gpu.best_speedup, gpu.best_sol_pct = 3, 0.384, 1.25, 52.0
    gpu.best_ncu_check = store.load_attempt(gpu.run_id, 3).verify.ncu_check.line
    gpu.attempts, gpu.rounds, gpu.status, gpu.stop_reason = 3, 3, "succeeded", "target reached: 1.25x >= 1x"
    store.save_best(gpu, store.attempt_text(gpu.run_id, 3, "kernel.py"))
    store.save_run(gpu)

    cpu = Run(run_id="20261129-110000-gelu-bbbb", task="gelu", task_path=str(ROOT / "tasks" / "gelu.py"),
              proposer="heuristic", backend="triton", device="cpu", started_at="2026-11-29T11:00:00+00:00")
    store.create_run(cpu)
    gelu = (ROOT / "tests" / "verifier" / "candidates" / "good" / "gelu.py").read_text()
    store.save_attempt(cpu, Attempt(run_id=cpu.run_id, number=1, round=1, status="ok", reason="correct on every trial",
                                    verify=verdict("ok")), source=gelu)
    cpu.best_attempt, cpu.attempts, cpu.rounds, cpu.status = 1, 1, 1, "succeeded"
    cpu.stop_reason = "attempt 1 is correct; nothing was timed (no GPU)"
    cpu.best_ncu_check = "ncu cross-check: not run (nothing was timed (no GPU): no claimed time to check)"
    store.save_best(cpu, gelu)
    store.save_run(cpu)

    board = Leaderboard(name="nightly", suite=str(ROOT / "tasks"), mode="optimize", config={}, device="cuda",
                        gpu="NVIDIA H200", rows=[row_from_run(store, store.load_run(gpu.run_id))])
    save_board(root, board)
    return {"gpu": gpu.run_id, "cpu": cpu.run_id}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("show") / "results"
    ids = make_results(root)
    return root, ids


def show(capsys, root: Path, *argv: str) -> tuple[int, str, str]:
    code = main(["show", *argv, "--results", str(root)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_run_shows_every_attempt_with_status_time_speedup_and_top_stall(results, capsys):
    root, ids = results
    code, out, _ = show(capsys, root, ids["gpu"])
    assert code == 0
    assert "compile_error" in out and "not valid Python (line 3)" in out
    assert "0.384 ms" in out and "1.25x" in out          # 0.48 ms compile-max-autotune / 0.384 ms
    assert "long_scoreboard 52%" in out
    assert "3*" in out                                   # the best attempt is marked


def test_a_run_shows_the_best_kernel_and_where_the_files_are(results, capsys):
    root, ids = results
    _, out, _ = show(capsys, root, ids["gpu"])
    assert BEST_MARK in out and "class ModelNew" in out
    assert str(root / "softmax" / ids["gpu"]) in out
    assert "best.py" in out


def test_a_cpu_run_says_not_timed(results, capsys):
    root, ids = results
    _, out, _ = show(capsys, root, ids["cpu"])
    assert "correct, not timed" in out and "not timed" in out


def test_a_run_shows_its_best_kernels_ncu_cross_check(results, capsys):
    root, ids = results
    _, out, _ = show(capsys, root, ids["gpu"])
    line = next(x for x in out.splitlines() if x.startswith("ncu cross-check:"))
    assert line.startswith("ncu cross-check: consistent (claimed 0.3840 ms per call, Nsight Compute measured 0.3510")


def test_a_run_not_cross_checked_says_why(results, capsys):
    root, ids = results
    _, out, _ = show(capsys, root, ids["cpu"])
    assert "ncu cross-check: not run (nothing was timed (no GPU)" in out


def test_the_cross_checked_attempt_shows_its_check(results, capsys):
    root, ids = results
    _, three, _ = show(capsys, root, ids["gpu"], "--attempt", "3")
    _, two, _ = show(capsys, root, ids["gpu"], "--attempt", "2")
    assert "ncu cross-check: consistent (claimed 0.3840 ms" in three and "ncu cross-check" not in two


def test_a_unique_prefix_names_a_run(results, capsys):
    root, ids = results
    code, out, _ = show(capsys, root, "20261129-1100")
    assert code == 0 and f"run {ids['cpu']}" in out


def test_no_argument_lists_the_latest_runs_newest_first_and_the_boards(results, capsys):
    root, ids = results
    code, out, _ = show(capsys, root)
    assert code == 0
    assert out.index(ids["cpu"]) < out.index(ids["gpu"])
    assert "nightly" in out


def test_a_task_name_lists_that_tasks_runs_only(results, capsys):
    root, ids = results
    _, out, _ = show(capsys, root, "softmax")
    assert ids["gpu"] in out and ids["cpu"] not in out


def test_a_leaderboard_name_shows_its_table(results, capsys):
    root, _ = results
    _, out, _ = show(capsys, root, "nightly")
    assert "fast_1.5" in out and "softmax" in out
    assert "100.0% (1/1)" in out         # fast_0 and fast_1: one task, correct, 1.25x over both baselines


def test_one_attempt_shows_its_feedback_and_kernel(results, capsys):
    root, ids = results
    code, out, _ = show(capsys, root, ids["gpu"], "--attempt", "1")
    assert code == 0
    assert "SyntaxError: invalid syntax" in out and "LOOP_BLOCK = 1024" in out


def test_a_profiled_attempt_shows_its_diagnosis(results, capsys):
    root, ids = results
    _, out, _ = show(capsys, root, ids["gpu"], "--attempt", "3")
    assert "Diagnosis (ncu) of softmax_row_kernel" in out


def test_an_unknown_name_is_exit_code_2(results, capsys):
    root, _ = results
    code, _, err = show(capsys, root, "no-such-thing")
    assert code == 2 and "no run, task or leaderboard named no-such-thing" in err


def test_an_empty_results_folder_says_how_to_start(tmp_path, capsys):
    code, out, _ = show(capsys, tmp_path / "empty")
    assert code == 0 and "kgen optimize TASK" in out


# ---- --json: the record shown, and nothing else, on stdout ------------------------------------------


def show_json(capsys, root: Path, *argv: str):
    import json

    code, out, _ = show(capsys, root, *argv, "--json")
    assert code == 0
    return json.loads(out)          # fails when anything but the one JSON document reaches stdout


def test_json_of_a_run_is_the_run_and_its_attempts(results, capsys):
    root, ids = results
    data = show_json(capsys, root, ids["gpu"])
    assert set(data) == {"run", "attempts"}
    assert Run.from_dict(data["run"]).run_id == ids["gpu"]
    attempts = [Attempt.from_dict(a) for a in data["attempts"]]
    assert [a.number for a in attempts] == [1, 2, 3]
    assert attempts[2].verify.speedups["eager"] == pytest.approx(0.6 / 0.384)
    assert attempts[2].profile.top_stalls[0].reason == "long_scoreboard"


def test_json_of_an_attempt_is_that_attempt(results, capsys):
    root, ids = results
    attempt = Attempt.from_dict(show_json(capsys, root, ids["gpu"], "--attempt", "1"))
    assert (attempt.number, attempt.status) == (1, "compile_error")


def test_json_of_a_task_lists_its_runs(results, capsys):
    root, ids = results
    data = show_json(capsys, root, "softmax")
    assert data["task"] == "softmax" and [r["run_id"] for r in data["runs"]] == [ids["gpu"]]


def test_json_of_a_leaderboard_is_its_stored_board(results, capsys):
    root, _ = results
    data = show_json(capsys, root, "nightly")
    board = Leaderboard.from_dict(data)
    assert board.name == "nightly" and [r.task for r in board.rows] == ["softmax"]
    assert data["summary"]["correct"] == 1 and set(data["summary"]["fast"]) == {"eager", "compile"}


def test_json_without_a_target_lists_the_latest_runs_and_the_boards(results, capsys):
    root, ids = results
    data = show_json(capsys, root)
    assert [r["run_id"] for r in data["runs"]] == [ids["cpu"], ids["gpu"]]
    assert data["leaderboards"] == ["nightly"]


def test_at_80_columns_the_runs_table_keeps_task_and_best_readable(results):
    from rich.console import Console

    from agent.commands.show import runs_table
    from agent.store import Store

    root, _ = results
    runs = Store(root).list_runs()
    console = Console(width=80, record=True, file=open("/dev/null", "w"))
    console.print(runs_table(runs, "latest runs", console.width))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    for run in runs:
        assert run.task[:8] in text                     # the task's name, not squeezed to nothing
    assert "proposer" not in text and "best" in text   # the key columns win at 80 columns


def test_piped_output_has_no_padding_at_line_ends(results, capsys):
    root, _ = results
    code, out, _ = show(capsys, root)
    assert code == 0 and out.strip()
    assert all(line == line.rstrip() for line in out.splitlines())


def test_the_files_line_names_only_files_that_exist(results, capsys):
    from agent.store import Store

    root, _ = results
    for run in Store(root).list_runs():
        code, out, _ = show(capsys, root, run.run_id)
        line = " ".join(out[out.index("files: "):].split("\n\n")[0].split())
        folder = Store(root).run_dir(run.run_id)
        for name in ("run.json", "best.py", "kernel.py", "verify.json", "profile.json", "prompt.md", "response.md"):
            there = (folder / name).exists() or any(folder.glob(f"attempt-*/{name}"))
            assert (name in line) == there, (name, line)


def test_a_failed_run_names_its_closest_attempt(tmp_path, capsys):
    from test_report import failed_run

    root = tmp_path / "results"
    run_id = failed_run(root)
    code, out, _ = show(capsys, root, run_id)
    assert code == 0
    assert f"closest: attempt 2, mismatch: trial 2 (seed 1)" in out
    assert f"kgen show {run_id} --attempt 2" in out


def test_at_80_columns_a_long_code_line_wraps_instead_of_being_cropped(tmp_path):
    from rich.console import Console

    from agent.commands.show import show_attempt
    from test_report import failed_run

    root = tmp_path / "results"
    run_id = failed_run(root)
    console = Console(width=80, record=True, file=open("/dev/null", "w"))
    assert show_attempt(console, Store(root), run_id, 2) == 0
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "END-OF-THE-LONG-LINE" in text          # the end of a 360-character line, wrapped onto the screen


def test_text_a_candidate_chose_is_shown_as_written_never_obeyed(tmp_path, capsys):
    """A stored reason, feedback and kernel carrying terminal control and rich markup (a store written before
    verdicts were made printable, or by another tool): `kgen show` prints both as text."""
    store = Store(tmp_path / "results")
    run = Run(run_id="20261202-100000-softmax-cccc", task="softmax", task_path=str(ROOT / "tasks" / "softmax.py"),
              proposer="heuristic", backend="triton", device="cpu", started_at="2026-12-02T10:00:00+00:00")
    store.create_run(run)
    forged = "[bold green]OK[/] \x1b[2J\x1b[Hcorrect on every trial\u202e"
    store.save_attempt(run, Attempt(run_id=run.run_id, number=1, round=1, status="runtime_error", reason=forged,
                                    feedback=forged, verify=verdict("runtime_error")),
                       source=f"X = {forged!r}\n# \x1b]0;title\x07\n")
    run.attempts, run.rounds, run.status, run.stop_reason = 1, 1, "failed", f"no correct kernel: {forged}"
    store.save_run(run)
    for argv in ([run.run_id], [run.run_id, "--attempt", "1"]):
        code, out, _ = show(capsys, tmp_path / "results", *argv)
        assert code == 0
        assert "\x1b[2J" not in out and "\x1b]0" not in out and "\u202e" not in out
        assert "\\x1b[2J" in out and "[bold green]OK[/]" in out   # the text itself, markup and all
