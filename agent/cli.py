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

Every duration a command reports counts from the command's start (`args.started_s`, a
time.monotonic() value: the process's own start where Linux says when that was), so that
the total it prints is the wall clock a user saw, start-up, task loading and sandbox included.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import time

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


def process_started_s() -> float:
    """When this process started, on time.monotonic()'s clock: Python's own start-up and imports included.

    From /proc/self/stat's start time (clock ticks since boot) against /proc/uptime; where there is no /proc,
    the first call's time (this module is imported first by `kgen` and `python -m agent`)."""
    global _IMPORTED_S
    now = time.monotonic()
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            # NOTE: the fields after the command name, which is in parentheses and may hold spaces
            fields = f.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime", encoding="ascii") as f:
            uptime_s = float(f.read().split()[0])
        age_s = uptime_s - int(fields[19]) / os.sysconf("SC_CLK_TCK")   # field 22 of stat(5): starttime
        if 0.0 <= age_s < 86400.0 * 365:
            return now - age_s
    except (OSError, ValueError, IndexError):
        pass
    return _IMPORTED_S


_IMPORTED_S = time.monotonic()


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
    # a command line of this process: its start; a call from Python (a test, a script): this call's
    started_s = process_started_s() if argv is None else time.monotonic()
    parser = build_parser()
    args = parser.parse_args(argv)
    args.started_s = started_s
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    from verifier.task import TaskError

    if os.environ.get("KGEN_EXCHANGE_DIR"):
        from verifier.judge import exchange_dir_problem

        problem = exchange_dir_problem()
        if problem:
            print(f"kgen: error: {problem}", file=sys.stderr)
            return 2
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


def exit_now(code: int) -> None:
    """End the process with `code` once its atexit handlers have run and its output is flushed.

    NOTE: without Python's finalization of every module: with torch, triton and Inductor imported that took
    1.5-2 s on the CPU machines after the command had printed its verdict, wall time the command could not
    report. Nothing of kgen's waits for it: files are written whole and closed, the store's SQLite commits
    each write, and atexit (weakref.finalize's temporary folders among it) still runs."""
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):   # a closed pipe (kgen ... | head): nothing more can be said on it
            pass
    os._exit(code)


def entry() -> None:
    """The `kgen` console script and `python -m agent`: main(), then exit_now()."""
    exit_now(main())


if __name__ == "__main__":
    entry()
