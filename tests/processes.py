"""Process checks shared by the tests that make sure kgen leaves nothing running."""

from __future__ import annotations


def alive(pid: int) -> bool:
    """True while pid runs; a zombie waiting for its (re)parent to reap it is dead."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
