"""The OS confinement of a sandboxed candidate: namespaces, a read-only world, no capabilities, seccomp.

    python -m verifier.confine [--report-fd=N] [--profiler] [--share-network] DIR... -- PROGRAM ARGS...

(also reachable as `python -m verifier.sandbox --confine ...`). verifier.sandbox
puts this launcher in front of the worker's command line. It runs as three processes:

- the launcher (outside, kgen's child): unshare(2) of the mount, PID, network,
  IPC and UTS namespaces (plus a user namespace when not root), then one fork.
  It waits, and ends as the program ended (the same exit code, or the same
  signal), so the caller sees the program's status;
- an init, PID 1 of the new PID namespace: it builds the file system (below),
  drops every capability, sets no_new_privs, loads the seccomp filter
  (verifier.seccomp), writes what it achieved to --report-fd as one JSON line,
  forks the program and reaps orphans until the program ends. When it ends, the
  kernel kills every process left in the namespace: nothing the candidate
  started outlives it, double-forked or not. It dies with the launcher
  (PR_SET_PDEATHSIG), and a signal from inside the namespace cannot reach it
  (an init gets only the signals it handles; it handles none);
- the program, PID 2, under everything above.

The file system inside: mounts made private; /run replaced by an empty tmpfs
(daemons' sockets and state); the named sockets under /tmp and /var/tmp (two
levels down: tmux's, X's, ssh agents', a database's) masked by /dev/null;
DIR... (the sandbox's directory, the caller's directory, the compile
caches) bound back writable; the program's own files (existing paths in its
argv and PYTHONPATH) bound back read-only; a fresh /proc of the new PID
namespace, with /proc/sys and the like read-only; every other mount
read-only; /dev a tmpfs with only null, zero, full, random, urandom, tty, the
NVIDIA device nodes and a private /dev/shm (root without capabilities may
still open root's devices, so /dev/vda and the like must not be there).

The user: the uid stays 0 in the host's user namespace (the interpreter often
lives under /root, mode 0700, where another uid cannot run it), with every
capability dropped from all five sets and the securebits locked, so no exec
gets one back: it cannot override a file's permissions, signal or trace
another user, mount, or load anything into the kernel. When not root, a user
namespace maps the caller's uid to 0 inside, with the same drop.
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
import signal
import stat
import struct
import sys

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = 32, 4096, 8192, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1024, 2048, 1 << 21
KEEP_FLAGS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
              "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME}
PROC_READ_ONLY = ["/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs"]
# NOTE: /run only: a task file, a test's script or a caller's directory often lives under /tmp, and a job
# names its task only after the start; the named sockets under /tmp are masked one by one instead
HIDDEN = ["/run"]                              # replaced by an empty tmpfs (daemons' sockets and state live there)
# Where other programs keep named sockets (tmux-0/default, .X11-unix/X0, ssh-*/agent.*, .s.PGSQL.5432): a uid-0
# client would be let in. Each socket found here gets /dev/null bound over it (connect: ECONNREFUSED).
SOCKET_GLOBS = ["/tmp/*", "/tmp/*/*", "/tmp/.*", "/tmp/.*/*", "/var/tmp/*", "/var/tmp/*/*"]
DEVICES = ["null", "zero", "full", "random", "urandom", "tty"]
DEVICE_GLOBS = ["nvidia*", "dri"]              # CUDA's nodes (nvidiactl, nvidia0.., nvidia-uvm, nvidia-caps/)
DEV_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
             "stderr": "/proc/self/fd/2"}
SHM_SIZE = "size=1g"
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_SECUREBITS, PR_CAP_AMBIENT = 1, 24, 28, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
# SECBIT_NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED, NO_CAP_AMBIENT_RAISE, each with its _LOCKED bit
SECUREBITS = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80
CAP_V3 = 0x20080522
SANDBOX_HOSTNAME = b"kgen-sandbox"

_libc = ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda v: v.encode() if v is not None else None  # noqa: E731
    _check(_libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def _mounts() -> list[tuple[str, set[str]]]:
    """(mount point, per-mount options) from /proc/self/mountinfo, outermost first."""
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f.read().splitlines():
            parts = line.split()
            point = parts[4].encode().decode("unicode_escape")
            found.append((point, set(parts[5].split(","))))
    return sorted(found, key=lambda m: m[0].count("/") if m[0] != "/" else 0)


def _under(path: str, roots) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _bind_back(fd: int, target: str, kind: str, writable: bool) -> None:
    """Bind the inode behind fd (opened before it was hidden) onto target, creating the mount point."""
    if not os.path.exists(target):
        if kind == "dir":
            os.makedirs(target, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            open(target, "w").close()
    _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | (MS_REC if writable else 0))


def build_file_system(writable: list[str], readable: list[str]) -> dict:
    """Make the mount namespace's file system (module docstring); returns what holds and what failed.

    Must run in a fresh mount namespace, in the new PID namespace (for /proc), before capabilities go."""
    problems: list[str] = []
    done: dict = {}
    _mount(None, "/", None, MS_REC | MS_PRIVATE)   # nothing done here reaches the host's mounts
    keep_rw = [os.path.realpath(d) for d in writable if os.path.isdir(d)]
    hidden = [h for h in HIDDEN if os.path.isdir(h) and not os.path.islink(h)]
    # what must survive the hiding: opened now, bound back after
    back: list[tuple[int, str, str, bool]] = []
    for path in keep_rw:
        if _under(path, hidden):
            back.append((os.open(path, os.O_PATH | os.O_CLOEXEC), path, "dir", True))
    for path in dict.fromkeys(os.path.realpath(p) for p in readable if os.path.exists(p)):
        if _under(path, hidden) and not _under(path, keep_rw):
            back.append((os.open(path, os.O_PATH | os.O_CLOEXEC), path, "dir" if os.path.isdir(path) else "file",
                         False))
    # NOTE: outermost first, so that a writable directory inside a read-only one (a scratch directory under
    # a PYTHONPATH entry) is bound on top of it, not hidden under it
    back.sort(key=lambda entry: entry[1].rstrip("/").count("/"))
    for h in hidden:
        try:
            _mount("tmpfs", h, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777" if h != "/run" else "mode=0755")
        except OSError as exc:
            problems.append(str(exc))
    for fd, path, kind, rw in back:
        try:
            _bind_back(fd, path, kind, rw)
        except OSError as exc:
            problems.append(str(exc))
        finally:
            os.close(fd)
    for path in keep_rw:
        if not _under(path, hidden):
            _mount(path, path, None, MS_BIND | MS_REC)
    masked = _mask_sockets(problems)
    done["sockets_masked"] = masked
    # a fresh /proc: only this PID namespace's processes, so no /proc/<kgen's pid>
    try:
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        done["proc"] = True
    except OSError as exc:
        problems.append(str(exc))
        done["proc"] = False
    for d in PROC_READ_ONLY:
        if os.path.exists(d):
            try:
                _mount(d, d, None, MS_BIND)
            except OSError as exc:
                problems.append(str(exc))
    try:
        done["devices"] = _minimal_dev(hidden)
    except OSError as exc:
        problems.append(f"/dev: {exc}")
        done["devices"] = ""
    for point, options in _mounts():
        if point in keep_rw or _under(point, ["/dev"]) or (_under(point, ["/proc"]) and point not in PROC_READ_ONLY):
            continue
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        for name, bit in KEEP_FLAGS.items():
            if name in options:
                flags |= bit
        try:
            _mount(None, point, None, flags)
        except OSError as exc:
            if exc.errno != 2:   # ENOENT: a mount point hidden under a tmpfs above, unreachable anyway
                problems.append(str(exc))
    done["problems"] = problems
    return done


def _mask_sockets(problems: list[str]) -> int:
    """Bind /dev/null over every named socket that SOCKET_GLOBS finds; returns how many."""
    masked = 0
    for pattern in SOCKET_GLOBS:
        for path in glob.glob(pattern):
            try:
                if not stat.S_ISSOCK(os.lstat(path).st_mode):
                    continue
                _mount("/dev/null", path, None, MS_BIND)
                masked += 1
            except OSError as exc:
                problems.append(f"socket {path}: {exc}")
    return masked


def _minimal_dev(hidden: list[str]) -> str:
    """Replace /dev by a tmpfs holding only the devices a candidate needs; returns the list, or raises OSError."""
    if "/run" not in hidden:
        raise OSError(2, "no private /run to build it in")
    stage = "/run/.kgen-dev"
    os.mkdir(stage, 0o755)
    _mount("tmpfs", stage, "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755")
    kept = []
    names = list(DEVICES) + sorted({os.path.basename(p) for g in DEVICE_GLOBS for p in glob.glob(f"/dev/{g}")})
    for name in names:
        src = f"/dev/{name}"
        if not os.path.exists(src):
            continue
        dst = f"{stage}/{name}"
        if os.path.isdir(src):
            os.mkdir(dst)
            _mount(src, dst, None, MS_BIND | MS_REC)
        else:
            open(dst, "w").close()
            _mount(src, dst, None, MS_BIND)
        kept.append(name)
    for name, target in DEV_LINKS.items():
        os.symlink(target, f"{stage}/{name}")
    os.mkdir(f"{stage}/shm")
    _mount("tmpfs", f"{stage}/shm", "tmpfs", MS_NOSUID | MS_NODEV, SHM_SIZE + ",mode=1777")
    os.mkdir(f"{stage}/pts")
    _mount(None, stage, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC)
    _mount(stage, "/dev", None, MS_MOVE)
    os.rmdir(stage)
    return " ".join(kept)


def drop_capabilities(keep: tuple[int, ...] = ()) -> None:
    """Every capability out of the bounding, ambient, inheritable, permitted and effective sets (but `keep`),
    the securebits locked so that no exec (as uid 0) gets them back. OSError on failure."""
    _check(_libc.prctl(PR_SET_SECUREBITS, SECUREBITS, 0, 0, 0), "prctl(PR_SET_SECUREBITS)")
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last = int(f.read())
    for cap in range(last + 1):
        if cap not in keep:
            _check(_libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"prctl(PR_CAPBSET_DROP, {cap})")
    _check(_libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "prctl(PR_CAP_AMBIENT_CLEAR_ALL)")
    mask = sum(1 << c for c in keep)
    header = struct.pack("Ii", CAP_V3, 0)
    data = struct.pack("IIIIII", mask & 0xFFFFFFFF, mask & 0xFFFFFFFF, 0, mask >> 32, mask >> 32, 0)
    _check(_libc.capset(ctypes.c_char_p(header), ctypes.c_char_p(data)), "capset")


def _unshare(flags: int) -> None:
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc.unshare(flags), "unshare")
    if flags & CLONE_NEWUSER:
        with open("/proc/self/setgroups", "w") as f:
            f.write("deny")
        with open("/proc/self/uid_map", "w") as f:
            f.write(f"0 {uid} 1")
        with open("/proc/self/gid_map", "w") as f:
            f.write(f"0 {gid} 1")


def _write_report(fd: int | None, report: dict) -> None:
    if fd is None:
        return
    try:
        os.write(fd, json.dumps(report).encode() + b"\n")
    except OSError:
        pass
    os.close(fd)


def _end_like(status: int) -> None:
    """Exit as a process with this wait status did: the same code, or death by the same signal."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):   # those two cannot be caught, nor set
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def _exec(program: list[str]) -> None:
    try:
        os.execvp(program[0], program)
    except OSError as exc:
        print(f"kgen sandbox: cannot run {program[0]}: {exc}", file=sys.stderr)
        os._exit(127)


def _init(program: list[str], writable: list[str], readable: list[str], report: dict, report_fd: int | None,
          status_w: int, profiler: bool) -> None:
    """PID 1 of the new namespace (module docstring). Never returns."""
    from verifier import seccomp

    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    cwd = os.getcwd()
    report["pid_namespace"] = os.getpid() == 1
    try:
        built = build_file_system(writable, readable)
        report["files"] = not built["problems"]
        report["proc"] = built["proc"]
        report["devices"] = built["devices"]
        report["sockets_masked"] = built["sockets_masked"]
        report["problems"] += built["problems"]
    except OSError as exc:
        report["files"] = False
        report["problems"].append(f"file system: {exc}")
    os.chdir(cwd)   # the working directory is the bind mount now, not the inode under it
    try:
        _libc.sethostname(SANDBOX_HOSTNAME, len(SANDBOX_HOSTNAME))
    except OSError:
        pass
    try:
        # NOTE: none kept for a profiler either: where the driver keeps GPU counters to admins
        # (RmProfilingAdminOnly: 1), ncu says so and the profiler falls back to its other path
        drop_capabilities()
        report["capabilities"] = "none"
    except OSError as exc:
        report["capabilities"] = ""
        report["problems"].append(str(exc))
    try:
        seccomp.install(allow_perf=profiler)
        report["seccomp"] = "perf_event_open allowed (profiler)" if profiler else "on"
    except (OSError, ValueError) as exc:
        report["seccomp"] = ""
        report["problems"].append(f"seccomp: {exc}")
    with open("/proc/self/status") as f:
        status = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
    report["no_new_privs"] = status.get("NoNewPrivs", "").strip() == "1"
    report["uid"] = os.getuid()
    _write_report(report_fd, report)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_IGN)
    child = os.fork()
    if child == 0:
        os.close(status_w)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
                    signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        _exec(program)
    # reap everything until the program ends; its status goes to the launcher
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            status = 1 << 8
            break
        except InterruptedError:
            continue
        if pid == child:
            break
    os.write(status_w, struct.pack("i", status))
    os._exit(0)


def launch(args: list[str]) -> None:
    """The launcher's main (module docstring). Never returns."""
    if "--" not in args:
        raise SystemExit("usage: python -m verifier.confine [--report-fd=N] [--profiler] [--share-network] DIR... -- PROGRAM ARGS...")
    split = args.index("--")
    options, program = args[:split], args[split + 1:]
    if not program:
        raise SystemExit("verifier.confine: no program given")
    report_fd = next((int(o.split("=", 1)[1]) for o in options if o.startswith("--report-fd=")), None)
    profiler = "--profiler" in options
    share_network = "--share-network" in options
    writable = [o for o in options if not o.startswith("--")]
    readable = [p for p in program if os.path.isabs(p) or os.sep in p] + \
        [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if report_fd is not None:
        os.set_inheritable(report_fd, False)
    flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | (0 if share_network else CLONE_NEWNET)
    user_ns = os.geteuid() != 0
    if user_ns:
        flags |= CLONE_NEWUSER
    report: dict = {"problems": [], "user_namespace": user_ns}
    try:
        _unshare(flags)
        report["network"] = not share_network
    except OSError as exc:
        # NOTE: nothing of the namespaces holds; the program still runs (the caller's notes say NOT isolated)
        report.update(network=False, pid_namespace=False, files=False, problems=[f"namespaces: {exc}"])
        _write_report(report_fd, report)
        _exec(program)
    status_r, status_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(status_r)
        try:
            _init(program, writable, readable, report, report_fd, status_w, profiler)
        finally:
            os._exit(126)
    os.close(status_w)
    if report_fd is not None:
        os.close(report_fd)
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_IGN)
    _, init_status = os.waitpid(pid, 0)
    data = os.read(status_r, 4)
    _end_like(struct.unpack("i", data)[0] if len(data) == 4 else init_status)


if __name__ == "__main__":
    launch(sys.argv[1:])
