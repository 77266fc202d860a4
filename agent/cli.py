"""kgen's command line: `kgen COMMAND ...` (also `python -m agent COMMAND ...`).

    kgen optimize tasks/matmul.py          # find a faster kernel for a task
    kgen verify tasks/softmax.py kernel.py # check (and on a GPU, time) one kernel
    kgen profile tasks/softmax.py kernel.py
    kgen leaderboard tasks/                # every task of a suite, one table
    kgen show | kgen report RUN            # review what was generated

Each command lives in agent/commands/<name>.py with `register(sub)` and
`run(args) -> exit code`. Exit codes: 0 success, 1 the kernel/run failed,
2 bad usage or a malformed task (one-line message, no traceback unless --debug),
130 / 143 / 129 interrupted by Ctrl-C / SIGTERM / SIGHUP: all three stop a
command the same way (runs stored as interrupted and resumable), only the
exit code says which signal it was.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys

COMMANDS = ("optimize", "verify", "profile", "leaderboard", "show", "report", "export")


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


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, raised where Ctrl-C would be: every command already stops cleanly on that."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
_received: list[int] = []   # the stop signals this process got, first first


def _on_stop_signal(signum, frame) -> None:
    first = not _received
    _received.append(signum)
    if first:   # NOTE: raised once; a second signal while the command stores its state must not cut that short
        raise Terminated(signum)


def install_stop_signals() -> None:
    """SIGTERM and SIGHUP stop a command as Ctrl-C does (main thread only, where Python delivers signals)."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, _on_stop_signal)


def exit_code(code: int) -> int:
    """A command that ended interrupted (130) after SIGTERM or SIGHUP exits 128 + that signal, as shells expect."""
    if code == 130 and _received:
        return 128 + _received[0]
    return code


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from verifier.task import TaskError

    install_stop_signals()
    try:
        code = exit_code(int(args.func(args) or 0))
        if code != 130 and code > 128 and _received:
            print(f"kgen: stopped by {signal.Signals(_received[0]).name}", file=sys.stderr)
        return code
    except TaskError as exc:
        if args.debug:
            raise
        print(f"kgen: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        name = signal.Signals(exc.signum).name if isinstance(exc, Terminated) else "Ctrl-C"
        print(f"kgen: interrupted ({name})", file=sys.stderr)
        return exit_code(130) if isinstance(exc, Terminated) else 130


if __name__ == "__main__":
    sys.exit(main())
