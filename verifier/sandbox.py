"""Running untrusted candidate code in a fresh, limited subprocess.

    from verifier.sandbox import run_sandboxed
    res = run_sandboxed([sys.executable, "-m", "verifier.worker"], job, timeout_s=120)
    res.message  # the child's signed verdict, or None
    res.limit    # "" or why the sandbox killed it ("started too many threads: 4101 > 4096")

    from verifier.sandbox import Sandbox
    with Sandbox([sys.executable, "-m", "verifier.worker"]) as box:  # started now: it imports while we work
        ...
        res = box.run(job, timeout_s=120)   # the limit and res.wall_s count from the job's hand-over

A `Sandbox` starts the process before its job exists: the child gets the
channel's key at once and its job when run() is called, so its start-up
overlaps the caller's own. It runs one job; an unused one is killed and its
directory and cgroups removed on close(), on garbage collection, at the
parent's exit, or by the watchdog after MAX_IDLE_S without a job.
`run_sandboxed` is the one-shot form: key and job in one line.

What is isolated:
- a fresh Python process per run, in its own process group and session; on
  timeout the whole group is killed (SIGKILL), grandchildren included (a
  pre-started child's time limit counts from the hand-over of its job);
- its own temporary working directory (also $HOME and $TMPDIR), removed afterwards;
- an environment scrubbed of secrets: every variable whose name contains KEY,
  TOKEN, SECRET, PASSWORD or CREDENTIAL, and every OPENAI_* variable, is removed;
- no network, where the OS allows: the child runs under `unshare -n` (as root)
  or `unshare -rn` (an unprivileged user namespace). When neither works the
  result's `isolation` list says "network: NOT isolated";
- a read-only file system, where the OS allows (`unshare -m`, then this
  module's `confine` as a launcher before the real program): every mount is
  remounted read-only except the sandbox's directory, the caller's `cwd`, and
  kgen's compile caches; /dev/shm is a private tmpfs; /proc/sys and
  /proc/sysrq-trigger are read-only; /proc and /dev stay as they are (CUDA
  needs its device nodes). Probed once per process; `isolation` says which;
- processes and threads: RLIMIT_NPROC does not bind root (and kgen runs as
  root here and in CI), so two other bounds hold instead. Where the cgroup v1
  `pids` controller is writable, the child runs in a fresh pids cgroup whose
  `pids.max` the kernel enforces (forks and thread starts fail beyond it), and
  which lets every member be killed at the end, even one that left the
  session. Always, a watchdog thread in the parent counts, every 0.1 s, the
  processes in the child's process group, session or process tree (/proc/*/stat)
  and their threads (field num_threads); above MAX_PROCESSES processes or
  MAX_THREADS threads it kills them all and the result says "started too many
  processes" / "started too many threads";
- host memory, where the cgroup v1 `memory` controller is writable: a fresh
  memory cgroup capped at MEMORY_FRACTION of the machine's RAM, so a candidate
  that touches too much memory is killed by the kernel alone ("used more than
  N GB of host memory"), not another process on the machine. An allocation
  larger than the machine fails at once in the child (an out-of-memory error,
  reported as the candidate's runtime error);
- no core dumps; files it writes capped in size; captured stdout/stderr capped
  per stream (the rest is drained and dropped);
- the verdict comes back over a pipe, signed with a key only the harness knows
  (verifier.channel): the candidate's stdout, files and exit code cannot forge it.

What is NOT isolated:
- where the probes fail (no `unshare -m`, no writable cgroups), the file system
  and memory: the child runs as the same user and could write wherever that
  user can; the run-time policy in the worker (verifier.integrity) still
  refuses the candidate's own file writes outside its directory;
- kgen's compile caches (Triton, torch extensions, CuPy) under ~/.cache/kgen are
  writable and shared between runs, so that a re-verification is fast: a
  candidate could leave files there;
- the GPU: it is shared with the parent; a GPU fault kills only the child's
  context, but a kernel that hangs the GPU until the timeout holds it that long;
  GPU memory is not capped;
- /proc of the machine (no PID namespace): the child can see other processes.
A candidate that defeats the static checks with dynamic code could reach the
harness's memory; kgen's guarantees hold against the exploit classes its test
suite names, not against arbitrary malicious code. Run untrusted kernels on a
machine you can afford to lose.

`python -m verifier.sandbox --confine DIR... -- PROGRAM ARGS...` is the launcher
that applies the read-only file system inside the new mount namespace and then
executes PROGRAM; a Sandbox puts it in front of the child's command.
"""

from __future__ import annotations

import functools
import json
import os
import re
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from verifier import channel

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|^OPENAI_", re.IGNORECASE)
PROJECT_ROOT = Path(__file__).resolve().parent.parent
CACHE_ROOT = Path(os.environ.get("KGEN_CACHE", Path.home() / ".cache" / "kgen"))
MAX_PROCS = 512            # RLIMIT_NPROC for a non-root user (threads count against it on Linux)
MAX_PROCESSES = 128        # processes in the child's group/session/tree (inductor's compile workers: ~32)
MAX_THREADS = 4096         # threads summed over them (torch + triton use ~100 on a large host)
MAX_TASKS = 2 * MAX_THREADS  # the pids cgroup's hard cap (the watchdog acts first, with a reason)
MEMORY_FRACTION = 0.5      # of the machine's RAM, for the memory cgroup
MAX_FILE_BYTES = 1 << 30   # largest file the child may write
WATCH_INTERVAL_S = 0.1
MAX_IDLE_S = 1800.0        # longest a pre-started child may wait for its job before the watchdog kills it


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


@functools.lru_cache(maxsize=1)
def network_isolation() -> tuple[list[str], str]:
    """The command prefix that cuts the network off, and a note saying what was used."""
    exe = shutil.which("unshare")
    if exe is None:
        return [], "network: NOT isolated (unshare not found)"
    tries = ([exe, "-n"], [exe, "-rn"]) if os.geteuid() == 0 else ([exe, "-rn"],)
    last = ""
    for prefix in tries:
        try:
            done = subprocess.run(prefix + ["true"], capture_output=True, timeout=10)
        except (OSError, subprocess.SubprocessError) as exc:
            last = str(exc)
            continue
        if done.returncode == 0:
            return prefix, f"network: isolated ({' '.join(['unshare'] + prefix[1:])})"
        last = done.stderr.decode(errors="replace").strip()
    return [], f"network: NOT isolated (unshare failed: {last[:120]})"


def _launcher(writable: list[str]) -> list[str]:
    return [sys.executable, "-m", "verifier.sandbox", "--confine", *writable, "--"]


@functools.lru_cache(maxsize=1)
def file_confinement() -> tuple[bool, str]:
    """Whether a mount namespace with a read-only file system works here (probed once)."""
    net_prefix, _ = network_isolation()
    if not net_prefix:
        return False, "files: NOT confined (no unshare)"
    probe_dir = Path(tempfile.mkdtemp(prefix="kgen-probe-"))
    outside = probe_dir.parent / f"kgen-probe-outside-{secrets.token_hex(4)}"
    check = ("import sys\n"
             "open('inside', 'w').write('x')\n"
             f"try:\n    open({str(outside)!r}, 'w').write('x')\nexcept OSError:\n    sys.exit(0)\n"
             "sys.exit(3)\n")
    cmd = net_prefix + ["-m"] + _launcher([str(probe_dir)]) + [sys.executable, "-c", check]
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=60, env=scrubbed_env(), cwd=probe_dir)
        ok = done.returncode == 0 and (probe_dir / "inside").exists() and not outside.exists()
        why = done.stderr.decode(errors="replace").strip().splitlines()[-1:] if not ok else []
    except (OSError, subprocess.SubprocessError) as exc:
        ok, why = False, [str(exc)]
    finally:
        shutil.rmtree(probe_dir, ignore_errors=True)
        if outside.exists():
            outside.unlink()
    if ok:
        return True, "files: read-only outside the sandbox's directory and compile caches (unshare -m)"
    return False, f"files: NOT confined ({(why or ['mount namespace unavailable'])[0][:120]})"


def _limit_child() -> None:
    # Runs in the child between fork and exec.
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


class _Cgroup:
    """A fresh cgroup (v1) under this process's own, for one controller; None where not writable."""

    def __init__(self, path: Path):
        self.path = path

    @classmethod
    def create(cls, controller: str, limits: dict[str, int]) -> "_Cgroup | None":
        base = Path("/sys/fs/cgroup") / controller
        try:
            own = next(line.split(":", 2)[2] for line in Path("/proc/self/cgroup").read_text().splitlines()
                       if controller in line.split(":", 2)[1].split(","))
            path = base / own.lstrip("/") / f"kgen-{secrets.token_hex(6)}"
            path.mkdir()
        except (OSError, StopIteration, IndexError):
            return None
        group = cls(path)
        try:
            for name, value in limits.items():
                (path / name).write_text(str(value))
        except OSError:
            group.remove()
            return None
        return group

    def add(self, pid: int) -> bool:
        try:
            (self.path / "cgroup.procs").write_text(str(pid))
            return True
        except OSError:
            return False

    def read(self, name: str) -> str:
        try:
            return (self.path / name).read_text()
        except OSError:
            return ""

    def remove(self) -> None:
        for _ in range(50):
            pids = [int(p) for p in self.read("cgroup.procs").split() if p.isdigit()]
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.02)


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

    def stop(self) -> None:
        """Kill whatever is left of the child (all of it, stray children of a finished one too) and reap it."""
        if self.stopped:
            return
        self.stopped = True
        self.watchdog.stop.set()
        self.watchdog.join(timeout=5)
        _kill_all(self.proc.pid, members(self.proc.pid))
        self.proc.wait()

    def release(self) -> None:
        self.stop()
        for g in self.groups:
            g.remove()
        for t in self.threads:
            t.join(timeout=5)
        if self.proc.stdin and not self.proc.stdin.closed:
            _write_and_close(self.proc.stdin, b"")
        shutil.rmtree(self.workdir, ignore_errors=True)


class Sandbox:
    """One fresh sandboxed process, started before its job is known; it runs one job.

        with Sandbox([sys.executable, "-m", "verifier.worker"]) as box:  # the child starts (and warms up) now
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
    ):
        self._key = secrets.token_bytes(32)
        self._prestart = prestart
        self._used = False
        workdir = Path(tempfile.mkdtemp(prefix="kgen-sandbox-", dir=cwd))
        env, command, self._notes = self._command(argv, workdir, cwd, extra_env, isolate_network, confine_files)
        pids_group = _Cgroup.create("pids", {"pids.max": MAX_TASKS})
        memory_cap = _memory_cap_bytes()
        memory_group = _Cgroup.create("memory", {"memory.limit_in_bytes": memory_cap}) if memory_cap else None
        made = [g for g in (pids_group, memory_group) if g is not None]

        read_fd, write_fd = os.pipe()
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
                pass_fds=(write_fd,),
                start_new_session=True,  # NOTE: its own process group, so the timeout kill reaches grandchildren
                preexec_fn=_limit_child,
            )
        except BaseException:
            os.close(read_fd)
            for g in made:
                g.remove()
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        finally:
            os.close(write_fd)
        # NOTE: the child waits for its first line on stdin, so it forks (and imports) nothing before it is in
        # its cgroups; anything added or not, every cgroup made here is removed with the sandbox.
        added = [g for g in made if g.add(proc.pid)]
        self._notes.append(f"processes: at most {max_processes}, threads: at most {max_threads} (watchdog"
                           f"{'; pids cgroup' if pids_group in added else ''})")
        self._memory_group = memory_group if memory_group in added else None
        self._memory_cap = memory_cap
        self._notes.append(f"memory: at most {memory_cap / 1e9:.0f} GB (memory cgroup)" if self._memory_group
                           else "memory: NOT capped")
        self._watchdog = _Watchdog(proc.pid, max_processes, max_threads)
        if prestart:
            self._watchdog.idle_deadline = time.monotonic() + max_idle_s
        self._out, self._err = _Drain(proc.stdout, output_cap_bytes), _Drain(proc.stderr, output_cap_bytes)
        self._reader = _ResultReader(read_fd)
        for t in (self._out, self._err, self._reader, self._watchdog):
            t.start()
        self._proc = proc
        self._held = _Held(proc, self._watchdog, [self._out, self._err, self._reader], made, workdir)
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
    def _command(argv, workdir: Path, cwd, extra_env, isolate_network: bool, confine_files: bool):
        """The child's environment, its command line (isolation prefixes first) and the notes saying which apply."""
        prefix, net_note = network_isolation() if isolate_network else ([], "network: not isolated (not asked)")
        env = scrubbed_env(extra_env)
        # NOTE: inductor's cache goes inside the sandbox's own directory, never to a shared /tmp path that the
        # read-only file system would refuse (and that an earlier job could have filled).
        env.update(HOME=str(workdir), TMPDIR=str(workdir), TORCHINDUCTOR_CACHE_DIR=str(workdir / "torchinductor"))
        caches = [env[d] for d in ("TRITON_CACHE_DIR", "TORCH_EXTENSIONS_DIR", "CUPY_CACHE_DIR")]
        for d in caches:
            Path(d).mkdir(parents=True, exist_ok=True)
        notes = [net_note]
        command = prefix + list(argv)
        if confine_files and prefix:
            confined, files_note = file_confinement()
            if confined:
                writable = [str(workdir)] + ([str(Path(cwd).resolve())] if cwd else []) + caches
                command = prefix + ["-m"] + _launcher(writable) + list(argv)
            notes.append(files_note)
        else:
            notes.append("files: not confined (not asked)" if not confine_files else "files: NOT confined (no unshare)")
        return env, command, notes

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
        self._release()
        ended = time.perf_counter()

        message, problem = channel.decode(self._key, b"".join(self._reader.chunks))
        if limit:
            message, problem = None, f"{limit}; the sandbox killed it"
        limit_note = f"time: {timeout_s:.0f} s wall limit" + (" from the job's hand-over" if self._prestart else "")
        return SandboxResult(
            returncode=None if timed_out else self._proc.returncode,
            stdout=self._out.kept.decode(errors="replace"),
            stderr=self._err.kept.decode(errors="replace"),
            timed_out=timed_out,
            message=None if timed_out else message,
            channel_problem="timed out" if timed_out else problem,
            isolation=self._notes + ["env: secrets scrubbed", "cwd: fresh temporary directory",
                                     f"{limit_note}, process group killed"],
            wall_s=ended - (handed if self._prestart else self._started),
            prestarted_s=handed - self._started if self._prestart else 0.0,
            stdout_dropped=self._out.dropped,
            stderr_dropped=self._err.dropped,
            limit=limit,
        )

    def _memory_exceeded(self) -> str:
        group = self._memory_group
        if group is None or self._proc.returncode != -signal.SIGKILL:
            return ""
        counts = dict(line.split() for line in group.read("memory.oom_control").splitlines()
                      if len(line.split()) == 2)
        if counts.get("oom_kill", "0") != "0" or group.read("memory.failcnt").strip() not in ("", "0"):
            return f"used more than {self._memory_cap / 1e9:.0f} GB of host memory"
        return ""

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
) -> SandboxResult:
    """Run argv in a fresh sandboxed process; the job reaches it on stdin with the channel's key, in one line."""
    box = Sandbox(argv, output_cap_bytes=output_cap_bytes, cwd=cwd, extra_env=extra_env,
                  isolate_network=isolate_network, confine_files=confine_files, max_processes=max_processes,
                  max_threads=max_threads, prestart=False)
    return box.run(job, timeout_s=timeout_s)


# ----------------------------------------------------------------------------------------------
# the launcher: a read-only file system inside the child's own mount namespace

_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC = 32, 4096, 16384
_MS_NOATIME, _MS_NODIRATIME, _MS_RELATIME = 1024, 2048, 1 << 21
_KEEP_FLAGS = {"nosuid": _MS_NOSUID, "nodev": _MS_NODEV, "noexec": _MS_NOEXEC, "noatime": _MS_NOATIME,
               "nodiratime": _MS_NODIRATIME, "relatime": _MS_RELATIME}
_PROC_READ_ONLY = ["/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs"]


def _mount(libc, source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda v: v.encode() if v is not None else None  # noqa: E731
    if libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)) != 0:
        import ctypes

        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {target}: {os.strerror(errno)}")


def _mounts() -> list[tuple[str, set[str]]]:
    """(mount point, per-mount options) from /proc/self/mountinfo, outermost first."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        parts = line.split()
        point = parts[4].encode().decode("unicode_escape")
        found.append((point, set(parts[5].split(","))))
    return sorted(found, key=lambda m: m[0].count("/") if m[0] != "/" else 0)


def confine(writable: list[str]) -> list[str]:
    """Make every mount read-only but `writable` (and a private /dev/shm); return what could not be done.

    Must run in a fresh mount namespace (unshare -m makes its mounts private).
    """
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    problems = []
    keep = []
    for d in writable:
        real = os.path.realpath(d)
        if os.path.isdir(real):
            _mount(libc, real, real, None, _MS_BIND | _MS_REC)
            keep.append(real)
    for d in _PROC_READ_ONLY:
        if os.path.exists(d):
            try:
                _mount(libc, d, d, None, _MS_BIND)
            except OSError as exc:
                problems.append(str(exc))
    skip = ("/proc", "/dev")
    for point, options in _mounts():
        if point in keep or any(point == s or point.startswith(s + "/") for s in skip) and \
                point not in _PROC_READ_ONLY:
            continue
        flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY
        for name, bit in _KEEP_FLAGS.items():
            if name in options:
                flags |= bit
        try:
            _mount(libc, None, point, None, flags)
        except OSError as exc:
            problems.append(str(exc))
    if os.path.isdir("/dev/shm"):
        try:
            _mount(libc, "tmpfs", "/dev/shm", "tmpfs", _MS_NOSUID | _MS_NODEV, "size=1g")
        except OSError as exc:
            problems.append(str(exc))
    return problems


def _launch(args: list[str]) -> None:
    if not args or args[0] != "--confine" or "--" not in args:
        raise SystemExit("usage: python -m verifier.sandbox --confine DIR... -- PROGRAM ARGS...")
    split = args.index("--")
    writable, program = args[1:split], args[split + 1:]
    problems = confine(writable)
    # NOTE: the working directory still points into the old (now read-only) mount; walk to it again
    # so that relative paths land on the writable bind mount.
    os.chdir(os.getcwd())
    if problems:
        print(f"kgen sandbox: file system partly confined: {'; '.join(problems[:3])}", file=sys.stderr)
    os.execvp(program[0], program)


if __name__ == "__main__":
    _launch(sys.argv[1:])
