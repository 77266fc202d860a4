"""Removing the directories a sandboxed child could write into, whatever it left there.

    from verifier import cleanup
    done = cleanup.remove_tree(path)                  # all of it, now: a Removal (never raises)
    done.left                                         # ["a/b: Permission denied", ...]: what stayed
    cleanup.remove_soon(path)                         # REMOVE_BUDGET_S of it now, the rest in the background
    with cleanup.scratch_dir(prefix="kgen-profile-") as tmp:   # tempfile.TemporaryDirectory, removed this way
        ...

What a child leaves is the attacker's (verifier/sandbox.py, docs/threat-model.md): a chain of 100,000 nested
directories (shutil.rmtree recurses once per level: RecursionError, which ignore_errors does not catch), a
million empty files (seconds of removal), links to kgen's own files, directories of mode 000, FIFOs. So the
remover here

- is iterative: one directory open at a time, whatever the depth (it climbs back through "..", checked against
  the device and inode it came down through);
- never follows a link: every directory is opened with O_NOFOLLOW | O_DIRECTORY relative to its parent's fd, every
  entry is unlinked or rmdir'd by name relative to it (a link is removed, never what it names); it does not
  cross into another file system;
- gives a directory the child made unreadable (mode 000) mode 0700 before it opens it (kgen not root: the child's
  files are kgen's uid's; root opens it anyway);
- never raises, and says what it could not remove.

A verdict never waits for a flood: remove_soon() removes for REMOVE_BUDGET_S and hands the rest to one
background thread, which the parent's exit waits for (atexit), so nothing stays after kgen ends. The trees of a
kgen killed by SIGKILL (a Ray actor ended with ray.kill, a test runner's timeout) stay: owned_prefix() names each
directory after its process, and sweep_stale() removes, later, those whose process is gone.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import os
import re
import stat
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REMOVE_BUDGET_S = 0.5        # of removal a caller waits for in remove_soon (the rest: the background cleaner)
MAX_LEFT = 20                # entries named in Removal.left (the count goes on)
PENDING_PER_DIR = 1024       # subdirectory names remembered per level before its directory is read again
STALE_AFTER_S = 600.0        # a leftover of a dead kgen is swept once it is this old
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass
class Removal:
    """What remove_tree did with one tree."""

    path: str
    removed: int = 0                 # entries removed: files, links, FIFOs, sockets, directories
    failed: int = 0                  # entries that could not be removed
    left: list[str] = field(default_factory=list)   # the first MAX_LEFT of them: "relative/path: why"
    unfinished: bool = False         # the deadline came before the end
    seconds: float = 0.0

    @property
    def done(self) -> bool:
        """Nothing of the tree is left."""
        return not self.failed and not self.unfinished

    def note(self, where: str, why: str) -> None:
        self.failed += 1
        if len(self.left) < MAX_LEFT:
            self.left.append(f"{where}: {why}")


def _why(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or type(exc).__name__


def _open_dir(parent_fd: int, name: str) -> int:
    """name, a directory under parent_fd, opened without following a link; a mode the child set that shuts
    kgen out (0000, 0100) is set to 0700 first."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except PermissionError:
        pass
    # NOTE: chmod through an O_PATH descriptor (opened with O_NOFOLLOW: never a link's target), by its /proc
    # name; where /proc is missing, by name relative to the parent (the entry was just seen as a directory)
    path_fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=parent_fd)
    try:
        try:
            os.chmod(f"/proc/self/fd/{path_fd}", 0o700)
        except FileNotFoundError:
            os.chmod(name, 0o700, dir_fd=parent_fd)
    finally:
        os.close(path_fd)
    return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)


def remove_tree(path, *, deadline: float | None = None) -> Removal:
    """Remove path and everything under it (a link or a file at path: just that), until time.monotonic() passes
    `deadline` (None: to the end). Never raises; the Removal says what stayed."""
    path = os.path.abspath(os.fspath(path))
    done = Removal(path)
    started = time.monotonic()
    parent, name = os.path.split(path.rstrip("/")) if path != "/" else ("/", "")
    if not name:
        done.note(path, "not a directory kgen removes")
        return done
    top = cur = -1
    try:
        top = os.open(parent or "/", _DIR_FLAGS & ~os.O_NOFOLLOW)   # the caller's own directory: links allowed
        _remove_under(top, name, done, deadline)
    except Exception as exc:  # noqa: BLE001 - a removal never raises: what it could not do is in `left`
        done.note(name, _why(exc))
    finally:
        for fd in (cur, top):
            if fd >= 0:
                os.close(fd)
    done.seconds = time.monotonic() - started
    return done


class _Level:
    """One directory on the way down: its name in its parent, its identity, the subdirectories still to do."""

    __slots__ = ("name", "ident", "pending", "skip", "full")

    def __init__(self, name: str, ident: tuple[int, int]):
        self.name, self.ident = name, ident
        self.pending: list[str] = []
        self.skip: set[str] = set()     # entries that could not be removed: not tried again
        self.full = True                # pending may not hold every subdirectory: read the directory again


def _remove_under(top: int, name: str, done: Removal, deadline: float | None) -> None:
    try:
        st = os.lstat(name, dir_fd=top)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=top)
        done.removed += 1
        return
    ticks = 0
    fd = _open_dir(top, name)
    root = os.fstat(fd)
    levels = [_Level(name, (root.st_dev, root.st_ino))]
    try:
        while levels:
            level = levels[-1]
            if level.full and not level.pending:
                level.full = False
                with os.scandir(fd) as entries:
                    for entry in entries:
                        ticks += 1
                        if deadline is not None and ticks % 256 == 0 and time.monotonic() > deadline:
                            done.unfinished = True
                            return
                        if entry.name in level.skip:
                            continue
                        try:
                            is_dir = entry.is_dir(follow_symlinks=False)
                        except OSError:
                            is_dir = False
                        if is_dir:
                            if len(level.pending) < PENDING_PER_DIR:
                                level.pending.append(entry.name)
                            else:
                                level.full = True
                            continue
                        try:
                            os.unlink(entry.name, dir_fd=fd)
                            done.removed += 1
                        except FileNotFoundError:
                            pass
                        except IsADirectoryError:
                            level.pending.append(entry.name)
                        except OSError as exc:
                            level.skip.add(entry.name)
                            done.note(f"{_where(levels)}/{entry.name}", _why(exc))
            if level.pending:
                sub = level.pending.pop()
                ticks += 1
                if deadline is not None and ticks % 256 == 0 and time.monotonic() > deadline:
                    done.unfinished = True
                    return
                try:
                    sub_fd = _open_dir(fd, sub)
                except FileNotFoundError:
                    continue
                except OSError as exc:
                    level.skip.add(sub)
                    done.note(f"{_where(levels)}/{sub}", _why(exc))
                    continue
                st = os.fstat(sub_fd)
                if st.st_dev != root.st_dev:   # a mount point: another file system is not the child's to lose
                    os.close(sub_fd)
                    level.skip.add(sub)
                    done.note(f"{_where(levels)}/{sub}", "another file system mounted there")
                    continue
                os.close(fd)
                fd = sub_fd
                levels.append(_Level(sub, (st.st_dev, st.st_ino)))
                continue
            if level.full:
                continue
            # this directory holds nothing left to try: up to its parent, and remove it
            where = _where(levels)
            levels.pop()
            if not levels:
                os.close(fd)
                fd = -1
                _rmdir(top, name, name, done)
                return
            up = os.open("..", _DIR_FLAGS, dir_fd=fd)
            st = os.fstat(up)
            os.close(fd)
            fd = up
            if (st.st_dev, st.st_ino) != levels[-1].ident:
                done.note(where, "its parent changed while it was removed")
                return
            if not _rmdir(fd, level.name, where, done):
                levels[-1].skip.add(level.name)
    finally:
        if fd >= 0:
            os.close(fd)


def _where(levels: list[_Level]) -> str:
    return "/".join(lv.name for lv in levels)


def _rmdir(parent_fd: int, name: str, where: str, done: Removal) -> bool:
    try:
        os.rmdir(name, dir_fd=parent_fd)
    except FileNotFoundError:
        return True
    except OSError as exc:
        if exc.errno != 39 or not done.failed:   # ENOTEMPTY with an entry below already named: named once
            done.note(where, _why(exc))
        return False
    done.removed += 1
    return True


# ----------------------------------------------------------------------------------------------
# removal in the background, waited for at exit


class _Cleaner:
    """One background thread that removes what remove_soon could not in its budget, and runs the other slow
    ends (reaping a process, removing a busy cgroup) handed to it; the parent's exit waits for all of it."""

    def __init__(self):
        self.lock = threading.Lock()
        self.todo: collections.deque = collections.deque()   # (path or None, callable)
        self.busy: list[str] = []                            # the tree the thread is removing now
        self.thread: threading.Thread | None = None
        self.exiting = False
        self.reports: list[Removal] = []                     # the background removals' reports, newest last

    def pending(self) -> list[str]:
        with self.lock:
            return self.busy + [p for p, _ in self.todo if p is not None]

    def later(self, path: str | None, work) -> None:
        with self.lock:
            if not self.exiting:
                self.todo.append((path, work))
                if self.thread is None or not self.thread.is_alive():
                    try:
                        self.thread = threading.Thread(target=self._run, daemon=True, name="kgen-cleaner")
                        self.thread.start()
                        return
                    except RuntimeError:   # the interpreter is ending: no new thread, do it here
                        self.todo.pop()
                else:
                    return
        work()

    def _run(self) -> None:
        while True:
            with self.lock:
                if not self.todo:
                    self.busy = []
                    self.thread = None
                    return
                path, work = self.todo.popleft()
                self.busy = [path] if path is not None else []
            try:
                work()
            except Exception:  # noqa: BLE001 - a cleaner's task never takes the cleaner down
                pass

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait until every handed task is done (at most timeout_s); whether they are."""
        end = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            with self.lock:
                thread = self.thread
            if thread is None:
                return True
            thread.join(None if end is None else max(0.0, end - time.monotonic()))
            if end is not None and time.monotonic() >= end:
                with self.lock:
                    return self.thread is None

    def at_exit(self) -> None:
        self.wait()
        with self.lock:
            self.exiting = True   # a finalizer that runs after this one removes what it has itself, to the end
        self.wait()


_CLEANER = _Cleaner()
atexit.register(_CLEANER.at_exit)


def _under(path: str, other: str) -> bool:
    return path == other or path.startswith(other.rstrip("/") + "/") or other.startswith(path.rstrip("/") + "/")


def remove_soon(path, *, budget_s: float = REMOVE_BUDGET_S) -> Removal:
    """Remove path for at most budget_s here; what is left then is removed by the background cleaner (before the
    parent exits). The Removal is this call's part (`unfinished`: the rest was handed on)."""
    path = os.path.abspath(os.fspath(path))
    if any(_under(path, p) for p in _CLEANER.pending()):
        # NOTE: one remover per tree at a time: this one waits behind the cleaner's work on the same tree
        _CLEANER.later(path, lambda: _background(path))
        return Removal(path, unfinished=True)
    exiting = _CLEANER.exiting
    done = remove_tree(path, deadline=None if exiting else time.monotonic() + budget_s)
    if done.unfinished:
        _CLEANER.later(path, lambda: _background(path))
    return done


def _background(path: str) -> None:
    report = remove_tree(path)
    with _CLEANER.lock:
        _CLEANER.reports = (_CLEANER.reports + [report])[-50:]


def later(work) -> None:
    """Run work() in the background cleaner (the parent's exit waits for it)."""
    _CLEANER.later(None, work)


def wait_for_cleaner(timeout_s: float | None = None) -> bool:
    """Wait for the background cleaner to finish what it was handed (the tests; the parent's exit does it)."""
    return _CLEANER.wait(timeout_s)


@contextlib.contextmanager
def scratch_dir(prefix: str, dir: str | None = None):
    """A fresh directory (tempfile.mkdtemp) for the with block, removed by remove_soon at its end: for a directory
    a sandboxed child is handed (TemporaryDirectory's rmtree recurses, follows nothing, but raises on depth)."""
    path = tempfile.mkdtemp(prefix=owned_prefix(prefix), dir=dir)
    try:
        yield path
    finally:
        remove_soon(path)


# ----------------------------------------------------------------------------------------------
# leftovers of a kgen that was killed


def _pid_namespace() -> str:
    try:
        return re.sub(r"\D", "", os.readlink("/proc/self/ns/pid")) or "0"
    except OSError:
        return "0"


def owned_prefix(prefix: str) -> str:
    """prefix + "<pid namespace>.<pid>-": a directory named so can be told as this process's, once it is gone."""
    return f"{prefix.rstrip('-')}-{_pid_namespace()}.{os.getpid()}-"


_OWNED = re.compile(r"^(?P<kind>kgen-[a-z-]+?)-(?P<ns>\d+)\.(?P<pid>\d+)-")
_SWEPT: set[str] = set()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stale_dirs(root, *, older_than_s: float = STALE_AFTER_S) -> list[str]:
    """Directories under root named by owned_prefix whose process (of this pid namespace) is gone, owned by
    kgen's uid, older than older_than_s."""
    found, ns, now = [], _pid_namespace(), time.time()
    try:
        entries = list(os.scandir(root))
    except OSError:
        return []
    for entry in entries:
        m = _OWNED.match(entry.name)
        if not m or m["ns"] != ns or int(m["pid"]) == os.getpid() or _alive(int(m["pid"])):
            continue
        try:
            st = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and now - st.st_mtime > older_than_s:
            found.append(entry.path)
    return found


def sweep_stale(root) -> None:
    """Once per root and process: hand the stale_dirs under root to the background cleaner."""
    key = os.path.abspath(os.fspath(root))
    if key in _SWEPT:
        return
    _SWEPT.add(key)
    for path in stale_dirs(key):
        _CLEANER.later(path, lambda p=path: _background(p))


def sweep_stale_cgroups(parent: Path, *, older_than_s: float = STALE_AFTER_S) -> int:
    """Remove the empty kgen-* cgroups under parent older than older_than_s (a killed kgen's); how many.

    NOTE: rmdir removes only an empty cgroup, and a live sandbox's group holds its child: only one whose
    processes have all ended goes, and a live kgen's such group is at most seconds old."""
    removed, now = 0, time.time()
    try:
        entries = [e for e in os.scandir(parent) if e.name.startswith("kgen-") and e.name != "kgen-host"]
    except OSError:
        return 0
    for entry in entries:
        try:
            if now - entry.stat(follow_symlinks=False).st_mtime > older_than_s:
                os.rmdir(entry.path)
                removed += 1
        except OSError:
            pass
    return removed
