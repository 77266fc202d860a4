"""The ncu cross-check: device time from real H200 ncu pages, its command line, and its verdicts without a GPU.

The pages are ncu's own (tests/profiler/fixtures, README there): one row per launch. A forward of
several launches, or several profiled calls, is the fixtures' rows under their header, renumbered as
ncu numbers launches (and moved to another stream where a test says so). The runner is driven
through the real sandbox by a stand-in ncu that writes such a page where `--log-file` says, as the
H200's ncu does; the GPU test in test_crosscheck_gpu.py runs the real one.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

import pytest

from profiler import crosscheck
from profiler.crosscheck import PROFILED_CALLS, apply_ncu_check, cross_check, device_time, strict_problem
from profiler.ncu import parse_raw_csv
from verifier import timing
from verifier.records import Timing, VerifyResult
from verifier.task import load_task

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
KERNEL = (ROOT / "tests" / "verifier" / "candidates" / "good" / "softmax.py").read_text()
DURATION_US = {"softmax": 63.744, "matmul_tl_dot": 208.96, "transpose_conflicts": 328.0,
               "transpose_padded": 143.904, "relu_runner": 32.0}


def records(name: str) -> list[list[str]]:
    text = (FIXTURES / f"{name}_raw.csv").read_text()
    return list(csv.reader(line for line in text.splitlines() if line.startswith('"')))


def page(rows: list[tuple[str, dict[str, str]]]) -> str:
    """An ncu raw page: the fixtures' header and units, then each (fixture, changes) kernel row, renumbered."""
    header, units, _ = records("softmax")
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    writer.writerow(header)
    writer.writerow(units)
    for launch, (name, changes) in enumerate(rows):
        row = dict(zip(header, records(name)[2]))
        row.update({"ID": str(launch), "Process ID": "448", **changes})
        writer.writerow([row[h] for h in header])
    return "==PROF== Connected to process 448 (/usr/bin/python3.12)\n" + out.getvalue()


@pytest.mark.parametrize("name", sorted(DURATION_US))
def test_a_fixtures_device_time_is_its_one_kernels_duration(name):
    text = (FIXTURES / f"{name}_raw.csv").read_text()
    measured = device_time(parse_raw_csv(text), calls=1)
    assert measured.ms_per_call == pytest.approx(DURATION_US[name] / 1e3)
    assert (measured.launches, measured.streams, measured.untimed) == (1, 1, 0)


def test_profiled_calls_are_averaged():
    measured = device_time(parse_raw_csv(page([("softmax", {})] * 3)), calls=3)
    assert measured.ms_per_call == pytest.approx(0.063744)
    assert measured.launches == 3 and measured.kernels_per_call(3) == 1


def test_kernels_on_one_stream_add_up():
    measured = device_time(parse_raw_csv(page([("softmax", {}), ("matmul_tl_dot", {})])), calls=1)
    assert measured.ms_per_call == pytest.approx((63.744 + 208.96) / 1e3)
    assert measured.streams == 1


def test_kernels_on_two_streams_count_the_longest_stream_only():
    # streams may overlap: their total is no time the call must have taken
    text = page([("softmax", {}), ("transpose_padded", {}), ("matmul_tl_dot", {"Stream": "13"})])
    measured = device_time(parse_raw_csv(text), calls=1)
    assert measured.ms_per_call == pytest.approx(0.20896)
    assert measured.streams == 2


def test_a_launch_ncu_gave_no_time_counts_zero():
    text = page([("softmax", {}), ("relu_runner", {"gpu__time_duration.sum": "n/a"})])
    measured = device_time(parse_raw_csv(text), calls=1)
    assert measured.ms_per_call == pytest.approx(0.063744)
    assert measured.untimed == 1


def test_no_timed_launch_gives_no_device_time():
    assert device_time(parse_raw_csv(page([])), calls=1) is None
    assert device_time(parse_raw_csv(page([("softmax", {"gpu__time_duration.sum": "n/a"})])), calls=1) is None


def test_the_time_pass_asks_ncu_for_the_duration_alone_with_caches_and_clocks_untouched(tmp_path):
    from profiler.ncu import ncu_time_argv

    argv = ncu_time_argv("ncu", tmp_path / "t.csv", tmp_path / "job.json")
    assert argv[argv.index("--metrics") + 1] == "gpu__time_duration.sum"
    assert argv[argv.index("--cache-control") + 1] == "none"
    assert argv[argv.index("--clock-control") + 1] == "none"
    assert argv[argv.index("--nvtx-include") + 1] == "kgen/"
    assert argv[argv.index("--page") + 1] == "raw" and "--section" not in argv
    assert argv[-3:] == ["-m", "profiler.ncu_child", str(tmp_path / "job.json")]


# ---- verdicts: the decision on a claim, and every way the check is not made


def timed(claimed_ms: float, status: str = "ok") -> VerifyResult:
    t = Timing(median_ms=claimed_ms, min_ms=claimed_ms, mean_ms=claimed_ms, p10_ms=claimed_ms, p90_ms=claimed_ms,
               reps=100, method="graph")
    return VerifyResult(status=status, reason="correct on every trial", timing=t, speedups={"eager": 2.0},
                        baselines={"eager": t})


@pytest.fixture(scope="module")
def task():
    return load_task(ROOT / "tasks" / "softmax.py")


def test_a_kernel_that_did_not_pass_is_not_checked(task):
    check = cross_check(task, KERNEL, VerifyResult(status="mismatch", reason="wrong"), ncu="/nonexistent/ncu")
    assert check.status == "not_run" and "did not pass verification (mismatch)" in check.reason


def test_an_untimed_kernel_is_not_checked(task):
    check = cross_check(task, KERNEL, VerifyResult(status="ok", reason="correct"), ncu="/nonexistent/ncu")
    assert check.status == "not_run" and "nothing was timed" in check.reason


def test_without_ncu_the_check_is_not_run_and_says_so(task, monkeypatch):
    import profiler.ncu

    monkeypatch.setattr(profiler.ncu, "find_ncu", lambda: None)
    check = cross_check(task, KERNEL, timed(0.1))
    assert check.status == "not_run" and check.reason.startswith("ncu not found")
    assert check.line.startswith("ncu cross-check: not run (ncu not found")


def test_strict_says_it_needs_a_gpu_and_ncu(monkeypatch):
    import profiler.ncu

    assert "needs a GPU and Nsight Compute (ncu): there is no CUDA GPU here" in strict_problem("cpu")
    monkeypatch.setattr(profiler.ncu, "find_ncu", lambda: None)
    assert "needs Nsight Compute (ncu): not found" in strict_problem("cuda")
    assert strict_problem("cuda", ncu="/opt/ncu") is None


def test_an_inconsistent_check_rejects_the_verdict_with_both_numbers():
    result = timed(0.03)
    apply_ncu_check(result, timing.ncu_check(0.03, 0.063744, kernels=1, streams=1, calls=3))
    assert result.status == "rejected"
    assert result.reason.startswith("timing inconsistent: claimed 0.0300 ms per call")
    assert "0.0637 ms of device time" in result.reason
    assert result.timing is None and result.speedups == {} and result.ncu_check.status == "inconsistent"


def test_a_consistent_check_leaves_the_verdict_as_it_was():
    result = timed(0.07)
    apply_ncu_check(result, timing.ncu_check(0.07, 0.063744, kernels=1, streams=1, calls=3))
    assert result.status == "ok" and result.timing.median_ms == 0.07 and result.speedups == {"eager": 2.0}
    assert result.ncu_check.status == "consistent"


def test_the_check_round_trips_through_the_verdicts_json():
    result = apply_ncu_check(timed(0.07), timing.ncu_check(0.07, 0.063744, kernels=1, streams=1, calls=3))
    back = VerifyResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert back.ncu_check == result.ncu_check


# ---- the runner, through the real sandbox, with a stand-in ncu writing a real page

STAND_IN = '''#!{python}
import json, os, sys
args = sys.argv[1:]
log = args[args.index("--log-file") + 1]
with open(os.path.join(os.path.dirname(log), "ncu-calls.jsonl"), "a") as calls:
    calls.write(json.dumps(args) + "\\n")
sys.stdout.write({stdout!r})
with open(log, "w") as f:
    f.write({page!r})
'''


def stand_in_ncu(tmp_path: Path, monkeypatch, text: str, stdout: str = "") -> str:
    import contextlib
    import tempfile

    monkeypatch.setattr(crosscheck.cleanup, "scratch_dir",
                        lambda prefix: contextlib.nullcontext(tempfile.mkdtemp(prefix=prefix + "-", dir=tmp_path)))
    script = tmp_path / "ncu"
    script.write_text(STAND_IN.format(python=sys.executable, page=text, stdout=stdout))
    script.chmod(0o755)
    return str(script)


def test_a_claim_at_ncus_time_is_consistent(task, tmp_path, monkeypatch):
    ncu = stand_in_ncu(tmp_path, monkeypatch, page([("softmax", {})] * PROFILED_CALLS))
    check = cross_check(task, KERNEL, timed(0.0672), ncu=ncu, timeout_s=60)
    assert check.status == "consistent", check.reason
    assert check.ncu_ms == pytest.approx(0.063744) and check.kernels == 1 and check.calls == PROFILED_CALLS
    [argv] = [json.loads(line) for line in next(tmp_path.glob("kgen-crosscheck-*/ncu-calls.jsonl")).read_text()
              .splitlines()]
    job = json.loads(Path(argv[-1]).read_text())
    assert job["profiled_calls"] == PROFILED_CALLS and job["mode"] == "ncu"


def test_a_claim_below_ncus_time_over_the_margin_is_inconsistent(task, tmp_path, monkeypatch):
    ncu = stand_in_ncu(tmp_path, monkeypatch, page([("softmax", {})] * PROFILED_CALLS))
    check = cross_check(task, KERNEL, timed(0.0300), ncu=ncu, timeout_s=60)
    assert check.status == "inconsistent"
    assert "claimed 0.0300 ms per call" in check.reason and "0.0637 ms of device time" in check.reason


def test_counters_refused_is_not_run_with_ncus_reason(task, tmp_path, monkeypatch):
    refused = ("==PROF== Connected to process 52 (/usr/bin/python3.12)\n==ERROR== ERR_NVGPUCTRPERM - The user does "
               "not have permission to access NVIDIA GPU Performance Counters on the target device 0.\n")
    ncu = stand_in_ncu(tmp_path, monkeypatch, refused)
    check = cross_check(task, KERNEL, timed(0.0300), ncu=ncu, timeout_s=60)
    assert check.status == "not_run" and "ERR_NVGPUCTRPERM" in check.reason


def test_no_kernel_in_the_range_is_not_run_never_a_pass(task, tmp_path, monkeypatch):
    ncu = stand_in_ncu(tmp_path, monkeypatch, "==PROF== Disconnected from process 52\n")
    check = cross_check(task, KERNEL, timed(0.0300), ncu=ncu, timeout_s=60)
    assert check.status == "not_run" and "ncu timed no kernel" in check.reason


def test_a_kernel_that_fails_under_ncu_is_not_run_with_its_error(task, tmp_path, monkeypatch):
    ncu = stand_in_ncu(tmp_path, monkeypatch, page([("softmax", {})] * PROFILED_CALLS))
    script = Path(ncu)
    # the profiled child's own report, as profiler/ncu_child.py writes it when the candidate raises
    script.write_text(script.read_text() + '''
job = json.load(open(args[-1]))
json.dump({"device": "NVIDIA H200", "work": None, "error": "RuntimeError: boom"}, open(job["result_path"], "w"))
''')
    check = cross_check(task, KERNEL, timed(0.0300), ncu=ncu, timeout_s=60)
    assert check.status == "not_run" and check.reason == "the candidate failed under ncu: RuntimeError: boom"
