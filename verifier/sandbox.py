"""Running untrusted candidate code in a fresh, limited subprocess.

    from verifier.sandbox import run_sandboxed
    res = run_sandboxed([sys.executable, "-m", "verifier.candidate"], job, timeout_s=120)
    res.message  # the child's signed verdict, or None
    res.limit    # "" or why the sandbox killed it ("started too many threads: 4101 > 4096")

    from verifier.sandbox import Sandbox
    with Sandbox([sys.executable, "-m", "verifier.candidate"]) as box:  # started now: it imports while we work
        ...
        res = box.run(job, timeout_s=120)   # the limit and res.wall_s count from the job's hand-over

A `Sandbox` starts the process before its job exists: the child gets the
channel's key at once and its job when run() is called, so its start-up
overlaps the caller's own. It runs one job; an unused one is killed and its
directory and cgroups removed on close(), on garbage collection, at the
parent's exit, or by the watchdog after MAX_IDLE_S without a job.
`run_sandboxed` is the one-shot form: key and job in one line.

What is isolated (each run's `isolation` notes say which of these held for it, from the
launcher's own report, and `isolation_missing` names the properties that did not):
- a fresh Python process per run, started by the OS confinement's launcher
  (verifier/confine.py; its docstring has the details): its own PID namespace
  with a fresh /proc (kgen, the decoys and every other process of the host
  have no pid inside: no /proc/<ppid>/environ, mem, cwd or ns/ to reach, nothing
  to signal or trace; the launcher's parent is outside, the program's parent is
  the namespace's init, which takes no signal); its own mount, network, IPC
  and UTS namespaces;
- an unprivileged uid: the program runs as uid and gid 65534 (kgen root: it can
  switch), no supplementary groups, all five capability sets empty and the
  securebits locked, so root's files are another user's to it (a 0600 key is
  closed) and no exec gives capabilities back. Its own directory is chowned to
  it; the caller's `cwd` (the judge's exchange directory), when private to kgen
  (mode 0700), is lent as group 65534, mode 1770 (it adds its outputs; kgen's
  files there stay root's) and given back at the end (another `cwd` must be
  writable by the uid already, else the uid is not dropped, and the note says
  why); its compile caches (Triton, torch extensions, CuPy) are its own, in its
  directory, never kgen's shared ones. The launcher checks the uid can run the program (verifier.confine,
  "The user"); where it cannot (a PYTHONPATH entry of mode 0700), the program
  stays uid 0 with the same capability drop, and `isolation_missing` says
  "unprivileged uid (uid 0: <path> is not readable by uid 65534)". Not root:
  the program runs as kgen's own uid (a user namespace maps it to 0), also
  listed as missing; no_new_privs; a seccomp filter (verifier/seccomp.py) that denies with EPERM
  ptrace, process_vm_readv/writev, setns, unshare, the mount family, the pidfd
  calls, keyrings, bpf, perf_event_open (kept for a GPU profiler: `profiler=`,
  by default when argv[0] is ncu), reboot, kexec, modules, io_uring, clone()
  with namespace flags; kill() is not filtered (seccomp cannot tell whose a pid
  is; with a PID namespace every pid it can name is the sandbox's own);
- the file system: read-only everywhere except the sandbox's directory (with its
  compile caches; where kgen is not root, kgen's shared ones) and the caller's `cwd`;
  a directory the uid cannot search above what the program needs (/root) shows
  only that; /run private and empty (daemons'
  sockets, docker's); the named sockets two levels under /tmp and /var/tmp
  (tmux, X, ssh agents, a database) masked; /dev holds only null, zero,
  full, random, urandom, tty, the NVIDIA nodes and a private /dev/shm;
- no network: its own network namespace, whose loopback is its own and down;
- every process it starts dies with it: when the program ends, the namespace's
  init ends and the kernel kills whatever is left in the namespace (a
  double-forked, session-leaving, cgroup-leaving process included); on timeout
  or a limit, the launcher's process group, tree and cgroups are SIGKILLed
  (cgroup.kill where the kernel has it), which ends the namespace too;
- processes and threads: RLIMIT_NPROC does not bind root (and kgen runs as
  root here and in CI), so two other bounds hold instead. Where a pids
  controller is writable (cgroup v2: a child of kgen's own cgroup, with the
  controller enabled in its cgroup.subtree_control, after moving the group's
  own processes, kgen's included, into its leaf child kgen-host/ where v2's
  no-internal-processes rule requires it; cgroup v1: the pids hierarchy),
  the child runs in a fresh cgroup whose `pids.max` the kernel
  enforces (forks and thread starts fail beyond it). Always, a watchdog thread
  in the parent counts, every 0.1 s, the processes in the child's process
  group, session or process tree (/proc/*/stat) and their threads; above
  MAX_PROCESSES processes or MAX_THREADS threads it kills them all and the
  result says "started too many processes" / "started too many threads";
- host memory, where a memory controller is writable (v2 `memory.max` with
  swap off and `memory.oom.group`; v1 `memory.limit_in_bytes`): capped at
  MEMORY_FRACTION of the machine's RAM, so a candidate that touches too much
  memory is killed by the kernel alone ("used more than N GB of host memory",
  from memory.events' oom_kill on v2), not another process on the machine.
  Where neither can be written the note says "memory: NOT capped (why)";
- the child joins its cgroups between fork and exec, before it can fork;
- its own temporary working directory (also $HOME and $TMPDIR), removed afterwards by verifier.cleanup (no
  recursion, no link followed; REMOVE_BUDGET_S of it before the result, the rest before the parent exits);
- an environment scrubbed of secrets: every variable whose name contains KEY,
  TOKEN, SECRET, PASSWORD or CREDENTIAL, and every OPENAI_* variable, is removed;
- no core dumps; files it writes capped in size; captured stdout/stderr capped
  per stream (the rest is drained and dropped);
- the verdict comes back over a pipe, signed with a key only the harness knows
  (verifier.channel): the candidate's stdout, files and exit code cannot forge it.

What is NOT isolated:
- where unshare(2) fails (not root and no unprivileged user namespaces, or a
  container that forbids them), none of the confinement holds: the child runs
  as kgen's user with kgen's view of the machine, and every note says NOT; the
  run-time policy in the worker (verifier.integrity) still refuses the
  candidate's own file writes outside its directory;
- files readable by every user: what the mounts show (the project, the
  interpreter, /etc, /tmp) can be read where its mode lets "other" read it;
  directories of mode 0700 above what the program needs (/root) show only that.
  In the uid 0 fallback, what root's modes allow is readable too (a key kept in
  a file rather than the environment);
- other sandboxes: every candidate runs as the same uid 65534, so one could read
  (the mounts are read-only) another's directory under /tmp while both run, or
  open its named pipes (a FIFO opens on a read-only mount), as uid 0 could before;
- the compile caches: with the unprivileged uid they are the sandbox's own, so a
  re-verification compiles again; where kgen is not root, kgen's shared caches
  under ~/.cache/kgen are writable and shared between runs: a candidate could
  leave files there;
- the GPU: it is shared with the parent; a GPU fault kills only the child's
  context, but a kernel that hangs the GPU until the timeout holds it that long;
  GPU memory is not capped; the NVIDIA device nodes are the driver's whole
  surface;
- the kernel itself: what seccomp lets through (the usual file, memory, socket
  and process calls) is the attack surface of a kernel exploit. Run untrusted
  kernels on a machine you can afford to lose.

`python -m verifier.confine [--report-fd=N] [--profiler] DIR... -- PROGRAM ARGS...` is the launcher
(`python -m verifier.sandbox --confine ...`, its older spelling, still works); a Sandbox puts it in
front of the child's command.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import re
import resource
import secrets
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from verifier import channel, cleanup

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|^OPENAI_", re.IGNORECASE)
PROJECT_ROOT = Path(__file__).resolve().parent.parent
CACHE_ROOT = Path(os.environ.get("KGEN_CACHE", Path.home() / ".cache" / "kgen"))
MAX_PROCS = 512            # RLIMIT_NPROC for a non-root user (threads count against it on Linux)
MAX_PROCESSES = 128        # processes in the child's group/session/tree (inductor's compile workers: ~32)
MAX_THREADS = 4096         # threads summed over them (torch + triton use ~100 on a large host)
MAX_TASKS = 2 * MAX_THREADS  # the pids cgroup's hard cap (the watchdog acts first, with a reason)
MEMORY_FRACTION = 0.5      # of the machine's RAM, for the memory cgroup
# Largest file the child may write: its outputs go back as tensor files, one per output, and KernelBench's level-1
# outputs reach 8 GiB (1 GiB made every larger one "crashed" with EFBIG); the disk itself is the memory plan's check.
MAX_FILE_BYTES = 1 << 36
WATCH_INTERVAL_S = 0.1
REAP_WAIT_S = 2.0          # longest the end of a run waits for a killed child to be reaped (then: in the background)
CGROUP_REMOVE_S = 0.5      # longest it waits for a cgroup to empty before its removal goes to the background
PROFILERS = ("ncu", "nv-nsight-cu-cli")   # programs that read GPU counters: perf_event_open stays allowed
MAX_IDLE_S = 1800.0        # longest a pre-started child may wait for its job before the watchdog kills it
# the compile caches a candidate writes: kgen's shared ones, or (the unprivileged uid) its sandbox's own
PRIVATE_CACHE_DIR = ".cache"   # in the sandbox's directory
PRIVATE_CACHES = {"TRITON_CACHE_DIR": "triton", "TORCH_EXTENSIONS_DIR": "torch_extensions", "CUPY_CACHE_DIR": "cupy"}


@dataclass
class SandboxResult:
    """What came back from one sandboxed run."""

    returncode: int | None           # None when killed for the timeout
    stdout: str                      # capped
    stderr: str                      # capped
    timed_out: bool
    message: dict | None             # the child's signed result message, if it sent exactly one
    channel_problem: str = ""        # why message is None, when it is
    isolation: list[str] = field(default_factory=list)
    wall_s: float = 0.0              # from handing the job over to the end (pre-started: not the start-up before)
    prestarted_s: float = 0.0        # how long a pre-started child ran before it got its job
    stdout_dropped: int = 0          # bytes beyond the cap
    stderr_dropped: int = 0
    limit: str = ""                  # why the sandbox killed the child for a limit (processes, threads, memory)
    isolation_complete: bool = False  # every one of PROPERTIES held for this run
    isolation_missing: list[str] = field(default_factory=list)  # those of PROPERTIES that did not
    kept: dict[str, str] = field(default_factory=dict)   # keep_files the child left in its directory: name -> text


KEPT_BYTES = 16 << 10


def read_left(root: Path, *names: str, max_bytes: int = KEPT_BYTES) -> bytes | None:
    """root/names[0]/.../names[-1], a plain file a sandboxed child left, its first max_bytes; None when there is
    none.

    NOTE: what a child leaves is in its reach (its own directory, chowned to its uid, or a folder it built in): it
    may have replaced the directory or any part of the path by a link to anything root can read. Every part is
    opened without following a link (the folders as folders, the file only if regular)."""
    fds = []
    try:
        fds.append(os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC))
        for part in names[:-1]:
            fds.append(os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fds[-1]))
        fds.append(os.open(names[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fds[-1]))
        if not stat.S_ISREG(os.fstat(fds[-1]).st_mode):
            return None
        chunks, left = [], max_bytes
        while left > 0:
            chunk = os.read(fds[-1], min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        for fd in fds:
            os.close(fd)


def describe_exit(code: int | None) -> str:
    """How a process ended, for a reason line: 'died of SIGSEGV', 'exited with code 3'."""
    if code is None:
        return "was killed"
    if code < 0:
        try:
            return f"died of {signal.Signals(-code).name}"
        except ValueError:
            return f"died of signal {-code}"
    return f"exited with code {code}"


def scrubbed_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not SECRET_NAME.search(k)}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("TRITON_CACHE_DIR", str(CACHE_ROOT / "triton"))
    env.setdefault("TORCH_EXTENSIONS_DIR", str(CACHE_ROOT / "torch_extensions"))
    env.setdefault("CUPY_CACHE_DIR", str(CACHE_ROOT / "cupy"))
    for k, v in (extra or {}).items():
        if not SECRET_NAME.search(k):
            env[k] = v
    return env


def _launcher(writable: list[str], report_fd: int | None = None, *, profiler: bool = False,
              share_network: bool = False, own: list[str] = (), shared: list[str] = (),
              keep_uid: bool = False) -> list[str]:
    options = ([f"--report-fd={report_fd}"] if report_fd is not None else []) + \
        (["--profiler"] if profiler else []) + (["--share-network"] if share_network else []) + \
        (["--uid=0"] if keep_uid else []) + \
        [f"--own={d}" for d in own] + [f"--share={d}" for d in shared]
    return [sys.executable, "-m", "verifier.confine", *options, *writable, "--"]


def drops_uid() -> bool:
    """Whether the launcher will try to run the program as its unprivileged uid (kgen is root: it can switch)."""
    return os.geteuid() == 0


def private_to_kgen(path: Path) -> bool:
    """A directory kgen owns that nobody else may enter (mode 0700 or tighter): handing it to the sandbox's
    uid shows it to no one new."""
    try:
        st = path.stat()
    except OSError:
        return False
    return path.is_dir() and st.st_uid == os.geteuid() and not st.st_mode & 0o077


@functools.lru_cache(maxsize=1)
def confinement() -> dict:
    """What the OS confinement achieves on this machine (the launcher's report for a trivial program), probed once.

    Keys as in verifier.confine's report: pid_namespace, network, files, proc, devices, capabilities,
    seccomp, no_new_privs, uid, gid, groups, uid_problem (why uid is 0, when it is), init, opened,
    problems. Used by the tests to skip what this machine cannot do; a Sandbox reports what held for
    its own run."""
    probe_dir = Path(tempfile.mkdtemp(prefix=cleanup.owned_prefix("kgen-probe")))
    read_fd, write_fd = os.pipe()
    try:
        cmd = _launcher([], write_fd, own=[str(probe_dir)]) + [sys.executable, "-c", "pass"]
        subprocess.run(cmd, capture_output=True, timeout=60, env=scrubbed_env(), cwd=probe_dir, pass_fds=(write_fd,))
        os.close(write_fd)
        write_fd = -1
        with os.fdopen(read_fd, "rb") as f:
            read_fd = -1
            raw = f.read(65536)
        return json.loads(raw.decode().splitlines()[0]) if raw.strip() else {"problems": ["no report"]}
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        return {"problems": [str(exc)]}
    finally:
        for fd in (read_fd, write_fd):
            if fd >= 0:
                os.close(fd)
        cleanup.remove_soon(probe_dir)


def network_isolation() -> tuple[bool, str]:
    """(whether the child's network is cut off here, the note saying so)."""
    ok = bool(confinement().get("network"))
    return ok, "network: isolated (own network namespace)" if ok else "network: NOT isolated"


def file_confinement() -> tuple[bool, str]:
    """(whether the read-only file system holds here, the note saying so)."""
    ok = bool(confinement().get("files"))
    return ok, "files: read-only outside the sandbox's directory and compile caches" if ok else "files: NOT confined"


# Each property the confinement promises, and the note for a run where it held (from the launcher's report).
PROPERTIES = ("pid namespace", "user", "unprivileged uid", "no_new_privs", "seccomp", "network", "files", "memory cap",
              "pids cap")
CONFINE_PROPERTIES = PROPERTIES[:-2]   # those the launcher's report covers


def unprivileged_uid(report: dict) -> tuple[bool, str]:
    """(whether the program ran as an unprivileged uid of the host, why not): a user namespace's uid 0 is kgen's."""
    uid = report.get("uid")
    if type(uid) is int and uid != 0 and not report.get("user_namespace"):
        return True, ""
    return False, str(report.get("uid_problem") or (f"uid {uid}" if uid is not None else "no uid reported"))[:240]


def confinement_notes(report: dict | None, *, asked: bool = True) -> tuple[list[str], list[str]]:
    """(one note per property that the launcher's report covers, the properties NOT in force).

    A missing "unprivileged uid" carries its reason: "unprivileged uid (uid 0: /root is not searchable by ...)"."""
    if not asked:
        return [f"{', '.join(CONFINE_PROPERTIES)}: not confined (not asked)"], list(CONFINE_PROPERTIES)
    report = report or {}
    problems = "; ".join(str(p) for p in report.get("problems", []))[:240]
    why = f" ({problems})" if problems else (" (no report from the launcher)" if not report else "")
    uid_ok, uid_why = unprivileged_uid(report)
    uid = report.get("uid", "?")
    held = {
        "pid namespace": (bool(report.get("pid_namespace")) and bool(report.get("proc"))
                          and str(report.get("init", "")).startswith("not dumpable"),
                          "pid namespace: own, with a fresh /proc (kgen and the host's processes are not visible); "
                          f"its init: {report.get('init')}"),
        "user": (report.get("capabilities") == "none",
                 f"user: uid {uid}"
                 f"{' of a user namespace' if report.get('user_namespace') else ''}, gid {report.get('gid', '?')}, "
                 f"supplementary groups: {' '.join(map(str, report.get('groups') or [])) or 'none'}, every "
                 f"capability dropped and the securebits locked"),
        "unprivileged uid": (uid_ok, f"unprivileged uid: {uid} (owns nothing of the host's; the sandbox's own "
                                     f"directories handed to it)"),
        "no_new_privs": (bool(report.get("no_new_privs")), "no_new_privs: set"),
        "seccomp": (bool(report.get("seccomp")), f"seccomp: filter on ({report.get('seccomp')}): ptrace, setns, "
                                                 f"unshare, mount, pidfd_*, bpf, keyctl, ... denied with EPERM"),
        "network": (bool(report.get("network")), "network: isolated (own network namespace, no interfaces up)"),
        "files": (bool(report.get("files")),
                  "files: read-only outside the sandbox's directory, the caller's directory and the compile caches; "
                  f"/run private and empty; named sockets under /tmp masked ({report.get('sockets_masked', 0)}); "
                  f"/dev only: {report.get('devices') or '?'}"
                  + (f"; shown only in part: {', '.join(report['opened'])}" if report.get("opened") else "")),
    }
    notes, missing = [], []
    for name, (ok, note) in held.items():
        if name == "unprivileged uid" and not ok:
            notes.append(f"unprivileged uid: NOT in force ({uid_why})")
            missing.append(f"unprivileged uid ({uid_why})")
            continue
        notes.append(note if ok else f"{name}: NOT in force{why}")
        if not ok:
            missing.append(name)
    return notes, missing


def _limit_child(groups: tuple["_Cgroup", ...] = ()) -> None:
    # Runs in the child between fork and exec: it joins its cgroups before it can fork anything.
    for g in groups:
        g.join_self()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))
    if os.geteuid() != 0:
        soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
        cap = MAX_PROCS if hard == resource.RLIM_INFINITY else min(MAX_PROCS, hard)
        resource.setrlimit(resource.RLIMIT_NPROC, (cap, cap))


class _Drain(threading.Thread):
    """Reads a stream to its end, keeping the first `cap` bytes."""

    def __init__(self, stream, cap: int):
        super().__init__(daemon=True)
        self.stream, self.cap = stream, cap
        self.kept = bytearray()
        self.dropped = 0

    def run(self) -> None:
        while True:
            chunk = self.stream.read(65536)
            if not chunk:
                break
            room = self.cap - len(self.kept)
            if room > 0:
                self.kept += chunk[:room]
            self.dropped += max(0, len(chunk) - max(room, 0))
        self.stream.close()


# ----------------------------------------------------------------------------------------------
# counting and killing the child's processes


def _proc_table() -> dict[int, tuple[int, int, int, int]]:
    """pid -> (ppid, pgrp, session, threads) for every live process."""
    table = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) < 18 or fields[0] in ("Z", "X"):
            continue
        table[int(entry.name)] = (int(fields[1]), int(fields[2]), int(fields[3]), int(fields[17]))
    return table


def members(root: int, table: dict | None = None) -> dict[int, int]:
    """pid -> threads of every process in root's group, session or process tree."""
    table = _proc_table() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found = {pid for pid, (_, pgrp, sid, _) in table.items() if pgrp == root or sid == root}
    todo = [root] if root in table else []
    while todo:
        pid = todo.pop()
        found.add(pid)
        todo.extend(c for c in children.get(pid, []) if c not in found)
    return {pid: table[pid][3] for pid in found if pid in table}


def _kill_all(root: int, pids) -> None:
    try:
        os.killpg(root, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


class _Watchdog(threading.Thread):
    """Counts the child's processes and threads; kills them all above the caps."""

    def __init__(self, root: int, max_processes: int, max_threads: int):
        super().__init__(daemon=True)
        self.root, self.max_processes, self.max_threads = root, max_processes, max_threads
        self.stop = threading.Event()
        self.exceeded = ""
        self.idle_deadline: float | None = None   # time.monotonic() by which a pre-started child must get its job

    def run(self) -> None:
        while not self.stop.wait(WATCH_INTERVAL_S):
            deadline = self.idle_deadline
            if deadline is not None and time.monotonic() > deadline:
                self.exceeded = "was pre-started and got no job in time"
                _kill_all(self.root, members(self.root))
                return
            found = members(self.root)
            if not found:
                continue
            threads = sum(found.values())
            if len(found) > self.max_processes:
                self.exceeded = f"started too many processes: {len(found)} > {self.max_processes}"
            elif threads > self.max_threads:
                self.exceeded = f"started too many threads: {threads} > {self.max_threads}"
            if self.exceeded:
                for _ in range(3):  # a fork racing the kill is caught by the next pass
                    _kill_all(self.root, members(self.root) or found)
                return


CGROUP_ROOT = Path("/sys/fs/cgroup")
_SWEPT_CGROUPS: set[Path] = set()


def cgroup_v2() -> bool:
    """True where /sys/fs/cgroup is the unified hierarchy (cgroup v2) alone."""
    return (CGROUP_ROOT / "cgroup.controllers").exists()


class _Cgroup:
    """A fresh cgroup under this process's own: v1 (one controller) or v2 (memory and pids in one group).

    create() returns (group, "") or (None, why not)."""

    def __init__(self, path: Path, version: int):
        self.path, self.version = path, version

    @classmethod
    def create(cls, controller: str, limits: dict[str, int]) -> "tuple[_Cgroup | None, str]":
        """A v1 group for `controller` with `limits` written."""
        base = CGROUP_ROOT / controller
        try:
            own = next(line.split(":", 2)[2] for line in Path("/proc/self/cgroup").read_text().splitlines()
                       if controller in line.split(":", 2)[1].split(","))
        except (OSError, StopIteration, IndexError):
            return None, f"no cgroup v1 {controller} controller"
        return cls._make(base / own.lstrip("/"), 1, limits)

    @classmethod
    def create_v2(cls, limits: dict[str, int], optional: dict[str, int]) -> "tuple[_Cgroup | None, str]":
        """A v2 group with the controllers that `limits` name enabled in its parent, `limits` written
        (failure: no group), `optional` written where the kernel has them."""
        try:
            own = next(line[3:] for line in Path("/proc/self/cgroup").read_text().splitlines()
                       if line.startswith("0::"))
        except (OSError, StopIteration):
            return None, "not in a cgroup v2 hierarchy"
        parent = CGROUP_ROOT / own.strip().lstrip("/")
        if parent.name == HOST_LEAF:
            parent = parent.parent   # kgen (or an earlier kgen) already made room in this group
        wanted = {name.split(".")[0] for name in limits}
        try:
            available = set((parent / "cgroup.controllers").read_text().split())
            enabled = set((parent / "cgroup.subtree_control").read_text().split())
        except OSError as exc:
            return None, f"cannot read {parent}: {exc.strerror}"
        if wanted - available:
            return None, f"controller {' and '.join(sorted(wanted - available))} not delegated to {parent}"
        if not wanted:
            return None, f"no controller asked for under {parent}"
        if wanted - enabled:
            problem = _enable_controllers(parent, sorted(wanted - enabled))
            if problem:
                return None, problem
        group, why = cls._make(parent, 2, limits)
        if group is not None:
            for name, value in optional.items():
                try:
                    (group.path / name).write_text(str(value))
                except OSError:
                    pass
        return group, why

    @classmethod
    def _make(cls, parent: Path, version: int, limits: dict[str, int]) -> "tuple[_Cgroup | None, str]":
        if parent not in _SWEPT_CGROUPS:
            _SWEPT_CGROUPS.add(parent)
            cleanup.sweep_stale_cgroups(parent)   # the empty groups a killed kgen left (SIGKILL runs no finalizer)
        path = parent / f"kgen-{secrets.token_hex(6)}"
        try:
            path.mkdir()
        except OSError as exc:
            return None, f"cannot create a cgroup under {parent} ({exc.strerror})"
        group = cls(path, version)
        try:
            for name, value in limits.items():
                (path / name).write_text(str(value))
        except OSError as exc:
            group.remove()
            return None, f"cannot write {name} ({exc.strerror})"
        return group, ""

    def join_self(self) -> None:
        """Move the calling process into the group (in a child between fork and exec: no exception escapes)."""
        try:
            with open(self.path / "cgroup.procs", "w") as f:
                f.write("0")
        except OSError:
            pass

    def holds(self, pid: int) -> bool:
        try:
            return f"/{self.path.name}\n" in Path(f"/proc/{pid}/cgroup").read_text()
        except OSError:
            return False

    def read(self, name: str) -> str:
        try:
            return (self.path / name).read_text()
        except OSError:
            return ""

    def counts(self, name: str) -> dict[str, int]:
        """A flat-keyed file (memory.events, memory.oom_control) as {key: number}."""
        found = {}
        for line in self.read(name).splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].isdigit():
                found[parts[0]] = int(parts[1])
        return found

    def kill(self) -> None:
        """SIGKILL every member; cgroup.kill (v2, Linux 5.14+) does it atomically, forks in flight included."""
        if self.version == 2 and (self.path / "cgroup.kill").exists():
            try:
                (self.path / "cgroup.kill").write_text("1")
            except OSError:
                pass
        for pid in [int(p) for p in self.read("cgroup.procs").split() if p.isdigit()]:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def remove(self, wait_s: float = CGROUP_REMOVE_S) -> None:
        """Kill what is left in the group and remove it: tried for wait_s here, then (a group whose killed
        processes take longer to end) for up to 5 s more in the background cleaner."""
        if not self._try_remove(wait_s):
            cleanup.later(lambda: self._try_remove(5.0))

    def _try_remove(self, wait_s: float) -> bool:
        end = time.monotonic() + wait_s
        while True:
            self.kill()
            try:
                self.path.rmdir()
                return True
            except FileNotFoundError:
                return True
            except OSError:
                if time.monotonic() > end:
                    return False
                time.sleep(0.02)


def _limits() -> "tuple[dict[str, tuple[_Cgroup | None, str]], list[str]]":
    """The sandbox's fresh cgroups: {"pids": (group or None, why not), "memory": (...)}; v2 where the host is
    unified, else v1. One v2 group carries both limits."""
    memory_cap = _memory_cap_bytes()
    if cgroup_v2():
        available = _v2_controllers()
        limits, missing = {}, {}
        for controller, name, value in (("pids", "pids.max", MAX_TASKS), ("memory", "memory.max", memory_cap)):
            if not value:
                missing[controller] = "MemTotal unknown"
            elif controller not in available:
                missing[controller] = f"cgroup v2: controller {controller} not delegated to kgen's cgroup"
            else:
                limits[name] = value
        # NOTE: swap off, so the cap is the memory it may touch; oom.group: an OOM kill takes the whole sandbox
        group, why = _Cgroup.create_v2(limits, {"memory.swap.max": 0, "memory.oom.group": 1}) if limits else \
            (None, "")
        return {c: (group if f"{c}.max" in limits else None, missing.get(c) or why) for c in ("pids", "memory")}, []
    pids = _Cgroup.create("pids", {"pids.max": MAX_TASKS})
    memory = _Cgroup.create("memory", {"memory.limit_in_bytes": memory_cap}) if memory_cap else \
        (None, "MemTotal unknown")
    return {"pids": pids, "memory": memory}, []


def _v2_controllers() -> set[str]:
    """The controllers that kgen's own v2 cgroup may hand to its children."""
    try:
        own = next(line[3:] for line in Path("/proc/self/cgroup").read_text().splitlines() if line.startswith("0::"))
        parent = CGROUP_ROOT / own.strip().lstrip("/")
        if parent.name == HOST_LEAF:
            parent = parent.parent
        return set((parent / "cgroup.controllers").read_text().split())
    except (OSError, StopIteration):
        return set()


HOST_LEAF = "kgen-host"   # where the processes of kgen's own v2 cgroup move, so that its children get controllers


def _enable_controllers(parent: Path, controllers: list[str]) -> str:
    """Enable `controllers` for parent's children; "" or why not.

    cgroup v2's no-internal-processes rule: a non-root group that holds processes cannot hand
    controllers to its children (EBUSY). Then every process of the group (kgen, the shell that
    started it: all under the same limits as before) moves into its leaf child HOST_LEAF, and the
    write is tried again; the sandboxes' groups are made beside that leaf."""
    line = " ".join(f"+{c}" for c in controllers)
    moved = 0
    for attempt in range(5):
        try:
            (parent / "cgroup.subtree_control").write_text(line)
            return ""
        except OSError as exc:
            if exc.errno != errno.EBUSY or attempt == 4:
                return f"cannot enable {' '.join(controllers)} in {parent}/cgroup.subtree_control ({exc.strerror}" \
                       f"{f', after moving {moved} processes into {HOST_LEAF}/' if moved else ''})"
        leaf = parent / HOST_LEAF
        try:
            leaf.mkdir(exist_ok=True)
            for pid in (parent / "cgroup.procs").read_text().split():
                try:
                    (leaf / "cgroup.procs").write_text(pid)
                    moved += 1
                except OSError:
                    pass   # gone meanwhile, or a process the kernel will not move
        except OSError as exc:
            return f"cannot enable {' '.join(controllers)} in {parent}: {parent} holds processes and " \
                   f"{leaf} cannot take them ({exc.strerror})"
    return ""


def _memory_cap_bytes() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(int(line.split()[1]) * 1024 * MEMORY_FRACTION)
    except (OSError, ValueError):
        pass
    return 0


# ----------------------------------------------------------------------------------------------
# running


class _ResultReader(threading.Thread):
    """Reads the result pipe to its end, keeping at most one message's worth of bytes."""

    def __init__(self, fd: int):
        super().__init__(daemon=True)
        self.fd = fd
        self.chunks: list[bytes] = []

    def run(self) -> None:
        total = 0
        with os.fdopen(self.fd, "rb") as f:
            while chunk := f.read(65536):
                total += len(chunk)
                if total <= channel.MAX_MESSAGE_BYTES:
                    self.chunks.append(chunk)


def _write_and_close(stream, data: bytes) -> None:
    try:
        stream.write(data)
        stream.close()
    except (BrokenPipeError, OSError):
        pass  # the child died before reading its job; its exit status says why


class _Held:
    """What a started sandbox holds: its processes, threads, cgroups and directory, each let go once."""

    def __init__(self, proc: subprocess.Popen, watchdog: "_Watchdog", threads: list[threading.Thread],
                 groups: list["_Cgroup"], workdir: Path):
        self.proc, self.watchdog, self.threads, self.groups, self.workdir = proc, watchdog, threads, groups, workdir
        self.stopped = False
        self.shared: tuple[Path, os.stat_result] | None = None   # the caller's directory, as it was before
        self.removal: cleanup.Removal | None = None             # how the removal of workdir went

    def stop(self) -> None:
        """Kill whatever is left of the child (all of it, stray children of a finished one too) and reap it."""
        if self.stopped:
            return
        self.stopped = True
        self.watchdog.stop.set()
        self.watchdog.join(timeout=5)
        _kill_all(self.proc.pid, members(self.proc.pid))
        for g in self.groups:
            g.kill()   # NOTE: also what left the process tree; the PID namespace's end takes the rest
        try:
            self.proc.wait(timeout=REAP_WAIT_S)
        except subprocess.TimeoutExpired:
            # NOTE: a killed process can take long to end (the kernel frees its private /dev/shm, its mount
            # namespace): the verdict does not wait; the background cleaner reaps it before kgen exits
            cleanup.later(functools.partial(self.proc.wait, 60))   # a minute at most: the exit must end

    def release(self) -> None:
        self.stop()
        for g in self.groups:
            g.remove()
        for t in self.threads:
            t.join(timeout=5)
        if self.proc.stdin and not self.proc.stdin.closed:
            _write_and_close(self.proc.stdin, b"")
        # NOTE: the child may have left anything there (a 100,000-deep chain, a million files, links): removed
        # without recursion or following a link, REMOVE_BUDGET_S of it before the verdict, the rest afterwards
        self.removal = cleanup.remove_soon(self.workdir)
        if self.shared is not None:
            # NOTE: the caller's directory is its own again (the launcher lent it to the sandbox's uid)
            path, before = self.shared
            try:
                os.chown(path, before.st_uid, before.st_gid)
                os.chmod(path, stat.S_IMODE(before.st_mode))
            except OSError:
                pass


def _removal_note(done: "cleanup.Removal | None") -> str:
    """How the sandbox's directory went, for its isolation note: "" when it went at once, as usual."""
    if done is None or (done.done and done.seconds < 0.1):
        return ""
    if done.unfinished:
        return f", {done.removed} entries removed in {done.seconds:.1f} s, the rest left to the background cleaner"
    if done.failed:
        return f", {done.failed} entries of it NOT removed ({'; '.join(done.left[:3])})"
    return f", {done.removed} entries removed in {done.seconds:.1f} s"


class Sandbox:
    """One fresh sandboxed process, started before its job is known; it runs one job.

        with Sandbox([sys.executable, "-m", "verifier.candidate"]) as box:  # the child starts (and warms up) now
            ...                                                          # meanwhile, the caller's own work
            res = box.run(job, timeout_s=120)                            # the time limit counts from here

    The child reads two lines on stdin: {"key": ...} at once and {"job": ...}
    when run() hands the job over (with prestart=False, one line {"key", "job"}
    at run(), as run_sandboxed sends it). A child that gets no job within
    max_idle_s is killed by the watchdog. close(), the end of the with block,
    garbage collection and the parent's exit each kill whatever is left of an
    unused sandbox and remove its directory and cgroups.
    """

    def __init__(
        self,
        argv: list[str],
        *,
        output_cap_bytes: int = 64_000,
        cwd: Path | None = None,
        extra_env: dict[str, str] | None = None,
        isolate_network: bool = True,
        confine_files: bool = True,
        max_processes: int = MAX_PROCESSES,
        max_threads: int = MAX_THREADS,
        max_idle_s: float = MAX_IDLE_S,
        prestart: bool = True,
        profiler: bool | None = None,
        keep_files: tuple[str, ...] = (),
    ):
        """`profiler`: the command is a GPU profiler (perf_event_open stays allowed); None: when argv[0] is ncu.
        `keep_files`: names of files the child may leave in its own directory (its cwd), read back into the
        result's `kept` once every process has ended, before the directory goes (KEPT_BYTES each at most)."""
        self._key = secrets.token_bytes(32)
        self._keep = tuple(keep_files)
        self._prestart = prestart
        self._used = False
        if cwd is None:
            cleanup.sweep_stale(tempfile.gettempdir())   # the directories of a killed kgen's sandboxes
        workdir = Path(tempfile.mkdtemp(prefix=cleanup.owned_prefix("kgen-sandbox"), dir=cwd))
        confined = isolate_network or confine_files
        if profiler is None:
            profiler = Path(argv[0]).name in PROFILERS
        groups, self._notes = _limits()
        made = list(dict.fromkeys(g for g, _ in groups.values() if g is not None))

        read_fd, write_fd = os.pipe()
        report_r, report_w = os.pipe() if confined else (-1, -1)
        shared_before = Path(cwd).resolve().stat() if cwd and confined and drops_uid() else None
        env, command = self._command(argv, workdir, cwd, extra_env, confined, report_w, profiler,
                                     share_network=not isolate_network)
        env["KGEN_RESULT_FD"] = str(write_fd)
        self._started = time.perf_counter()
        try:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=workdir,
                env=env,
                pass_fds=(write_fd,) + ((report_w,) if confined else ()),
                start_new_session=True,  # NOTE: its own process group, so the timeout kill reaches grandchildren
                preexec_fn=functools.partial(_limit_child, tuple(made)),
            )
        except BaseException:
            for fd in (read_fd, report_r):
                if fd >= 0:
                    os.close(fd)
            for g in made:
                g.remove()
            cleanup.remove_soon(workdir)
            raise
        finally:
            for fd in (write_fd, report_w):
                if fd >= 0:
                    os.close(fd)
        # NOTE: the child joined its cgroups between fork and exec, before it could fork anything; every cgroup
        # made here is removed with the sandbox, whether it holds the child or not.
        self._groups = {kind: (g if g is not None and g.holds(proc.pid) else None, why)
                        for kind, (g, why) in groups.items()}
        self._confined = confined
        self._max = (max_processes, max_threads)
        self._memory_cap = _memory_cap_bytes()
        self._watchdog = _Watchdog(proc.pid, max_processes, max_threads)
        if prestart:
            self._watchdog.idle_deadline = time.monotonic() + max_idle_s
        self._out, self._err = _Drain(proc.stdout, output_cap_bytes), _Drain(proc.stderr, output_cap_bytes)
        self._reader = _ResultReader(read_fd)
        self._report = _ResultReader(report_r) if confined else None
        started = [self._out, self._err, self._reader, self._watchdog] + ([self._report] if self._report else [])
        for t in started:
            t.start()
        self._proc = proc
        self._held = _Held(proc, self._watchdog, [t for t in started if t is not self._watchdog], made, workdir)
        if shared_before is not None:
            self._held.shared = (Path(cwd).resolve(), shared_before)
        # NOTE: the finalizer holds the resources, not self: an unused sandbox that is dropped, or still held
        # when the parent exits, is cleaned up all the same.
        self._release = weakref.finalize(self, self._held.release)
        if prestart:
            try:
                proc.stdin.write(json.dumps({"key": self._key.hex()}).encode() + b"\n")
                proc.stdin.flush()
            except (BrokenPipeError, OSError):
                pass  # the child is already dead; run() reports how it ended

    @staticmethod
    def _command(argv, workdir: Path, cwd, extra_env, confined: bool, report_fd: int, profiler: bool,
                 share_network: bool):
        """The child's environment and its command line (the confinement's launcher first)."""
        env = scrubbed_env(extra_env)
        # NOTE: inductor's cache goes inside the sandbox's own directory, never to a shared /tmp path that the
        # read-only file system would refuse (and that an earlier job could have filled).
        env.update(HOME=str(workdir), TMPDIR=str(workdir), TORCHINDUCTOR_CACHE_DIR=str(workdir / "torchinductor"))
        private = confined and drops_uid()
        if private:
            # NOTE: the unprivileged uid compiles into caches of this sandbox alone: kgen's shared ones stay
            # root's (no chown of them, and no candidate leaves a kernel there for the next one to load)
            env.update({name: str(workdir / PRIVATE_CACHE_DIR / sub) for name, sub in PRIVATE_CACHES.items()})
        caches = [env[d] for d in PRIVATE_CACHES]
        for d in caches:
            Path(d).mkdir(parents=True, exist_ok=True)
        if not confined:
            return env, list(argv)
        here = Path(cwd).resolve() if cwd else None
        shared = [str(here)] if here and private and private_to_kgen(here) else []
        writable = ([str(here)] if here and not shared else []) + ([] if private else caches)
        # NOTE: a launcher that is not to drop the uid is told so: the shared caches it was handed are root's
        return env, _launcher(writable, report_fd, profiler=profiler, share_network=share_network,
                              own=[str(workdir)], shared=shared, keep_uid=not private and os.geteuid() == 0) \
            + list(argv)

    def _isolation(self, limit_note: str) -> tuple[list[str], list[str]]:
        """The notes for this run (what held, from the launcher's own report) and the properties not in force."""
        report = None
        if self._report is not None:
            self._report.join(timeout=5)
            raw = b"".join(self._report.chunks).decode(errors="replace").strip()
            try:
                report = json.loads(raw.splitlines()[0]) if raw else None
            except (ValueError, IndexError):
                report = None
        notes, missing = confinement_notes(report, asked=self._confined)
        max_processes, max_threads = self._max
        pids_group, pids_why = self._groups["pids"]
        notes.append(f"processes: at most {max_processes}, threads: at most {max_threads} (watchdog"
                     + (f"; pids cgroup v{pids_group.version}, pids.max {MAX_TASKS})" if pids_group else
                        f"); pids cap: NOT in force ({pids_why or 'the child is not in its cgroup'})"))
        if pids_group is None:
            missing.append("pids cap")
        memory_group, memory_why = self._groups["memory"]
        if memory_group is not None:
            notes.append(f"memory: at most {self._memory_cap / 1e9:.0f} GB (memory cgroup v{memory_group.version})")
        else:
            notes.append(f"memory: NOT capped ({memory_why or 'the child is not in its cgroup'})")
            missing.append("memory cap")
        notes += ["env: secrets scrubbed", "cwd: fresh temporary directory" + _removal_note(self._held.removal),
                  limit_note]
        return notes, missing

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def alive(self) -> bool:
        """Started, still running, and not yet given a job: run() may be called."""
        return not self._used and self._release.alive and self._proc.poll() is None

    def run(self, job: dict, *, timeout_s: float) -> SandboxResult:
        """Hand the job over and wait for the child to end, at most timeout_s from now."""
        if self._used or not self._release.alive:
            raise RuntimeError("a Sandbox runs one job, and this one has run or been closed")
        self._used = True
        self._watchdog.idle_deadline = None
        handed = time.perf_counter()
        line = {"job": job} if self._prestart else {"key": self._key.hex(), "job": job}
        # NOTE: written from a thread: a job larger than the pipe's buffer waits for a child still warming up,
        # and that wait must not escape the time limit.
        writer = threading.Thread(target=_write_and_close, args=(self._proc.stdin, json.dumps(line).encode() + b"\n"),
                                  daemon=True)
        self._held.threads.append(writer)
        writer.start()

        timed_out = False
        try:
            self._proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
        self._held.stop()
        limit = self._watchdog.exceeded or self._memory_exceeded()
        kept = {name: data.decode("utf-8", errors="replace") for name in self._keep
                if (data := read_left(self._held.workdir, name)) is not None}
        self._release()
        ended = time.perf_counter()

        message, problem = channel.decode(self._key, b"".join(self._reader.chunks))
        if limit:
            message, problem = None, f"{limit}; the sandbox killed it"
        limit_note = f"time: {timeout_s:.0f} s wall limit" + (" from the job's hand-over" if self._prestart else "") \
            + ", every process of the sandbox killed at the end"
        isolation, missing = self._isolation(limit_note)
        return SandboxResult(
            returncode=None if timed_out else self._proc.returncode,
            stdout=self._out.kept.decode(errors="replace"),
            stderr=self._err.kept.decode(errors="replace"),
            timed_out=timed_out,
            message=None if timed_out else message,
            channel_problem="timed out" if timed_out else problem,
            isolation=isolation,
            isolation_complete=not missing,
            isolation_missing=missing,
            wall_s=ended - (handed if self._prestart else self._started),
            prestarted_s=handed - self._started if self._prestart else 0.0,
            stdout_dropped=self._out.dropped,
            stderr_dropped=self._err.dropped,
            kept=kept,
            limit=limit,
        )

    def _memory_exceeded(self) -> str:
        group = self._groups["memory"][0]
        if group is None or self._proc.returncode != -signal.SIGKILL:
            return ""
        if group.version == 2:
            hit = group.counts("memory.events").get("oom_kill", 0) > 0
        else:
            hit = group.counts("memory.oom_control").get("oom_kill", 0) > 0 or \
                group.read("memory.failcnt").strip() not in ("", "0")
        return f"used more than {self._memory_cap / 1e9:.0f} GB of host memory" if hit else ""

    def close(self) -> None:
        """Kill whatever is left of the child and remove its directory and cgroups (once; later calls do nothing)."""
        self._release()

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def run_sandboxed(
    argv: list[str],
    job: dict,
    *,
    timeout_s: float,
    output_cap_bytes: int = 64_000,
    cwd: Path | None = None,
    extra_env: dict[str, str] | None = None,
    isolate_network: bool = True,
    confine_files: bool = True,
    max_processes: int = MAX_PROCESSES,
    max_threads: int = MAX_THREADS,
    profiler: bool | None = None,
) -> SandboxResult:
    """Run argv in a fresh sandboxed process; the job reaches it on stdin with the channel's key, in one line."""
    box = Sandbox(argv, output_cap_bytes=output_cap_bytes, cwd=cwd, extra_env=extra_env,
                  isolate_network=isolate_network, confine_files=confine_files, max_processes=max_processes,
                  max_threads=max_threads, prestart=False, profiler=profiler)
    return box.run(job, timeout_s=timeout_s)


if __name__ == "__main__":
    # NOTE: the launcher's older spelling; verifier.confine is the one a Sandbox runs
    if sys.argv[1:2] != ["--confine"]:
        raise SystemExit("usage: python -m verifier.sandbox --confine [--report-fd=N] DIR... -- PROGRAM ARGS...")
    from verifier.confine import launch

    launch(sys.argv[2:])
