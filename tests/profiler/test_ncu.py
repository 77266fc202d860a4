"""The ncu CSV parser, on real H200 output (tests/profiler/fixtures) and synthetic edge cases."""

from __future__ import annotations

from pathlib import Path

import pytest

from profiler.ncu import METRICS, SECTIONS, ncu_argv, ncu_problem, parse_details_csv, parse_number, parse_raw_csv

FIXTURES = Path(__file__).parent / "fixtures"
EXPECTED = {   # fixture -> (kernel name, gpu__time_duration in us)
    "softmax": ("softmax_kernel", 63.744),
    "matmul_tl_dot": ("matmul_kernel", 208.96),
    "transpose_conflicts": ("transpose_conflicts", 328.0),
    "transpose_padded": ("transpose_padded", 143.904),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_raw_fixture_parses_to_one_kernel_with_its_duration(name):
    kernels = parse_raw_csv((FIXTURES / f"{name}_raw.csv").read_text())
    assert len(kernels) == 1
    k = kernels[0]
    assert (k.name, k.duration_us) == (EXPECTED[name][0], pytest.approx(EXPECTED[name][1]))
    assert k.time_share == 1.0
    assert k.sm_count == 132


def test_raw_fixture_numbers_with_thousands_separators_are_read_whole():
    k = parse_raw_csv((FIXTURES / "transpose_conflicts_raw.csv").read_text())[0]
    assert k.bank_conflicts == 65_719_579
    assert k.grid_size == 65_536
    assert k.dram_read_bytes == 268_522_752
    assert k.shared_mem_bytes == 4096


def test_raw_fixture_stall_ratios_and_occupancy_limits():
    k = parse_raw_csv((FIXTURES / "transpose_conflicts_raw.csv").read_text())[0]
    assert k.stalls["mio_throttle"] == pytest.approx(87.38)
    assert len(k.stalls) == 19
    assert k.occupancy_limits == {"registers": 8, "shared_mem": 20, "warps": 8, "blocks": 32}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_details_fixture_parses_sections_and_rules(name):
    details = parse_details_csv((FIXTURES / f"{name}_details.csv").read_text())
    assert [d.name for d in details] == [EXPECTED[name][0]]
    d = details[0]
    assert d.get("GPU Speed Of Light Throughput", "Duration") == pytest.approx(EXPECTED[name][1] * 1e3, rel=0.02)
    assert any(r.type == "OPT" for r in d.rules)


def test_details_rule_keeps_ncu_estimated_speedup():
    d = parse_details_csv((FIXTURES / "matmul_tl_dot_details.csv").read_text())[0]
    launch = next(r for r in d.rules if r.name == "LaunchConfiguration")
    assert launch.type == "OPT" and launch.est_speedup_pct == pytest.approx(25.0)
    assert "partial wave of 233 thread blocks" in launch.text


HEADER = ('"ID","Process ID","Kernel Name","gpu__time_duration.sum","sm__throughput.avg.pct_of_peak_sustained_elapsed",'
          '"smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",'
          '"l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum"')
UNITS = '"","","","usecond","%","inst",""'


def synthetic() -> str:
    return "\n".join([
        "==PROF== Connected to process 1 (/usr/bin/python3)",
        "loss 0.25, step 3",                        # the program's own output, with a comma
        HEADER,
        UNITS,
        '"0","1","fused_kernel","30","85.5","n/a","1,024"',
        "==PROF== Disconnected from process 1",
        'a stray "quoted" line',
        '"1","1","epilogue","10","","2.50","0"',
        '"only","two"',                             # a quoted line of the wrong width
    ])


def test_synthetic_csv_finds_both_kernels_through_the_noise():
    kernels = parse_raw_csv(synthetic())
    assert [k.name for k in kernels] == ["fused_kernel", "epilogue"]


def test_synthetic_csv_time_shares_follow_durations_in_their_unit():
    kernels = parse_raw_csv(synthetic())
    assert [k.duration_us for k in kernels] == [30.0, 10.0]
    assert [k.time_share for k in kernels] == [pytest.approx(0.75), pytest.approx(0.25)]


def test_synthetic_csv_na_and_empty_and_missing_metrics_are_none():
    first, second = parse_raw_csv(synthetic())
    assert "long_scoreboard" not in first.stalls          # "n/a"
    assert second.stalls["long_scoreboard"] == 2.5
    assert second.sm_sol_pct is None                       # empty
    assert first.mem_sol_pct is None                       # not in the header at all
    assert first.bank_conflicts == 1024


def test_text_without_a_header_gives_no_kernels():
    assert parse_raw_csv("hello\n==PROF== nothing\n") == []


def test_parse_number_handles_separators_and_placeholders():
    assert parse_number("3,175,520") == 3175520
    assert parse_number("1,578,391,953,910.75") == pytest.approx(1578391953910.75)
    assert parse_number("n/a") is None and parse_number("") is None and parse_number("no data") is None


def test_ncu_problem_recognises_permission_and_library_errors():
    assert "ERR_NVGPUCTRPERM" in ncu_problem("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission")
    assert "LibraryNotLoaded" in ncu_problem("==ERROR== Failed to initialize the profiler: LibraryNotLoaded")
    assert ncu_problem((FIXTURES / "softmax_raw.csv").read_text()) is None


def test_ncu_argv_profiles_only_the_kgen_range_with_clocks_untouched(tmp_path):
    raw = ncu_argv("ncu", "raw", tmp_path / "raw.csv", tmp_path / "job.json")
    assert raw[raw.index("--nvtx-include") + 1] == "kgen/"
    assert raw[raw.index("--clock-control") + 1] == "none"
    assert raw[raw.index("--metrics") + 1].split(",") == list(METRICS)
    assert raw[-3:] == ["-m", "profiler.ncu_child", str(tmp_path / "job.json")]
    details = ncu_argv("ncu", "details", tmp_path / "d.csv", tmp_path / "job.json")
    assert [details[i + 1] for i, a in enumerate(details) if a == "--section"] == list(SECTIONS)


def test_metric_list_matches_the_fixture_script():
    script = (FIXTURES / "make-fixtures.sh").read_text()
    listed = script.split("METRICS=", 1)[1].split()[0].split(",")
    assert listed == list(METRICS)


def test_output_of_kgens_own_ncu_runner_parses():
    kernels = parse_raw_csv((FIXTURES / "relu_runner_raw.csv").read_text())
    assert [(k.name, k.duration_us) for k in kernels] == [("relu_kernel", 32.0)]
    details = parse_details_csv((FIXTURES / "relu_runner_details.csv").read_text())
    assert details[0].name == "relu_kernel" and details[0].rules
