"""Process checks shared by the tests that make sure kgen leaves nothing running."""

from __future__ import annotations


def alive(pid: int) -> bool:
    """True while pid runs; a zombie waiting for its (re)parent to reap it is dead."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def running(marker: str) -> list[int]:
    """Host pids of the live processes whose command line contains `marker`.

    A sandboxed child has its own PID namespace: the pids it sees are not the host's, so a test finds what
    it started by a marker in the command line (its script's path, a unique argument), not by a pid it printed."""
    import os

    found = []
    needle = marker.encode()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if needle in cmdline and alive(int(name)):
            found.append(int(name))
    return found
