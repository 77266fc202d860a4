"""The report page: a run (or every run of a leaderboard) as one self-contained HTML document.

Everything the page needs is inside it: the stylesheet and the small script
are inlined from report.css and report.js next to this file, code is
highlighted here with pygments, charts are inline SVG. Opening it fetches
nothing, so it can be mailed, archived or opened offline.

    from agent.report.page import run_page, board_page
    html = run_page(store, "20261129-134501-softmax-a1b2")
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from agent.records import Attempt, Run, closest_attempt
from agent.report.charts import Point, speedup_chart, stall_chart
from agent.report.code import code_css, highlight_diff, highlight_python
from agent.store import Store, utc_now

HERE = Path(__file__).resolve().parent


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def run_anchor(run_id: str) -> str:
    """The id of a run's section (ids that start with a digit are awkward in CSS selectors)."""
    return f"run-{run_id}"


def attempt_anchor(run_id: str, number: int) -> str:
    return f"run-{run_id}-attempt-{number}"


def _badge(status: str) -> str:
    return f'<span class="badge {_e(status)}">{_e(status)}</span>'


def _fact(key: str, value: str) -> str:
    return f'<div class="fact"><span class="k">{_e(key)}</span><span class="v">{value}</span></div>'


def _x(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "-"


def page(title: str, body: str) -> str:
    """The document around a body: inline CSS and JS, no external reference of any kind."""
    css = (HERE / "report.css").read_text(encoding="utf-8") + "\n" + code_css()
    js = (HERE / "report.js").read_text(encoding="utf-8")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        # NOTE: the policy forbids every fetch: a report must never reach the network, even by mistake
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
        "script-src 'unsafe-inline'; img-src data:\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        f"<title>{_e(title)}</title><style>{css}</style></head><body><main>"
        '<div class="toolbar"><button type="button" data-action="expand">expand all</button>'
        '<button type="button" data-action="collapse">collapse all</button></div>'
        f"{body}"
        f'<footer>kgen report, {_e(utc_now())}. Self-contained: opening this page fetches nothing.</footer>'
        f"</main><script>{js}</script></body></html>\n"
    )


# ---- one run ---------------------------------------------------------------------------------------


def _best_facts(run: Run, best: Attempt | None, closest: Attempt | None = None) -> list[str]:
    if best is None:
        facts = [_fact("best kernel", "none correct")]
        if closest is not None:
            facts.append(_fact("closest", _e(f"attempt {closest.number}: {closest.status}")))
        return facts
    facts = [_fact("best kernel", f"attempt {best.number}")]
    speedups = best.speedups
    if best.median_ms is None:
        facts.append(_fact("speedup", "not timed" + (" (no GPU)" if run.device != "cuda" else "")))
        return facts
    compile_values = [v for k, v in speedups.items() if k.startswith("compile")]
    facts.append(_fact("time", f"{best.median_ms:.4g} ms"))
    facts.append(_fact("vs eager", _x(speedups.get("eager"))))
    facts.append(_fact("vs torch.compile", _x(min(compile_values) if compile_values else None)))
    if best.sol_pct is not None:
        facts.append(_fact("speed-of-light", f"{best.sol_pct:.0f}%"))
    return facts


def _task_source(run: Run) -> str | None:
    path = Path(run.task_path)
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


def _points(attempts: list[Attempt]) -> list[Point]:
    points = []
    for a in attempts:
        speedups = a.speedups
        points.append(Point(number=a.number, status=a.status, speedup=a.speedup if a.passed else None,
                            speedup_eager=speedups.get("eager") if a.passed else None, reason=a.reason))
    return points


def _untimed_note(run: Run, attempts: list[Attempt]) -> tuple[str, str]:
    """(a line short enough for the chart, the explanation above it) when nothing was timed."""
    if run.device != "cuda":
        return ("Nothing was timed (no GPU): each square is one attempt's verdict.",
                "This run had no GPU, so no kernel was timed: each was checked for correctness under the Triton "
                "interpreter on the task's small inputs. Speedups need a GPU.")
    if not any(a.passed for a in attempts):
        return ("No attempt was correct, so none was timed: each square is one attempt's verdict.", "")
    return ("No attempt carries a time: each square is one attempt's verdict.", "")


def _stall_section(run: Run, best: Attempt | None) -> str:
    if best is None:
        return '<p class="muted">No correct kernel: nothing to profile.</p>'
    profile = best.profile
    if profile is None:
        if run.device != "cuda":
            return ('<p class="muted">Not profiled: Nsight Compute needs a GPU, and this run had none.</p>')
        return '<p class="muted">The best kernel was not profiled.</p>'
    parts = []
    bound = profile.bound or "unknown"
    parts.append(f"<p>Bound: <strong>{_e(bound)}</strong>"
                 + (f" &middot; kernel <code>{_e(profile.kernel)}</code>" if profile.kernel else "")
                 + (f" &middot; source {_e(profile.source)}" if profile.source else "") + "</p>")
    parts.append(stall_chart(profile))
    fixes = [s for s in profile.top_stalls if s.fix]
    findings = [f for f in profile.findings if f]
    if fixes or findings:
        parts.append('<ul class="fixes">')
        parts += [f"<li><strong>{_e(s.reason)}</strong>: {_e(s.fix)}</li>" for s in fixes]
        parts += [f"<li>{_e(f)}</li>" for f in findings]
        parts.append("</ul>")
    return "".join(parts)


def _attempt_summary(run: Run, a: Attempt, closest: Attempt | None = None) -> str:
    figs = []
    if a.median_ms is not None:
        figs.append(f"{a.median_ms:.4g} ms")
    if a.passed:
        figs.append(f"{a.speedup:.2f}x" if a.speedup is not None else "not timed")
    if a.top_stall:
        figs.append(f"stall: {a.top_stall}")
    best = " &#9733; best" if a.number == run.best_attempt else ""
    if closest is not None and a.number == closest.number:
        best = " &#9734; closest"
    return (f'<span class="sum-num">#{a.number}</span>{_badge(a.status)}{best}'
            f'<span class="sum-fig">round {a.round}{" &middot; " + " &middot; ".join(_e(f) for f in figs) if figs else ""}'
            f'</span> &nbsp;{_e(a.reason[:200])}')


def _attempt_block(store: Store, run: Run, a: Attempt, previous: tuple[int, str] | None, source: str | None,
                   closest: Attempt | None = None) -> str:
    anchor = attempt_anchor(run.run_id, a.number)
    body = [f"<p><strong>{_e(a.status)}</strong>: {_e(a.reason)}</p>"]
    if a.note:
        body.append(f"<p class=\"muted\">proposer's note: {_e(a.note)}</p>")
    if a.feedback and not a.passed:
        body.append(f'<h4>feedback</h4><pre class="feedback">{_e(a.feedback)}</pre>')
    for flag in (a.verify.flags if a.verify is not None else []):
        body.append(f'<div class="note">{_e(flag)}</div>')
    if a.speedups:
        body.append("<p>" + " &middot; ".join(f"{_e(k)} {_x(v)}" for k, v in a.speedups.items()) + "</p>")
    if source is not None:
        if previous is not None:
            body.append(f"<h4>diff against attempt {previous[0]}</h4>")
            body.append(f'<div class="code diff">{highlight_diff(previous[1], source, f"attempt {previous[0]}", f"attempt {a.number}")}</div>')
        body.append("<h4>kernel</h4>")
        body.append(f'<div class="code kernel">{highlight_python(source)}</div>')
    else:
        body.append('<p class="muted">No kernel: the reply held no usable code.</p>')
    body.append(f'<p class="paths">files: {_e(store.attempt_dir(run.run_id, a.number))}/</p>')
    css = "attempt best" if a.number == run.best_attempt else "attempt"
    if closest is not None and a.number == closest.number:
        css = "attempt closest"
    return (f'<details class="{css}" id="{_e(anchor)}"><summary>{_attempt_summary(run, a, closest)}</summary>'
            f'<div class="body">{"".join(body)}</div></details>')


def _closest_panel(store: Store, run: Run, closest: Attempt | None) -> str:
    """The best kernel's place in a run with no correct kernel: its closest attempt, why it failed, its code."""
    if closest is None:
        return '<div><h4>best kernel</h4><p class="muted">no attempt was made</p></div>'
    source = store.attempt_text(run.run_id, closest.number, "kernel.py")
    out = [f'<div class="closest"><h4>no correct kernel; closest: attempt {closest.number} {_badge(closest.status)}</h4>',
           f'<p class="failure"><strong>why it failed</strong>: {_e(closest.reason)}</p>']
    if closest.feedback:
        out.append(f'<pre class="feedback">{_e(closest.feedback)}</pre>')
    out.append(f'<div class="code closest">{highlight_python(source)}</div>' if source is not None else
               '<p class="muted">No kernel: the reply held no usable code.</p>')
    return "".join(out) + "</div>"


def run_section(store: Store, run: Run, *, level: int = 1) -> str:
    """One run: facts, task and best kernel side by side, the charts, every attempt."""
    attempts = store.load_attempts(run.run_id)
    best = store.load_attempt(run.run_id, run.best_attempt) if run.best_attempt is not None else None
    best_source = store.best_source(run.run_id)
    # NOTE: a run with no correct kernel still shows one: its nearest miss, with why it failed
    closest = closest_attempt(attempts) if best is None else None
    folder = store.run_dir(run.run_id)
    h, sub = f"h{level}", f"h{min(level + 1, 6)}"
    model = f" ({run.model})" if run.model else ""
    out = [f'<section class="run" id="{_e(run_anchor(run.run_id))}">',
           f"<{h}>{_e(run.task)} <span class=\"muted\">&middot; run {_e(run.run_id)}</span> {_badge(run.status)}</{h}>",
           f'<p class="why">{_e(run.stop_reason or "")}</p>']
    if run.best_ncu_check:      # the best kernel's claimed time against ncu's device time, or why not checked
        out.append(f'<p class="why">{_e(run.best_ncu_check)}</p>')
    out.append('<div class="facts">')
    out += _best_facts(run, best, closest)
    out += [_fact("attempts", f"{run.attempts} in {run.rounds} round(s)"),
            _fact("proposer", _e(f"{run.proposer or '-'}{model}")),
            _fact("where", _e(f"{run.backend} on {run.gpu or run.device}")),
            _fact("tokens / cost", _e(f"{run.tokens:,} / ${run.cost_usd:.4f}")),
            _fact("wall time", _e(f"{run.wall_s:.0f} s")), "</div>",
            f'<p class="paths">files: {_e(folder)}/ &middot; task {_e(run.task_path)}</p>']

    task_source = _task_source(run)
    out.append(f"<{sub}>Task and {'best' if best_source is not None or closest is None else 'closest'} kernel"
               f"</{sub}><div class=\"side\">")
    out.append(f"<div><h4>task: {_e(Path(run.task_path).name)}</h4>"
               + (f'<div class="code task">{highlight_python(task_source)}</div>' if task_source is not None
                  else f'<p class="muted">the task file is no longer at {_e(run.task_path)}</p>') + "</div>")
    if best_source is not None:
        out.append(f'<div><h4>best kernel: attempt {run.best_attempt} (best.py)</h4>'
                   f'<div class="code best">{highlight_python(best_source)}</div></div>')
    else:
        out.append(_closest_panel(store, run, closest))
    out.append("</div>")

    out.append(f"<{sub}>Speedup per attempt</{sub}>")
    timed = run.device == "cuda" and any(a.median_ms is not None for a in attempts)
    short, long = _untimed_note(run, attempts)
    if not timed and long:
        out.append(f'<p class="muted">{_e(long)}</p>')
    out.append(speedup_chart(_points(attempts), timed=timed, untimed_note=short))
    out.append(f"<{sub}>Where the best kernel stalls</{sub}>")
    out.append(_stall_section(run, best))

    out.append(f"<{sub}>Attempts</{sub}>")
    previous: tuple[int, str] | None = None
    for a in attempts:
        source = store.attempt_text(run.run_id, a.number, "kernel.py")
        out.append(_attempt_block(store, run, a, previous, source, closest))
        if source is not None:
            previous = (a.number, source)
    out.append("</section>")
    return "".join(out)


def run_page(store: Store, run_id: str) -> str:
    run = store.load_run(run_id)
    return page(f"kgen: {run.task} {run.run_id}", run_section(store, run, level=1))


# ---- a leaderboard ----------------------------------------------------------------------------------


def board_page(store: Store, board) -> str:
    """The board's summary and task table, each task linked to its run's section further down."""
    from agent.board.render import summary_cells, summary_headers

    s = board.summary()
    where = board.gpu or ("CPU: nothing timed" if board.device == "cpu" else board.device)
    out = [f"<h1>Leaderboard {_e(board.name)}</h1>",
           f'<p class="muted">{_e(board.mode)} &middot; suite {_e(board.suite)} &middot; {s.done}/{s.tasks} tasks '
           f"done &middot; {_e(where)} &middot; updated {_e(board.updated_at)}</p>",
           "<h2>Summary</h2><p>fast_p: the share of all tasks whose kernel is correct and strictly more than p times "
           "faster than the baseline (fast_0: correct).</p>",
           '<table class="grid summary"><tr><th>against</th>'
           + "".join(f"<th>{_e(h)}</th>" for h in summary_headers()) + "</tr>"]
    for label, cells in summary_cells(s):
        out.append(f"<tr><th>{_e(label)}</th>" + "".join(f'<td class="num">{_e(c)}</td>' for c in cells) + "</tr>")
    out.append("</table>")
    out.append(f"<p>{s.correct} of {s.tasks} correct, {s.timed} timed &middot; tokens {s.tokens:,} &middot; "
               f"cost ${s.cost_usd:.4f} &middot; {s.wall_s:.0f} s of task time</p>")
    out += [f'<div class="note">{_e(n)}</div>' for n in s.notes]

    runs: dict[str, Run] = {}
    for row in board.rows:
        if row.run_id:
            try:
                runs[row.task] = store.load_run(row.run_id)
            except KeyError:
                pass
    out.append('<h2>Tasks</h2><table class="grid tasks"><tr><th>task</th><th>status</th><th>vs eager</th>'
               "<th>vs torch.compile</th><th>% SOL</th><th>attempts</th><th>tokens</th><th>cost</th><th>wall</th>"
               "<th>reason</th></tr>")
    for row in board.rows:
        name = (f'<a href="#{_e(run_anchor(row.run_id))}">{_e(row.task)}</a>' if row.task in runs else _e(row.task))
        out.append(f"<tr><td>{name}</td><td>{_badge(row.status)}</td>"
                   f'<td class="num">{_e(row.speedup_text("eager"))}</td>'
                   f'<td class="num">{_e(row.speedup_text("compile"))}</td><td class="num">{_e(row.sol_text())}</td>'
                   f'<td class="num">{row.attempts}</td><td class="num">{row.tokens:,}</td>'
                   f'<td class="num">${row.cost_usd:.4f}</td><td class="num">{row.wall_s:.0f} s</td>'
                   f'<td class="reason">{_e(row.reason)}</td></tr>')
    out.append("</table>")
    for row in board.rows:
        run = runs.get(row.task)
        if run is not None:
            out.append(run_section(store, run, level=2))
    return page(f"kgen leaderboard {board.name}", "".join(out))
