"""`kgen report`: the self-contained HTML page for a run or a leaderboard, checked as text and in Chromium.

Two runs feed it: a real CPU run (the loop, the verifier and the OpenAI
proposer against a scripted endpoint on loopback: a kernel that does not
compile, then a correct one) and the hand-made GPU-style run of test_show
(timed attempts and a profile), with a leaderboard over it. The browser tests
open the pages in headless Chromium (skipped, saying why, where
/usr/bin/chromium or Playwright is missing) and record every request.

    .venv/bin/python -m pytest tests/agent/test_report.py -q
"""

from __future__ import annotations

import html as htmllib
import re
from pathlib import Path

import pytest

from agent.cli import main
from agent.config import OptimizeConfig
from agent.graph import optimize
from agent.board.files import load_board
from agent.proposers.openai import OpenAIConfig, OpenAIProposer
from agent.report.page import attempt_anchor, board_page, run_anchor, run_page
from agent.store import Store
from openai_server import ScriptedOpenAIServer
from test_show import BEST_MARK, make_results

ROOT = Path(__file__).resolve().parents[2]
GELU = (ROOT / "tests" / "verifier" / "candidates" / "good" / "gelu.py").read_text()
GELU_BROKEN = GELU.replace("class ModelNew(nn.Module):", "class ModelNew(nn.Module)", 1)
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-default-apps", "--no-first-run"]


def text_of(page_html: str) -> str:
    """The page's text, tags removed: what highlighting splits into spans reads whole again."""
    return htmllib.unescape(re.sub(r"<[^>]+>", "", page_html))


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """A results folder with the hand-made runs and board, plus one real CPU run of gelu."""
    root = tmp_path_factory.mktemp("report") / "results"
    ids = make_results(root)
    server = ScriptedOpenAIServer([f"```python\n{GELU_BROKEN}```", f"Fixed.\n```python\n{GELU}```"]).start()
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("OPENAI_API_KEY", "sk-test-kgen-report-77aa")
            proposer = OpenAIProposer(OpenAIConfig(model="test-model", base_url=server.base_url))
            run = optimize(ROOT / "tasks" / "gelu.py", OptimizeConfig(results_dir=str(root), device="cpu"),
                           proposer=proposer)
    finally:
        server.stop()
    ids["real"] = run.run_id
    return root, ids


@pytest.fixture(scope="module")
def gpu_page(results) -> str:
    root, ids = results
    return run_page(Store(root), ids["gpu"])


@pytest.fixture(scope="module")
def cpu_page(results) -> str:
    root, ids = results
    return run_page(Store(root), ids["real"])


# ---- the page as text ------------------------------------------------------------------------------


def test_the_real_cpu_run_has_two_attempts(results):
    root, ids = results
    assert [a.status for a in Store(root).load_attempts(ids["real"])] == ["compile_error", "ok"]


def test_task_and_best_kernel_are_side_by_side_and_highlighted(gpu_page):
    side = gpu_page[gpu_page.index('<div class="side">'):]
    task_at, best_at = side.index('class="code task"'), side.index('class="code best"')
    assert task_at < best_at
    best_block = side[best_at:side.index("</pre>", best_at)]
    assert 'class="hl' in best_block and BEST_MARK in text_of(best_block)
    assert '<span class="k">class</span>' in best_block        # pygments' keyword class: highlighted here


def test_the_run_says_how_its_best_kernels_time_stood_against_ncu(gpu_page, cpu_page):
    assert "ncu cross-check: consistent (claimed 0.3840 ms per call" in gpu_page
    assert "ncu cross-check: not run (nothing was timed (no GPU)" in cpu_page


def test_timed_run_charts_each_passing_attempt_and_marks_the_failure(gpu_page):
    chart = re.search(r'<svg class="chart speedup-chart".*?</svg>', gpu_page, re.S).group(0)
    assert chart.count('class="attempt-mark"') == 2              # two correct attempts, as points
    assert chart.count('class="attempt-mark failed"') == 1       # the compile error, as a cross
    assert "1.25x over the faster baseline" in chart


def test_untimed_run_chart_says_nothing_was_timed(cpu_page):
    chart = re.search(r'<svg class="chart speedup-chart untimed".*?</svg>', cpu_page, re.S).group(0)
    assert "Nothing was timed (no GPU)" in chart
    assert "<circle" not in chart


def test_stall_breakdown_of_the_best_kernel_is_a_bar_chart(gpu_page):
    chart = re.search(r'<svg class="chart stall-chart".*?</svg>', gpu_page, re.S).group(0)
    assert "long_scoreboard" in chart and "52%" in chart and "memory SOL (DRAM)" in chart
    assert "more loads in flight" in gpu_page                    # the fix each stall calls for


def test_cpu_run_says_why_there_is_no_stall_breakdown(cpu_page):
    assert "Not profiled: Nsight Compute needs a GPU" in cpu_page


def test_every_attempt_is_expandable_to_its_kernel_and_a_diff_against_the_previous(gpu_page, results):
    _, ids = results
    for number in (1, 2, 3):
        assert f'<details class="attempt' in gpu_page and f'id="{attempt_anchor(ids["gpu"], number)}"' in gpu_page
    second = gpu_page[gpu_page.index(f'id="{attempt_anchor(ids["gpu"], 2)}"'):
                      gpu_page.index(f'id="{attempt_anchor(ids["gpu"], 3)}"')]
    text = text_of(second)
    assert "diff against attempt 1" in text
    assert "-LOOP_BLOCK = 1024" in text and "+LOOP_BLOCK = 2048" in text


def test_a_failed_attempt_shows_the_verifiers_feedback(cpu_page):
    assert "not valid Python" in text_of(cpu_page)


def test_the_page_references_nothing_outside_itself(gpu_page):
    assert not re.search(r"""(src|href)\s*=\s*["'](?!#)""", gpu_page)      # only in-page anchors
    assert "@import" not in gpu_page and "url(" not in gpu_page
    # the one URL in the page is SVG's namespace name, which is never fetched
    assert set(re.findall(r"https?://[^\s\"'<>]+", gpu_page)) <= {"http://www.w3.org/2000/svg"}


def test_board_page_links_each_task_to_its_section(results):
    root, ids = results
    page = board_page(Store(root), load_board(root, "nightly"))
    assert f'href="#{run_anchor(ids["gpu"])}"' in page
    assert f'<section class="run" id="{run_anchor(ids["gpu"])}">' in page
    assert "fast_1.5" in page and "100.0% (1/1)" in page


# ---- the command -----------------------------------------------------------------------------------


def test_report_writes_into_the_runs_folder_by_default(results, capsys):
    root, ids = results
    assert main(["report", ids["real"], "--results", str(root)]) == 0
    path = Store(root).run_dir(ids["real"]) / "report.html"
    assert path.exists() and "class ModelNew" in text_of(path.read_text())
    assert str(path) in capsys.readouterr().out


def test_report_of_a_leaderboard_goes_to_the_given_file(results, tmp_path):
    root, _ = results
    out = tmp_path / "board.html"
    assert main(["report", "nightly", "--results", str(root), "-o", str(out)]) == 0
    assert "Leaderboard nightly" in out.read_text()


def test_report_of_an_unknown_name_is_exit_code_2(results, capsys):
    root, _ = results
    assert main(["report", "nothing-by-this-name", "--results", str(root)]) == 2


# ---- in the browser --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is not installed: the pages cannot be opened in a browser here")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("the playwright package is not installed (pip install 'kgen[test]')")
    with sync_playwright() as p:
        instance = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield instance
        instance.close()


def open_page(browser, path: Path):
    """The page loaded from its file, with every request and script error recorded."""
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    requests, errors = [], []
    page.on("request", lambda r: requests.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(path.resolve().as_uri())
    page.wait_for_load_state("load")
    return page, requests, errors


def only_own_requests(requests: list[str], path: Path) -> bool:
    own = path.resolve().as_uri()
    return all(url.split("#")[0] == own or url.startswith(("about:", "data:")) for url in requests)


def test_browser_renders_the_run_page_with_its_code_and_chart(browser, gpu_page, tmp_path):
    path = tmp_path / "run.html"
    path.write_text(gpu_page)
    page, requests, errors = open_page(browser, path)
    try:
        assert "class ModelNew" in page.locator(".code.best").inner_text()
        chart = page.locator("svg.speedup-chart")
        assert chart.is_visible() and chart.bounding_box()["width"] > 300
        assert page.locator("svg.speedup-chart circle.attempt-mark").count() == 2
        assert page.locator("svg.stall-chart").is_visible()
        assert errors == []
        assert requests and only_own_requests(requests, path), requests
    finally:
        page.close()


def test_browser_expands_an_attempt_to_its_diff(browser, gpu_page, results, tmp_path):
    _, ids = results
    path = tmp_path / "run.html"
    path.write_text(gpu_page)
    page, requests, errors = open_page(browser, path)
    try:
        attempt = page.locator(f"#{attempt_anchor(ids['gpu'], 2)}")
        assert not attempt.locator(".code.diff").is_visible()
        page.click("button[data-action=expand]")
        assert attempt.locator(".code.diff").is_visible()
        assert "+LOOP_BLOCK = 2048" in attempt.locator(".code.diff").inner_text()
        assert errors == [] and only_own_requests(requests, path)
    finally:
        page.close()


def test_browser_follows_a_board_link_to_the_task_section(browser, results, tmp_path):
    root, ids = results
    path = tmp_path / "board.html"
    path.write_text(board_page(Store(root), load_board(root, "nightly")))
    page, requests, errors = open_page(browser, path)
    try:
        page.click(f"a[href='#{run_anchor(ids['gpu'])}']")
        assert page.locator(f"#{run_anchor(ids['gpu'])}").is_visible()
        assert page.evaluate("window.scrollY") > 0
        assert errors == [] and only_own_requests(requests, path), requests
    finally:
        page.close()


def test_browser_renders_the_untimed_cpu_run(browser, cpu_page, tmp_path):
    path = tmp_path / "cpu.html"
    path.write_text(cpu_page)
    page, requests, errors = open_page(browser, path)
    try:
        assert "Nothing was timed (no GPU)" in page.locator("svg.speedup-chart").inner_html()
        assert "class ModelNew" in page.locator(".code.best").inner_text()
        assert errors == [] and only_own_requests(requests, path)
    finally:
        page.close()


def test_output_folder_gets_report_html_inside(tmp_path):
    from agent.commands.report import _output_path

    folder = tmp_path / "pages"
    folder.mkdir()
    assert _output_path(str(folder)) == folder / "report.html"
    assert _output_path(str(tmp_path / "new") + "/") == tmp_path / "new" / "report.html"
    assert _output_path(str(tmp_path / "x.html")) == tmp_path / "x.html"
    assert _output_path(None) == ""


def test_output_under_a_file_is_a_usage_error(tmp_path, capsys):
    from agent.commands.report import _output_path

    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    assert _output_path(str(blocker / "report.html")) is None
    assert "is not a folder" in capsys.readouterr().err


# ---- long lines wrap; a failed run shows its closest kernel --------------------------------------------

LONG_LINE = ("    y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))  # " + "the exact form of GELU, " * 12
             + "END-OF-THE-LONG-LINE")


def failed_run(root: Path) -> str:
    """A stored run with no correct kernel: a compile error, a mismatch (the closest), a runtime error."""
    from agent.records import Attempt, Run
    from verifier.records import VerifyResult

    store = Store(root)
    run = Run(run_id="20261201-120000-gelu-cccc", task="gelu", task_path=str(ROOT / "tasks" / "gelu.py"),
              proposer="openai", model="test-model", backend="triton", device="cpu", status="failed",
              stop_reason="no correct kernel: 3 round(s) done (--max-iters 3)", attempts=3, rounds=3)
    store.create_run(run)
    near = GELU.replace("    y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))  # 0.707... = 1 / sqrt(2)",
                        LONG_LINE)
    for number, status, reason, source in [
            (1, "compile_error", "not valid Python (line 37)", GELU_BROKEN),
            (2, "mismatch", "trial 2 (seed 1): 9 of 99187 elements differ (0.01%)", near),
            (3, "runtime_error", "raised in ModelNew.forward: IndexError", GELU + "\n# attempt three\n")]:
        verdict = VerifyResult(status=status, reason=reason, task="gelu", trials=1 if status == "mismatch" else 0,
                               feedback=f"FEEDBACK-OF-{number}")
        store.save_attempt(run, Attempt(run_id=run.run_id, number=number, round=number, status=status,
                                        reason=reason, feedback=verdict.feedback, verify=verdict), source=source)
    store.save_run(run)
    return run.run_id


@pytest.fixture(scope="module")
def failed_page(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("failed") / "results"
    return run_page(Store(root), failed_run(root))


def test_a_failed_runs_page_shows_its_closest_kernel_with_why_it_failed(failed_page):
    side = failed_page[failed_page.index('<div class="side">'):failed_page.index("Speedup per attempt")]
    text = text_of(side)
    assert "closest: attempt 2" in text and "mismatch" in text
    assert "why it failed: trial 2 (seed 1): 9 of 99187 elements differ" in text
    assert "FEEDBACK-OF-2" in text and "END-OF-THE-LONG-LINE" in text   # its verifier's feedback and its code


def test_every_line_of_a_kernel_is_one_wrapping_block_with_its_number(failed_page):
    block = failed_page[failed_page.index('class="code closest"'):]
    block = block[:block.index("</pre>")]
    lines = re.findall(r'<span class="line">(.*?)</span>(?=<span class="line">|$)', block, re.S)
    long_lines = [text_of(line) for line in lines if "END-OF-THE-LONG-LINE" in text_of(line)]
    assert len(long_lines) == 1 and long_lines[0].endswith("END-OF-THE-LONG-LINE"), long_lines
    assert re.match(r"\s*\d+ {4}y = 0\.5", long_lines[0])          # its number, then the whole line


def test_browser_wraps_long_code_lines_instead_of_cropping_them(browser, failed_page, tmp_path):
    path = tmp_path / "failed.html"
    path.write_text(failed_page)
    page, requests, errors = open_page(browser, path)
    try:
        page.click("button[data-action=expand]")
        for box in page.locator(".code").all():
            # nothing runs out of its box sideways: every character is on screen without scrolling
            assert box.evaluate("e => e.scrollWidth <= e.clientWidth"), box.get_attribute("class")
        end = page.locator(".code.closest .line", has_text="END-OF-THE-LONG-LINE")
        box, line = page.locator(".code.closest").bounding_box(), end.bounding_box()
        assert line["x"] + line["width"] <= box["x"] + box["width"] and line["height"] > 30   # wrapped, inside
        assert errors == [] and only_own_requests(requests, path)
    finally:
        page.close()
