"""`kgen optimize TASK`: search for a kernel faster than PyTorch, verified, and store the run.

    kgen optimize tasks/softmax.py                       # heuristic proposer, or an LLM when one is configured
    OPENAI_API_KEY=... kgen optimize tasks/matmul.py --model gpt-4.1 --candidates 2 --max-iters 8
    kgen optimize tasks/x.py --base-url http://localhost:8000/v1 --model Qwen/Qwen2.5-Coder-32B-Instruct
    kgen optimize --resume 20261129-134501-softmax-a1b2  # continue an interrupted run

While it runs, a live table (on a terminal) or progress lines (otherwise) go
to stderr; at the end stdout gets the best kernel's path, its speedups (or
"not timed: no GPU") and how to review it; with --json, the run and its best
attempt as one JSON object instead. Every flag is one field of
agent.config.OptimizeConfig. With --resume the run's stored settings apply,
and flags given explicitly replace them (say, a larger --max-iters).

Exit codes: 0 a verified kernel was found; 1 none was (or the proposer
failed: the run is stored as failed); 2 bad usage or a malformed task;
3 no kernel could be checked on this machine (every attempt a CUDA kernel with
no GPU here: not_run or not_checkable, as `kgen verify`'s 3);
130 interrupted (the run is stored and resumable).

The run's duration (`wall_s`, and its `phases`: start-up, analysis, proposing,
verifying, profiling, other, which add up to it) is wall clock from the
command's start, summed over resumes.
"""

from __future__ import annotations

import argparse
import json
import sys

from agent.config import BACKENDS, DEVICES, PROPOSERS, OptimizeConfig
from agent.flags import positive_float, positive_int, small_shapes
from agent.commands.verify import NOT_CHECKED_EXIT
from verifier.records import NOT_CHECKED_HERE, TIMING_METHODS, printable

# flag dest -> OptimizeConfig field, for every flag that sets one
FIELDS = {
    "backend": "backend", "proposer": "proposer", "model": "model", "base_url": "base_url",
    "temperature": "temperature", "candidates": "candidates", "max_iters": "max_iters", "target": "target",
    "sol": "sol", "patience": "patience", "budget_usd": "budget_usd", "budget_tokens": "budget_tokens",
    "timeout": "timeout_s", "device": "device", "keep_going": "keep_going",
    "verify_timeout": "verify_timeout_s", "timing": "timing", "results": "results_dir",
    "small_shapes": "small_shapes", "memory_budget": "memory_budget_gib",
}


def register(sub) -> None:
    p = sub.add_parser("optimize", help="search for a faster kernel for one task (LLM or heuristic proposer)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("task", nargs="?", help="task file (KernelBench format); optional with --resume")
    add_optimize_flags(p)
    p.add_argument("--resume", metavar="RUN_ID", help="continue a stored run (an id, a unique prefix, or latest)")
    p.add_argument("--json", action="store_true",
                   help="print the stored run and its best attempt as JSON on stdout instead of the summary")
    p.set_defaults(func=run)


def add_optimize_flags(p) -> None:
    """The flags that set an OptimizeConfig (a parser or an argument group; `kgen leaderboard` shares them)."""
    d = OptimizeConfig.__dataclass_fields__
    # NOTE: every default is None here so that --resume can tell a flag given from one left out;
    # the defaults that apply are OptimizeConfig's, shown in the help.
    p.add_argument("--backend", choices=BACKENDS, help=f"kernel language (default {d['backend'].default})")
    p.add_argument("--proposer", choices=PROPOSERS,
                   help="auto: openai when OPENAI_API_KEY, OPENAI_BASE_URL or --base-url is set, else heuristic")
    p.add_argument("--model", help="model name for the LLM proposer (default $KGEN_MODEL; on OpenAI's own "
                                   "endpoint gpt-4.1)")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 "
                                      "(default $OPENAI_BASE_URL, else OpenAI)")
    p.add_argument("--temperature", type=float, help="sampling temperature for the LLM")
    p.add_argument("--candidates", type=positive_int, metavar="N",
                   help=f"proposals per round (default {d['candidates'].default})")
    p.add_argument("--max-iters", type=positive_int, metavar="N", help=f"rounds at most (default {d['max_iters'].default})")
    p.add_argument("--target", type=positive_float, metavar="X",
                   help=f"stop at this speedup over the faster of eager and torch.compile "
                        f"(default {d['target'].default})")
    p.add_argument("--sol", type=float, metavar="PCT", help="also stop at this %% of speed-of-light")
    p.add_argument("--patience", type=positive_int, metavar="N",
                   help=f"stop after N rounds without a better kernel (default {d['patience'].default})")
    p.add_argument("--budget-usd", type=positive_float, metavar="X", help="stop once the LLM has cost this many dollars")
    p.add_argument("--budget-tokens", type=positive_int, metavar="N", help="stop once this many tokens were used")
    p.add_argument("--timeout", type=positive_float, metavar="S", help="stop after S seconds of wall-clock time")
    p.add_argument("--device", choices=DEVICES, help="where candidates run (default auto: CUDA when present)")
    p.add_argument("--keep-going", action="store_true", default=None,
                   help="do not stop when the goal is met; use the whole budget looking for faster kernels")
    p.add_argument("--verify-timeout", type=positive_float, metavar="S",
                   help=f"wall-clock limit per candidate (default {d['verify_timeout_s'].default:g} s)")
    p.add_argument("--timing", choices=TIMING_METHODS,
                   help="graph: candidate and baselines replayed from CUDA graphs, the device's time (default); "
                        "events: each call timed as issued, the host's cost of the call included; "
                        "kernelbench: KernelBench's protocol (events per call, same inputs, mean of the trials)")
    p.add_argument("--results", metavar="DIR", help="results folder (default $KGEN_RESULTS, else results)")
    p.add_argument("--small-shapes", type=small_shapes, metavar="NAME=VALUE,...",
                   help="on the CPU: check on these values of the task's module-level size constants "
                        "(e.g. batch_size=7,dim=129) instead of its small or derived shapes")
    p.add_argument("--memory-budget", type=positive_float, metavar="GIB",
                   help="memory one verification may hold at once on its device, both processes together "
                        "(default: the GPU's free memory; on a CPU the host's available memory)")


def config_from_args(args, base: OptimizeConfig | None = None) -> OptimizeConfig:
    """The config the flags describe, over `base` (a resumed run's) or over the defaults."""
    given = {field: getattr(args, dest) for dest, field in FIELDS.items() if getattr(args, dest, None) is not None}
    return base.replace(**given) if base is not None else OptimizeConfig(**given)


def _error(message: str) -> None:
    print(f"kgen optimize: error: {message}", file=sys.stderr)


def run(args) -> int:
    from agent.graph import optimize
    from agent.live import make_view
    from agent.proposers.base import ProposerError
    from agent.store import Store
    from verifier.task import TaskError

    try:
        config = config_from_args(args)
        resume = args.resume
        if resume is not None:
            store = Store(config.results_dir)
            stored = store.load_run(store.resolve_run_id(resume))
            config = config_from_args(args, OptimizeConfig.from_dict(
                {**stored.config, "results_dir": config.results_dir}))
            if stored.status == "succeeded" and not config.keep_going:
                # NOTE: a run that met its goal meets it again at once: more rounds alone do not reopen it
                print(f"kgen optimize: note: run {stored.run_id} met its goal; it stops again at once unless "
                      "--keep-going asks for the rest of the budget", file=sys.stderr)
        elif args.task is None:
            _error("a task file is needed (or --resume RUN_ID)")
            return 2
    except (ValueError, KeyError) as exc:
        _error(str(exc).strip("'\""))
        return 2
    errors, notes = config.proposer_problems()
    if errors:
        _error(errors[0])
        return 2
    for note in notes:
        print(f"kgen optimize: note: {note}", file=sys.stderr)

    view = make_view(sys.stderr)
    try:
        with view:
            run_ = optimize(args.task, config, resume=resume, on_event=view.handle,
                            started_s=getattr(args, "started_s", None))
    except TaskError as exc:
        _error(str(exc))
        return 2
    except ValueError as exc:      # --device cuda without a GPU, a task that is not the run's
        _error(str(exc))
        return 2
    except ProposerError as exc:   # the proposer could not be built: a configuration to fix, nothing ran
        _error(str(exc))
        return 2

    store = Store(config.results_dir)
    print(json.dumps(run_record(run_, store), indent=2, default=str) if args.json else summary(run_, store))
    if run_.status == "interrupted":
        return 130
    if run_.status == "failed" and run_.stop_reason.startswith("the proposer failed"):
        _error(run_.stop_reason)
    if run_.best_attempt is not None:
        return 0
    attempts = store.load_attempts(run_.run_id)
    if attempts and all(a.status in NOT_CHECKED_HERE for a in attempts):
        return NOT_CHECKED_EXIT   # as kgen verify: no kernel was found wrong, this machine could not check them
    return 1


def run_record(run_, store) -> dict:
    """`--json`: {"run": Run, "best": the best Attempt or null, "best_path": best.py or null}."""
    best = store.load_attempt(run_.run_id, run_.best_attempt) if run_.best_attempt is not None else None
    return {"run": run_.to_dict(), "best": best.to_dict() if best is not None else None,
            "best_path": str(store.run_dir(run_.run_id) / "best.py") if best is not None else None}


def phases_text(phases: dict[str, float]) -> str:
    """Where a run's wall time went, the phases in order, each to a tenth of a second (they sum to the total)."""
    return ", ".join(f"{name} {secs:.1f} s" for name, secs in phases.items())


def summary(run_, store) -> str:
    """The end of a run for a person: what was found, how fast, where it is, how to review it."""
    lines = [f"run {run_.run_id}: {run_.status} - {run_.stop_reason}"]
    if run_.best_attempt is not None:
        best = store.load_attempt(run_.run_id, run_.best_attempt)
        lines.append(f"best kernel: {store.run_dir(run_.run_id) / 'best.py'} (attempt {run_.best_attempt})")
        verify = best.verify if best is not None else None
        if verify is not None and verify.timing is not None:
            lines.append(f"time: {verify.timing.median_ms:.4f} ms median")
            for name, baseline in verify.baselines.items():
                speedup = verify.speedups.get(name)     # a baseline may have no speedup (the dict is sparse)
                lines.append(f"  vs {name}: {baseline.median_ms:.4f} ms -> "
                             + (f"{speedup:.2f}x" if speedup else "-"))
            if run_.best_sol_pct is not None:
                lines.append(f"  {run_.best_sol_pct:.0f}% of speed-of-light")
        else:
            shapes = next((f for f in (verify.flags if verify is not None else []) if f.startswith("checked on")), "")
            lines.append(f"speedup: not timed: no GPU; {shapes}" if shapes else
                         "speedup: not timed: no GPU (correct under the Triton interpreter)")
    else:
        lines.append("no verified kernel")
    if run_.best_ncu_check:
        lines.append(run_.best_ncu_check)
    lines.append(f"attempts: {run_.attempts} in {run_.rounds} round{'' if run_.rounds == 1 else 's'}; tokens {run_.tokens:,}; "
                 f"cost ${run_.cost_usd:.4f}; {run_.wall_s:.0f} s" + (f" ({phases_text(run_.phases)})" if run_.phases else ""))
    if run_.status == "interrupted" or (run_.status == "failed" and run_.best_attempt is None):
        lines.append(f"continue: kgen optimize --resume {run_.run_id}")
    lines.append(f"review: kgen show {run_.run_id}    kgen report {run_.run_id}")
    return printable("\n".join(lines))   # NOTE: the stop reason may quote a candidate's
