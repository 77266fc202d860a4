"""kgen's command line: `kgen COMMAND ...` (also `python -m agent COMMAND ...`).

    kgen optimize tasks/matmul.py          # find a faster kernel for a task
    kgen verify tasks/softmax.py kernel.py # check (and on a GPU, time) one kernel
    kgen profile tasks/softmax.py kernel.py
    kgen leaderboard tasks/                # every task of a suite, one table
    kgen show | kgen report RUN            # review what was generated

Each command lives in agent/commands/<name>.py with `register(sub)` and
`run(args) -> exit code`. Exit codes: 0 success, 1 the kernel/run failed,
2 bad usage or a malformed task (one-line message, no traceback unless --debug).
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = ("optimize", "verify", "profile", "leaderboard", "show", "report")


def version() -> str:
    """The installed distribution's version; in a source checkout that is not installed, pyproject.toml's."""
    from importlib import metadata

    try:
        return metadata.version("kgen")
    except metadata.PackageNotFoundError:
        pass
    import re
    from pathlib import Path

    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    try:
        text = pyproject.read_text(encoding="utf-8")
    except OSError:
        return "unknown (not installed, no pyproject.toml)"
    # NOTE: a pattern, not tomllib: Python 3.10 (which kgen supports) has no tomllib
    found = re.search(r'^\[project\][^\[]*?^version\s*=\s*"([^"]+)"', text, re.M | re.S)
    return found.group(1) if found else "unknown (pyproject.toml names no version)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kgen", description="Make GPU kernels faster than PyTorch, verified.")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks for kgen's own errors")
    parser.add_argument("--version", action="version", version=f"kgen {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"agent.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"agent.commands.{name}":
                raise
            continue
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from verifier.task import TaskError

    try:
        return int(args.func(args) or 0)
    except TaskError as exc:
        if args.debug:
            raise
        print(f"kgen: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kgen: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
