"""fast_p and the geometric mean on hand-made results whose answers are known.

    .venv/bin/python -m pytest tests/agent/test_fastp.py -q
"""

from __future__ import annotations

import math

import pytest

from agent.fastp import Outcome, fast_p, fast_table, geomean, geomean_speedup
from agent.board.records import Row, summarize

# ten tasks: 7 correct (speedups 0.5, 1.0, 1.2, 1.5, 1.5, 2.0, 3.0), 3 incorrect (one of them "fast")
TEN = [Outcome(True, 0.5), Outcome(True, 1.0), Outcome(True, 1.2), Outcome(True, 1.5), Outcome(True, 1.5),
       Outcome(True, 2.0), Outcome(True, 3.0), Outcome(False, 9.0), Outcome(False, None), Outcome(False, None)]


def test_fast_0_is_the_share_of_correct_tasks_among_all():
    result = fast_p(TEN, 0)
    assert (result.count, result.total, result.value) == (7, 10, 0.7)


def test_fast_1_counts_only_strictly_faster_correct_tasks():
    # 1.2, 1.5, 1.5, 2.0, 3.0 are > 1; the tie at exactly 1.0 is not; the incorrect 9x is not
    assert fast_p(TEN, 1.0).count == 5
    assert fast_p(TEN, 1.0).value == 0.5


def test_a_tie_at_exactly_p_does_not_count():
    assert fast_p(TEN, 1.5).count == 2      # 2.0 and 3.0; both 1.5x ties are out
    assert fast_p(TEN, 2.0).count == 1      # 3.0 only; the 2.0x tie is out


def test_an_incorrect_but_fast_task_never_counts():
    only_fast_wrong = [Outcome(False, 50.0), Outcome(True, 0.9)]
    assert fast_p(only_fast_wrong, 1.0).count == 0
    assert fast_p(only_fast_wrong, 0).count == 1


def test_fast_table_reports_each_threshold_in_order():
    table = fast_table(TEN)
    assert [f.p for f in table] == [0.0, 1.0, 1.5, 2.0]
    assert [f.count for f in table] == [7, 5, 2, 1]
    assert [f.label for f in table] == ["fast_0", "fast_1", "fast_1.5", "fast_2"]


def test_untimed_correct_tasks_make_fast_p_unknown_not_zero():
    cpu = [Outcome(True, None), Outcome(True, None), Outcome(False, None)]
    result = fast_p(cpu, 1.0)
    assert result.value is None and result.count is None
    assert result.text() == "n/a"
    assert "2 of 2 correct task(s) not timed" in result.note
    assert fast_p(cpu, 0).value == pytest.approx(2 / 3)   # correctness is known without a timing


def test_one_untimed_correct_task_among_timed_ones_still_makes_fast_p_unknown():
    mixed = [Outcome(True, 3.0), Outcome(True, None)]
    assert fast_p(mixed, 1.0).value is None


def test_no_correct_task_gives_zero_not_unknown():
    assert fast_p([Outcome(False, None)] * 3, 1.0).value == 0.0


def test_the_text_gives_the_percentage_and_the_counts():
    assert fast_p(TEN, 1.0).text() == "50.0% (5/10)"


def test_geomean_of_known_values():
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean([1.5]) == pytest.approx(1.5)
    assert geomean([]) is None


def test_geomean_speedup_uses_correct_timed_tasks_only():
    expected = math.exp(sum(math.log(v) for v in (0.5, 1.0, 1.2, 1.5, 1.5, 2.0, 3.0)) / 7)
    assert geomean_speedup(TEN) == pytest.approx(expected)     # the incorrect 9x is left out


def test_geomean_refuses_a_non_positive_speedup():
    with pytest.raises(ValueError):
        geomean([1.0, 0.0])


def test_board_summary_takes_the_compile_column_for_fast_p_against_compile():
    rows = [Row(task="a", task_path="a.py", status="succeeded", correct=True, speedup_eager=2.5, speedup_compile=0.8,
                median_ms=1.0),
            Row(task="b", task_path="b.py", status="succeeded", correct=True, speedup_eager=1.1, speedup_compile=1.05,
                median_ms=1.0),
            Row(task="c", task_path="c.py", status="failed")]
    summary = summarize(rows, device="cuda")
    assert [f.count for f in summary.fast["eager"]] == [2, 2, 1, 1]
    assert [f.count for f in summary.fast["compile"]] == [2, 1, 0, 0]
    assert summary.geomean["compile"] == pytest.approx(math.sqrt(0.8 * 1.05))


def test_board_summary_on_a_cpu_reports_na_with_a_note():
    rows = [Row(task="a", task_path="a.py", status="succeeded", correct=True),
            Row(task="b", task_path="b.py", status="failed")]
    summary = summarize(rows, device="cpu")
    assert summary.fast["eager"][0].value == 0.5
    assert all(f.value is None for f in summary.fast["eager"][1:])
    assert summary.geomean["eager"] is None
    assert any("nothing was timed" in n for n in summary.notes)


def test_where_nothing_can_be_timed_fast_p_above_0_is_na_even_with_no_correct_task():
    from agent.fastp import Outcome, fast_p

    failed = [Outcome(False, None), Outcome(False, None)]      # an interrupted CPU board: nothing correct yet
    assert fast_p(failed, 1.0).text() == "0.0% (0/2)"           # on a GPU that is a true 0
    na = fast_p(failed, 1.0, timeable=False)
    assert na.value is None and na.text() == "n/a" and "no GPU" in na.note
    assert fast_p(failed, 0, timeable=False).value == 0.0      # fast_0 (correct) needs no timing


def test_a_cpu_boards_summary_never_says_0_percent_for_p_above_0():
    from agent.board.records import Row, summarize

    rows = [Row(task="a", task_path="a.py", status="pending"), Row(task="b", task_path="b.py", status="interrupted")]
    summary = summarize(rows, device="cpu")
    for per_baseline in summary.fast.values():
        assert [f.text() for f in per_baseline if f.p > 0] == ["n/a"] * len([f for f in per_baseline if f.p > 0])


def test_a_board_names_the_kernels_this_machine_could_not_check():
    rows = [Row(task="add", task_path="add.py", status="not_checkable"),
            Row(task="relu", task_path="relu.py", status="not_run"),
            Row(task="gelu", task_path="gelu.py", status="mismatch")]
    notes = " ".join(summarize(rows, device="cpu").notes)
    assert "not checked on this machine: add, relu" in notes and "gelu" not in notes

