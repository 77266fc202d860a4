"""KernelBench in and out: numeric order, --problems, sample files in --verify-only, export, the protocol line.

The tasks are KernelBench-format files written here (tmp folders named level1,
level2, as KernelBench's are) or the in-repo fixture tests/verifier/kernelbench/19_ReLU.py;
nothing is read from KernelBench itself. The shape checks name what
KernelBench's scripts/benchmark_eval_analysis.py (commit 423217d) reads.

    .venv/bin/python -m pytest tests/agent/test_kernelbench_io.py -q
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from agent.cli import main
from agent.kernelbench.export import (EVAL_RESULTS, baseline_file_name, read_baselines, read_eval_results, sig3)
from agent.kernelbench.names import parse_problems, parse_sample_name, select_problems, sort_problems, suite_tasks
from agent.kernelbench.samples import match_samples
from agent.board.files import load_board, save_board
from agent.board.records import Leaderboard, Row, row_from_run
from agent.board.render import to_markdown
from agent.records import Attempt, Run
from agent.store import Store
from verifier.records import Timing, VerifyResult
from verifier.timing import kernelbench_timing

ROOT = Path(__file__).resolve().parents[2]
RELU = ROOT / "tests" / "verifier" / "kernelbench" / "19_ReLU.py"
RELU_TRITON = ROOT / "tests" / "verifier" / "kernelbench" / "19_ReLU_triton.py"
WRONG = ROOT / "tests" / "verifier" / "candidates" / "bad" / "wrong_result.py"

TASK = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * {factor}


def get_inputs():
    return [torch.randn(7, 33)]


def get_init_inputs():
    return []
'''


def kgen(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def write_tasks(folder: Path, names: list[str]) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, name in enumerate(names):
        path = folder / name
        path.write_text(TASK.format(factor=i + 2))
        paths.append(path)
    return paths


# ---- numeric order ---------------------------------------------------------------------------------


def test_a_folder_of_problems_is_taken_in_numeric_order(tmp_path):
    write_tasks(tmp_path / "level1", ["100_HingeLoss.py", "10_Matmul.py", "1_Square.py", "2_Standard.py",
                                      "11_Four.py"])
    names = [p.name for p in suite_tasks(tmp_path / "level1")]
    assert names == ["1_Square.py", "2_Standard.py", "10_Matmul.py", "11_Four.py", "100_HingeLoss.py"]


def test_digit_runs_compare_as_numbers_the_rest_as_text():
    paths = [Path(n) for n in ("softmax.py", "gelu.py", "20_a.py", "3_b.py", "level_1_problem_10_x.py",
                               "level_1_problem_9_x.py")]
    assert [p.name for p in sort_problems(paths)] == ["3_b.py", "20_a.py", "gelu.py", "level_1_problem_9_x.py",
                                                      "level_1_problem_10_x.py", "softmax.py"]


def test_a_listed_suite_keeps_the_order_it_was_written_in(tmp_path):
    paths = write_tasks(tmp_path / "level1", ["10_Matmul.py", "2_Standard.py"])
    listing = tmp_path / "suite.txt"
    listing.write_text(f"{paths[0]}\n{paths[1]}\n")
    assert [p.name for p in suite_tasks(listing)] == ["10_Matmul.py", "2_Standard.py"]


# ---- --problems --------------------------------------------------------------------------------------


@pytest.fixture
def level1(tmp_path):
    return write_tasks(tmp_path / "level1", [f"{n}_P{n}.py" for n in (1, 2, 3, 5, 19, 20, 23, 40)])


def test_problem_ranges_are_inclusive_and_their_union_is_taken(level1):
    chosen = select_problems(sort_problems(level1), parse_problems("1-3, 19-20,23"))
    assert [p.name for p in chosen] == ["1_P1.py", "2_P2.py", "3_P3.py", "19_P19.py", "20_P20.py", "23_P23.py"]


def test_a_range_over_absent_problems_takes_those_present(level1):
    # KernelBench's own levels have gaps (problems kept back): a range must not demand every number
    assert [p.name for p in select_problems(level1, parse_problems("4-19"))] == ["5_P5.py", "19_P19.py"]


def test_level_qualified_problems_pick_by_the_tasks_folder(tmp_path):
    one = write_tasks(tmp_path / "level1", ["1_A.py", "2_B.py"])
    two = write_tasks(tmp_path / "level2", ["1_C.py", "2_D.py"])
    chosen = select_problems(one + two, parse_problems("level2:1,l1:2"))
    assert [f"{p.parent.name}/{p.name}" for p in chosen] == ["level1/2_B.py", "level2/1_C.py"]


@pytest.mark.parametrize("spec, message", [
    ("", "--problems is empty"),
    ("   ", "--problems is empty"),
    ("3-1", "'3-1' runs backwards; write the smaller number first (1-3)"),
    ("x", "'x' is not a problem number or a range"),
    ("1-x", "'1-x' is not a problem number or a range"),
    ("1,,2", "an empty item between commas"),
    ("5,", "an empty item between commas"),
    ("0-3", "numbers problems and levels from 1"),
])
def test_a_bad_problems_spec_says_what_is_wrong(spec, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_problems(spec)


def test_a_problem_the_suite_lacks_is_an_error_not_an_empty_board(level1):
    with pytest.raises(ValueError, match="'200' holds no problem of"):
        select_problems(level1, parse_problems("1,200"))


def test_problems_needs_tasks_named_by_number(tmp_path):
    tasks = write_tasks(tmp_path / "mine", ["softmax.py", "3_x.py"])
    with pytest.raises(ValueError, match="without one: softmax.py"):
        select_problems(tasks, parse_problems("3"))


def test_the_leaderboard_refuses_a_bad_problems_spec_before_running(level1, tmp_path):
    code, _, err = kgen("leaderboard", str(level1[0].parent), "--problems", "3-1", "--device", "cpu",
                        "--results", str(tmp_path / "results"))
    assert code == 2 and "'3-1' runs backwards" in err
    assert not (tmp_path / "results" / "leaderboards").exists()


def test_a_board_takes_the_selected_problems_in_numeric_order(tmp_path):
    folder = tmp_path / "level1"
    write_tasks(folder, ["10_C.py", "1_A.py", "2_B.py", "30_D.py"])
    (tmp_path / "empty").mkdir()
    code, _, err = kgen("leaderboard", str(folder), "--problems", "2-10", "--verify-only", str(tmp_path / "empty"),
                        "--name", "sel", "--results", str(tmp_path / "results"), "--device", "cpu")
    assert code == 1, err                               # no kernels: every row is "missing", nothing ran
    assert [r.task for r in load_board(tmp_path / "results", "sel").rows] == ["2_B", "10_C"]

    # the same board with a narrower selection would drop 10_C's row: refused, the board left as it was
    code, _, err = kgen("leaderboard", str(folder), "--problems", "2", "--verify-only", str(tmp_path / "empty"),
                        "--name", "sel", "--results", str(tmp_path / "results"), "--device", "cpu")
    assert code == 2 and "also holds 10_C, outside --problems 2" in err
    assert [r.task for r in load_board(tmp_path / "results", "sel").rows] == ["2_B", "10_C"]


# ---- sample files in --verify-only -----------------------------------------------------------------


def test_sample_names_are_read_and_others_are_not():
    s = parse_sample_name("level_2_problem_19_sample_10_kernel.py")
    assert (s.level, s.problem, s.sample) == (2, 19, 10)
    assert parse_sample_name("19_ReLU_triton.py") is None
    assert parse_sample_name("level_2_problem_19_sample_10_prompt.txt") is None


def test_samples_match_their_problem_and_level_in_sample_order(tmp_path):
    tasks = write_tasks(tmp_path / "level1", ["1_A.py", "19_ReLU.py"]) + write_tasks(tmp_path / "level2", ["19_X.py"])
    kernels = tmp_path / "run"
    kernels.mkdir()
    for name in ("level_1_problem_19_sample_0_kernel.py", "level_1_problem_19_sample_10_kernel.py",
                 "level_1_problem_19_sample_2_kernel.py", "level_2_problem_19_sample_0_kernel.py",
                 "level_1_problem_5_sample_0_kernel.py"):
        (kernels / name).write_text("")
    found = match_samples(tasks, kernels)
    assert [p.name for p in found.kernels["19_ReLU"]] == ["level_1_problem_19_sample_0_kernel.py",
                                                          "level_1_problem_19_sample_2_kernel.py",
                                                          "level_1_problem_19_sample_10_kernel.py"]
    assert [p.name for p in found.kernels["19_X"]] == ["level_2_problem_19_sample_0_kernel.py"]
    assert "no kernel named 1_A.py" in found.kernels["1_A"]
    assert found.unmatched == ["level_1_problem_5_sample_0_kernel.py: no task of the suite is level 1 problem 5"]


def test_a_kernel_named_after_its_task_matches_as_before(tmp_path):
    tasks = write_tasks(tmp_path / "tasks", ["19_ReLU.py", "softmax.py"])
    kernels = tmp_path / "kernels"
    kernels.mkdir()
    (kernels / "19_ReLU_triton.py").write_text("")
    (kernels / "softmax.py").write_text("")
    found = match_samples(tasks, kernels)
    assert found.kernels == {"19_ReLU": kernels / "19_ReLU_triton.py", "softmax": kernels / "softmax.py"}
    assert found.unmatched == []


def test_samples_of_two_levels_for_a_task_without_a_level_are_refused(tmp_path):
    tasks = write_tasks(tmp_path / "tasks", ["19_ReLU.py"])
    kernels = tmp_path / "run"
    kernels.mkdir()
    (kernels / "level_1_problem_19_sample_0_kernel.py").write_text("")
    (kernels / "level_2_problem_19_sample_0_kernel.py").write_text("")
    assert "samples of levels 1, 2 are for problem 19" in match_samples(tasks, kernels).kernels["19_ReLU"]


def test_a_named_kernel_beside_samples_of_its_problem_is_refused_not_chosen_silently(tmp_path):
    tasks = write_tasks(tmp_path / "level1", ["19_ReLU.py"])
    kernels = tmp_path / "run"
    kernels.mkdir()
    (kernels / "19_ReLU.py").write_text("")
    (kernels / "level_1_problem_19_sample_0_kernel.py").write_text("")
    assert "both 19_ReLU.py and 1 KernelBench sample(s) of problem 19 match" in \
        match_samples(tasks, kernels).kernels["19_ReLU"]


@pytest.fixture(scope="module")
def sample_board(tmp_path_factory):
    """A --verify-only board on the CPU over KernelBench samples: sample 0 wrong, sample 1 right, one unmatched."""
    tmp = tmp_path_factory.mktemp("samples")
    (tmp / "level1").mkdir()
    shutil.copy(RELU, tmp / "level1" / RELU.name)
    run = tmp / "run"
    run.mkdir()
    shutil.copy(WRONG, run / "level_1_problem_19_sample_0_kernel.py")
    shutil.copy(RELU_TRITON, run / "level_1_problem_19_sample_1_kernel.py")
    shutil.copy(RELU_TRITON, run / "level_1_problem_7_sample_0_kernel.py")
    results = tmp / "results"
    code, out, err = kgen("leaderboard", str(tmp / "level1"), "--verify-only", str(run), "--name", "kb",
                          "--results", str(results), "--device", "cpu")
    return tmp, results, code, out, err


def test_every_sample_is_scored_and_the_best_reported(sample_board):
    tmp, results, code, _, err = sample_board
    assert code == 0, err[-3000:]
    row = load_board(results, "kb").rows[0]
    assert (row.task, row.status, row.correct, row.attempts) == ("19_ReLU", "ok", True, 2)
    assert Path(row.kernel_path).name == "level_1_problem_19_sample_1_kernel.py"
    attempts = Store(results).load_attempts(row.run_id)
    assert sorted((a.number, a.status) for a in attempts) == [(1, "mismatch"), (2, "ok")]
    assert Store(results).best_source(row.run_id) == RELU_TRITON.read_text()


def test_sample_files_no_task_takes_are_reported(sample_board):
    err = sample_board[4]
    assert "not scored: level_1_problem_7_sample_0_kernel.py: no task of the suite is level 1 problem 7" in err


def test_an_exported_sample_board_keeps_each_sample_by_its_id(sample_board, tmp_path):
    _, results, _, _, _ = sample_board
    code, out, err = kgen("export", "kernelbench", "kb", "-o", str(tmp_path / "out"), "--results", str(results))
    assert code == 0, err
    samples = read_eval_results(tmp_path / "out" / "kb_level1" / EVAL_RESULTS)[19]
    assert [(s.sample_id, s.compiled, s.correctness) for s in samples] == [(0, True, False), (1, True, True)]
    assert samples[0].metadata["kgen_status"] == "mismatch" and "correctness_issue" in samples[0].metadata
    assert samples[1].runtime == -1.0 and samples[1].runtime_stats is None       # the CPU times nothing


# ---- export ----------------------------------------------------------------------------------------

GPU = "NVIDIA H200"


def _kb(times: list[float]) -> Timing:
    return kernelbench_timing(times)


def _store_run(store: Store, task_path: Path, verdicts: list[VerifyResult], best: int | None) -> Run:
    run = Run(run_id=f"20261201-120000-{task_path.stem}-abcd", task=task_path.stem, task_path=str(task_path),
              proposer="heuristic", device="cuda", gpu=GPU, status="succeeded" if best else "failed",
              attempts=len(verdicts), best_attempt=best)
    store.create_run(run)
    for number, verdict in enumerate(verdicts, 1):
        store.save_attempt(run, Attempt.from_result(run.run_id, number, 1, verdict), source="# kernel\n")
    store.save_run(run)
    return run


@pytest.fixture
def timed_board(tmp_path):
    """An optimize board as a GPU would leave it, timed by KernelBench's protocol: (results, board, tasks)."""
    results = tmp_path / "results"
    store = Store(results)
    relu, matmul = write_tasks(tmp_path / "suite" / "level1", ["19_ReLU.py", "2_Matmul.py"])
    (mine,) = write_tasks(tmp_path / "suite" / "level1", ["softmax.py"])
    pending = write_tasks(tmp_path / "suite" / "level1", ["23_Pending.py"])[0]
    cand, eager = _kb([1.0, 1.0, 1.0, 1.3]), _kb([4.0, 4.0, 4.1, 4.2])
    compiled = _kb([2.0, 2.2, 2.2, 2.0])
    first = VerifyResult(status="mismatch", reason="output wrong", ran=True, trials=0)
    passed = VerifyResult(status="ok", reason="correct on every trial", ran=True, trials=5, device=GPU, timing=cand,
                          baselines={"eager": eager, "compile": compiled})
    passed.speedups = {"eager": eager.mean_ms / cand.mean_ms, "compile": compiled.mean_ms / cand.mean_ms}
    runs = [_store_run(store, relu, [first, passed], best=2),
            _store_run(store, matmul, [VerifyResult(status="compile_error", reason="nvcc: error", device=GPU)], None),
            _store_run(store, mine, [passed], best=1)]
    rows = [row_from_run(store, r) for r in runs] + [Row(task="23_Pending", task_path=str(pending))]
    board = Leaderboard(name="kbx", suite=str(tmp_path / "suite" / "level1"), mode="optimize",
                        config={"timing": "kernelbench"}, device="cuda", gpu=GPU, rows=rows)
    save_board(results, board)
    return results, board, {"relu": relu, "matmul": matmul}


def export(results: Path, out: Path, *extra: str) -> tuple[int, str, str]:
    return kgen("export", "kernelbench", "kbx", "-o", str(out), "--results", str(results), *extra)


def test_export_round_trip_keeps_each_field(timed_board, tmp_path):
    results, _, _ = timed_board
    code, out, err = export(results, tmp_path / "out")
    assert code == 0, err
    evals = read_eval_results(tmp_path / "out" / "kbx_level1" / EVAL_RESULTS)
    assert sorted(evals) == [2, 19]                      # softmax is no KernelBench problem; 23 was never run
    (relu,) = evals[19]
    cand = _kb([1.0, 1.0, 1.0, 1.3])
    assert (relu.sample_id, relu.compiled, relu.correctness) == (0, True, True)   # the best kernel is sample 0
    assert relu.runtime == sig3(cand.mean_ms) == relu.runtime_stats.mean
    stats = relu.runtime_stats
    assert (stats.std, stats.min, stats.max, stats.num_trials) == (sig3(cand.std_ms), 1.0, 1.3, 4)
    assert (stats.hardware, relu.metadata["kgen_timing"], relu.metadata["kgen_median_ms"]) == (GPU, "kernelbench",
                                                                                                 1.0)
    assert relu.metadata["correctness_trials"] == "(5 / 5)"
    (matmul,) = evals[2]
    assert (matmul.compiled, matmul.correctness, matmul.runtime, matmul.runtime_stats) == (False, False, -1.0, None)
    assert matmul.metadata["compilation_error"] == "nvcc: error"
    assert "softmax: not a KernelBench problem" in err and "23_Pending: pending, nothing was scored" in err


def test_export_writes_kernelbench_baseline_files_per_level_and_problem_file(timed_board, tmp_path):
    results, _, _ = timed_board
    export(results, tmp_path / "out")
    eager = read_baselines(tmp_path / "out" / "baseline_time_torch.json")
    compiled = read_baselines(tmp_path / "out" / "baseline_time_torch_compile_inductor_default.json")
    assert eager[1]["19_ReLU.py"].mean == sig3(_kb([4.0, 4.0, 4.1, 4.2]).mean_ms)
    assert compiled[1]["19_ReLU.py"].max == 2.2
    assert "2_Matmul.py" not in eager[1]          # no kernel passed and no baseline was cached for it


def test_a_problem_whose_kernels_all_failed_takes_its_baselines_from_the_cache(timed_board, tmp_path):
    from verifier.task import load_task
    from verifier.verify import baseline_key

    results, _, tasks = timed_board
    key = baseline_key(load_task(tasks["matmul"]), GPU, "kernelbench")
    cache = results / "baselines" / GPU.replace(" ", "_") / f"{key}.json"
    cache.parent.mkdir(parents=True)
    cache.write_text(json.dumps({"baselines": {"eager": _kb([9.0, 9.5]).__dict__}}))
    code, _, err = export(results, tmp_path / "out")
    assert code == 0, err
    assert read_baselines(tmp_path / "out" / "baseline_time_torch.json")[1]["2_Matmul.py"].mean == 9.25


def test_missing_baselines_are_said(timed_board, tmp_path):
    _, err = export(timed_board[0], tmp_path / "out")[1:]
    assert "level 1 2_Matmul.py: no eager time in baseline_time_torch.json" in err


def test_the_export_has_every_key_kernelbench_analysis_reads(timed_board, tmp_path):
    # scripts/benchmark_eval_analysis.py (423217d): eval_results[str(pid)] is a list filtered on r["sample_id"];
    # each entry's ["compiled"], ["correctness"], ["runtime"]; baseline_results[f"level{level}"][problem.name]["mean"],
    # problem.name being the problem's file name; eval_from_generations.py keeps the ids in numeric order
    results, _, _ = timed_board
    code, out, _ = export(results, tmp_path / "out")
    data = json.loads((tmp_path / "out" / "kbx_level1" / EVAL_RESULTS).read_text())
    assert list(data) == ["2", "19"]
    for entries in data.values():
        assert isinstance(entries, list) and len([e for e in entries if e["sample_id"] == 0]) == 1
        for entry in entries:
            assert {"sample_id", "compiled", "correctness", "metadata", "runtime", "runtime_stats"} <= set(entry)
            assert isinstance(entry["compiled"], bool) and isinstance(entry["runtime"], float)
    baseline = json.loads((tmp_path / "out" / "baseline_time_torch.json").read_text())
    assert set(baseline["level1"]["19_ReLU.py"]) == {"mean", "std", "min", "max", "num_trials", "hardware", "device"}
    assert "run_name=kbx_level1 level=1" in out and f"eval_results_dir={(tmp_path / 'out').resolve()}" in out


def test_a_task_outside_a_level_folder_takes_the_level_given(tmp_path):
    results = tmp_path / "results"
    store = Store(results)
    (task,) = write_tasks(tmp_path / "mine", ["4_Relu.py"])
    run = _store_run(store, task, [VerifyResult(status="ok", reason="ok", trials=5)], best=1)
    board = Leaderboard(name="kbx", suite=str(tmp_path / "mine"), mode="optimize", config={}, device="cpu",
                        rows=[row_from_run(store, run)])
    save_board(results, board)
    code, _, err = export(results, tmp_path / "out")
    assert code == 2 and "no level" in err
    code, _, err = export(results, tmp_path / "out", "--level", "3")
    assert code == 0, err
    assert read_eval_results(tmp_path / "out" / "kbx_level3" / EVAL_RESULTS)[4][0].correctness


def test_a_board_can_be_named_by_its_folder(timed_board, tmp_path):
    results = timed_board[0]
    code, _, err = kgen("export", "kernelbench", str(results / "leaderboards" / "kbx"), "-o", str(tmp_path / "out"))
    assert code == 0, err
    assert sorted(read_eval_results(tmp_path / "out" / "kbx_level1" / EVAL_RESULTS)) == [2, 19]


def test_exporting_an_unknown_board_is_a_usage_error(tmp_path):
    code, _, err = kgen("export", "kernelbench", "nope", "-o", str(tmp_path / "out"), "--results", str(tmp_path))
    assert code == 2 and "no leaderboard 'nope'" in err


def test_compile_baseline_keys_name_kernelbench_files():
    assert baseline_file_name("eager") == "baseline_time_torch"
    assert baseline_file_name("compile") == "baseline_time_torch_compile_inductor_default"
    assert baseline_file_name("compile-max-autotune") == "baseline_time_torch_compile_inductor_max-autotune"


# ---- the protocol line -------------------------------------------------------------------------------


@pytest.mark.parametrize("timing, line", [
    ("kernelbench", "- timing: kernelbench (KernelBench's: CUDA events around each call, the same inputs every call, "
                    "L2 flushed, mean of 100); baselines: eager and torch.compile"),
    ("graph", "- timing: graph (CUDA-graph replays, fresh inputs every call, L2 flushed, median of 100); baselines"),
    (None, "- timing: events (CUDA events around each call as issued"),      # a board stored before --timing
])
def test_the_board_markdown_names_its_protocol_and_baselines(timing, line):
    board = Leaderboard(name="x", suite="s", mode="optimize", config={"timing": timing} if timing else {})
    assert line in to_markdown(board)


def test_kgen_verify_prints_a_kernelbench_timing_as_its_mean_and_names_the_protocol():
    from agent.commands.verify import render

    cand, eager = kernelbench_timing([1.0, 1.0, 1.6]), kernelbench_timing([3.0, 3.0, 6.0])
    text = render(VerifyResult(status="ok", reason="ok", timing=cand, baselines={"eager": eager},
                               speedups={"eager": 4.0 / 1.2}))
    assert "candidate: 1.2000 ms mean of 3 (KernelBench's: CUDA events around each call" in text
    assert "median 1.0000" in text and "eager: 4.0000 ms  -> speedup 3.33x" in text


def test_the_samples_load_inline_builds_go_to_the_verifier_together(monkeypatch):
    # scored one at a time on a GPU, their extension builds go first, side by side
    from agent.kernelbench import samples
    from verifier import inline_build
    from verifier.records import VerifyConfig

    seen = []
    monkeypatch.setattr(inline_build, "prebuild_round",
                        lambda sources, device, timeout_s: seen.append((sources, device, timeout_s)) or len(sources))
    samples._prebuild(["sample 0", "sample 1"], "cuda", VerifyConfig(timeout_s=42))
    assert seen == [(["sample 0", "sample 1"], "cuda", 42)]
