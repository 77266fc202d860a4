"""`kgen export FORMAT BOARD -o DIR`: a leaderboard in another tool's result formats.

    kgen export kernelbench nightly -o out/          # the board `kgen leaderboard --name nightly` wrote
    kgen export kernelbench results/leaderboards/nightly -o out/ --level 1

kernelbench: KernelBench's `eval_results.json` (one folder per level, named
<board>_level<L>) and its baseline-time JSON (`baseline_time_torch.json` for
eager, `baseline_time_torch_compile_inductor_<mode>.json` per compile mode),
so that KernelBench's own scripts/benchmark_eval_analysis.py runs on kgen's
results; the lines to run it are printed. Times are the board's timing
protocol's: `kgen leaderboard --timing kernelbench` times as KernelBench does.
See agent/kernelbench/export.py for the shapes. BOARD is a board's name under
--results, or its folder.

Exit codes: 0 written; 2 bad usage (no such board, no row that is a KernelBench problem).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

FORMATS = {"kernelbench": "KernelBench's eval_results.json and baseline-time JSON"}


def register(sub) -> None:
    p = sub.add_parser("export", help="write a leaderboard in another tool's result formats (kernelbench)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("format", choices=sorted(FORMATS), help="the format to write")
    p.add_argument("board", help="a board's name (under --results), or its folder")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="folder to write into")
    p.add_argument("--results", metavar="DIR", help="results folder (default $KGEN_RESULTS, else results)")
    p.add_argument("--level", type=int, metavar="L",
                   help="the KernelBench level of tasks whose folder is not named level<L>")
    p.set_defaults(func=run)


def _error(message: str) -> int:
    print(f"kgen export: error: {message}", file=sys.stderr)
    return 2


def find_board(text: str, results: str):
    """(results folder, board) for a board name under `results` or a board's folder; None when neither."""
    from agent.board.files import BOARD_JSON, LEADERBOARDS_DIR, load_board

    folder = Path(text)
    if folder.name == BOARD_JSON:
        folder = folder.parent
    if (folder / BOARD_JSON).is_file() and folder.parent.name == LEADERBOARDS_DIR:
        root = folder.parent.parent
        return root, load_board(root, folder.name)
    board = load_board(results, text)
    return (Path(results), board) if board is not None else None


def run(args) -> int:
    from agent.commands.show import results_dir
    from agent.kernelbench.export import analysis_command, export_board
    from agent.store import Store

    if args.level is not None and args.level < 1:
        return _error(f"--level {args.level}: KernelBench's levels are numbered from 1")
    found = find_board(args.board, results_dir(args))
    if found is None:
        return _error(f"no leaderboard {args.board!r} under {results_dir(args)} (nor a board folder of that name)")
    root, board = found
    try:
        result = export_board(board, Store(root), args.output, level=args.level)
    except ValueError as exc:
        return _error(str(exc))
    for path in result.files:
        print(f"written: {path}")
    for line in result.skipped:
        print(f"not exported: {line}", file=sys.stderr)
    if result.missing_baselines:
        print(f"{len(result.missing_baselines)} problem(s) have no kgen baseline time (KernelBench's analysis skips "
              f"a problem its baseline file lacks; give it a baseline file with every problem): "
              f"{'; '.join(result.missing_baselines[:5])}", file=sys.stderr)
    print("KernelBench's analysis reads sample 0 of each problem and counts every problem of the level; "
          "from a KernelBench checkout:")
    for level, run_name in sorted(result.runs.items()):
        print(f"  {analysis_command(args.output, run_name, level)}")
    return 0
