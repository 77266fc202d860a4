"""The OS confinement of a sandboxed candidate: namespaces, a read-only world, an unprivileged uid, seccomp.

    python -m verifier.confine [--report-fd=N] [--profiler] [--share-network] [--uid=N]
                               [--own=DIR]... [--share=DIR]... DIR... -- PROGRAM ARGS...

(also reachable as `python -m verifier.sandbox --confine ...`). verifier.sandbox
puts this launcher in front of the worker's command line. It runs as three processes:

- the launcher (outside, kgen's child): unshare(2) of the mount, PID, network,
  IPC and UTS namespaces (plus a user namespace when not root), then one fork.
  It waits, and ends as the program ended (the same exit code, or the same
  signal), so the caller sees the program's status;
- an init, PID 1 of the new PID namespace: it lends the sandbox's directories
  to the program's uid (below), builds the file system (below), checks that
  uid can run the program, forks the program, then confines itself (not
  dumpable, no capabilities, seccomp) and reaps orphans until the program
  ends. When it ends, the kernel kills every process left in the namespace:
  nothing the candidate started outlives it, double-forked or not. It dies
  with the launcher (PR_SET_PDEATHSIG), and a signal from inside the namespace
  cannot reach it (an init gets only the signals it handles; it handles none);
- the program, PID 2: it waits for the init's own confinement, switches to
  its uid while dropping every capability, sets no_new_privs, loads the
  seccomp filter (verifier.seccomp), writes what holds for it to --report-fd
  as one JSON line, and execs.

The file system inside: mounts made private; /run replaced by an empty tmpfs
(daemons' sockets and state); the named sockets under /tmp and /var/tmp (two
levels down: tmux's, X's, ssh agents', a database's) masked by /dev/null;
DIR..., --own and --share directories (the sandbox's directory, the caller's
directory, the compile caches) bound back writable; the program's own files
(existing paths in its argv and PYTHONPATH, the interpreter's prefixes and
sys.path: `program_paths`) bound back read-only; every directory the program's
uid cannot search above one of those (/root, mode 0700, above a pyenv
interpreter or a checkout) replaced by a tmpfs holding only them, bound back
(the report's "opened"): the rest of /root is not there at all; a fresh /proc
of the new PID namespace, with /proc/sys and the like read-only; every other
mount read-only; /dev a tmpfs with only null, zero, full, random, urandom,
tty, the NVIDIA device nodes and a private /dev/shm (a process may still open
what its uid's file modes allow, so /dev/vda and the like must not be there);
a writable directory under the host's /dev/shm (the judge's exchange directory,
where tensor files cross in memory) is bound at its path inside the private one.

The user: the program runs as uid and gid 65534 ("nobody", SANDBOX_UID; --uid=N
another, --uid=0 none), with no supplementary groups, every capability dropped
from all five sets and the securebits locked. It owns nothing of the host's:
root's files are other users' files to it (a mode-0600 key is closed, a 0644
file cannot be written), and kgen's processes are another user's. What it must
write is lent to it before the file system is built: each --own directory (the
sandbox's own: cwd, HOME, compile caches) is chowned to it, with the
directories and named pipes in it; each --share directory (the caller's
exchange directory, where the judge's files lie) becomes group 65534, mode 1770,
its named pipes group 65534, mode 0660: the program adds files there (its
outputs, which kgen, root, reads back), but cannot change, remove or replace
kgen's (root's 0644 files in a sticky directory). Then `probe_user`, in the
file system the program will see, forks a child that switches to that uid and
checks it can execute the program, read every path it needs, write every
writable directory, and start the interpreter (`-c pass`, site-packages' .pth
files included). Only when all of that holds does the program switch.
Otherwise (a needed file or directory whose own mode closes it to the uid: a
PYTHONPATH entry of mode 0700, an interpreter file of mode 0600) the lent
directories are given back, the program stays uid 0 with every capability
dropped and the securebits locked, so no exec gets one back: it cannot
override a file's permissions, signal or trace another user, mount, or load
anything into the kernel, but it can read what root's modes allow; the
report's uid_problem says why ("uid 0: /x is not readable by uid 65534"), and
verifier.sandbox lists "unprivileged uid (...)" as not in force. When kgen is
not root, a user namespace maps the caller's uid to 0 inside, with the same
drop; there is no other uid to switch to, and the report says so.

The init stays uid 0 without capabilities, not dumpable (PR_SET_DUMPABLE 0):
its /proc/1/mem, environ, maps, fd/ and cwd are another user's to uid 65534,
and even a program of its own uid (the fallback) would need CAP_SYS_PTRACE for
them, which nothing inside has (without it, such a program read and wrote the
init's memory).
"""

from __future__ import annotations

import ctypes
import errno
import glob
import json
import os
import re
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
PR_SET_DUMPABLE = 4
SANDBOX_UID = SANDBOX_GID = 65534   # "nobody": owns nothing of the host's
MAX_REACH_ROUNDS = 4                # closed directories nested inside bound-back ones, at most this deep

USAGE = "python -m verifier.confine [--report-fd=N] [--profiler] [--share-network] [--uid=N] [--own=DIR]... " \
        "[--share=DIR]... DIR... -- PROGRAM ARGS..."

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
        _makedirs(target if kind == "dir" else os.path.dirname(target))
        if kind != "dir":
            open(target, "w").close()
    _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | (MS_REC if writable else 0))


def _makedirs(path: str) -> None:
    """mkdir -p, each new directory mode 0755 whatever the umask: mount points on a tmpfs another uid walks through."""
    missing = []
    while not os.path.exists(path):
        missing.append(path)
        path = os.path.dirname(path)
    for d in reversed(missing):
        os.mkdir(d)
        os.chmod(d, 0o755)


def _traversable(path: str, uid: int, gid: int) -> bool:
    """Whether uid (primary group gid, no others) may search the directory, by its mode bits."""
    st = os.stat(path)
    bit = 0o100 if st.st_uid == uid else 0o010 if st.st_gid == gid else 0o001
    return bool(st.st_mode & bit)


def closed_ancestors(paths, uid: int, gid: int) -> list[str]:
    """The outermost directory above each path (the path itself excluded) that uid cannot search; sorted."""
    found = set()
    for path in paths:
        parts = os.path.realpath(path).split("/")[1:-1]
        for i in range(len(parts)):
            d = "/" + "/".join(parts[:i + 1])
            try:
                if not _traversable(d, uid, gid):
                    found.add(d)
                    break
            except OSError:
                break
    return sorted(d for d in found if not _under(d, found - {d}))


def _hide(dirs: list[str], keep_rw: list[str], readable: list[str], problems: list[str], mode: str) -> None:
    """Put an empty tmpfs over each of dirs, then bind back (at the same paths) the writable directories and the
    readable paths under them: outside those, nothing of what was there can be reached."""
    back: list[tuple[int, str, str, bool]] = []
    for path in keep_rw:
        if _under(path, dirs):
            back.append((os.open(path, os.O_PATH | os.O_CLOEXEC), path, "dir", True))
    for path in readable:
        if _under(path, dirs) and not _under(path, keep_rw):
            back.append((os.open(path, os.O_PATH | os.O_CLOEXEC), path, "dir" if os.path.isdir(path) else "file",
                         False))
    # NOTE: outermost first, so that a writable directory inside a read-only one (a scratch directory under
    # a PYTHONPATH entry) is bound on top of it, not hidden under it
    back.sort(key=lambda entry: entry[1].rstrip("/").count("/"))
    for h in dirs:
        try:
            _mount("tmpfs", h, "tmpfs", MS_NOSUID | MS_NODEV, mode)
        except OSError as exc:
            problems.append(str(exc))
    for fd, path, kind, rw in back:
        try:
            _bind_back(fd, path, kind, rw)
        except OSError as exc:
            problems.append(str(exc))
        finally:
            os.close(fd)


def build_file_system(writable: list[str], readable: list[str], reach: tuple[int, int] | None = None) -> dict:
    """Make the mount namespace's file system (module docstring); returns what holds and what failed.

    reach: (uid, gid) that will run the program: every directory it cannot search above a readable or
    writable path (/root, mode 0700, above a pyenv interpreter) is replaced by a tmpfs holding only those
    paths, bound back. Must run in a fresh mount namespace, in the new PID namespace (for /proc), before
    capabilities go."""
    problems: list[str] = []
    done: dict = {}
    _mount(None, "/", None, MS_REC | MS_PRIVATE)   # nothing done here reaches the host's mounts
    keep_rw = [os.path.realpath(d) for d in writable if os.path.isdir(d)]
    readable = list(dict.fromkeys(os.path.realpath(p) for p in readable if os.path.exists(p)))
    hidden = [h for h in HIDDEN if os.path.isdir(h) and not os.path.islink(h)]
    _hide(hidden, keep_rw, readable, problems, "mode=0755")
    opened: list[str] = []
    for _ in range(MAX_REACH_ROUNDS if reach else 0):
        closed = [d for d in closed_ancestors(keep_rw + readable, *reach) if d not in opened]
        if not closed:
            break
        _hide(closed, keep_rw, readable, problems, "mode=0755")
        opened += closed
    done["opened"] = opened
    hidden += opened
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
        done["devices"] = _minimal_dev(hidden, [p for p in keep_rw if _under(p, ["/dev/shm"])])
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
            except FileNotFoundError:
                continue   # NOTE: gone since the glob (another process's temporary file): nothing to mask
            except OSError as exc:
                if exc.errno == errno.ENOENT:
                    continue
                problems.append(f"socket {path}: {exc}")
    return masked


def _minimal_dev(hidden: list[str], shared_shm: list[str] = ()) -> str:
    """Replace /dev by a tmpfs holding only the devices a candidate needs; returns the list, or raises OSError.

    shared_shm: writable directories under the host's /dev/shm (the judge's exchange directory, where tensor
    files cross in memory): bound at the same paths inside the private /dev/shm, the rest of the host's unseen."""
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
    for path in shared_shm:
        target = stage + path[len("/dev"):]
        _makedirs(target)
        _mount(path, target, None, MS_BIND | MS_REC)   # NOTE: the host's /dev is still in place: bound by its path
    os.mkdir(f"{stage}/pts")
    _mount(None, stage, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC)
    _mount(stage, "/dev", None, MS_MOVE)
    os.rmdir(stage)
    return " ".join(kept)


def drop_capabilities(keep: tuple[int, ...] = (), become: tuple[int, int] | None = None) -> None:
    """Every capability out of the bounding, ambient, inheritable, permitted and effective sets (but `keep`),
    the securebits locked so that no exec (as uid 0) gets them back; with `become` (uid, gid), the uid, the
    gid and no supplementary groups switched to it on the way (the last moment CAP_SETUID is there). OSError
    on failure."""
    _check(_libc.prctl(PR_SET_SECUREBITS, SECUREBITS, 0, 0, 0), "prctl(PR_SET_SECUREBITS)")
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last = int(f.read())
    for cap in range(last + 1):
        if cap not in keep:
            _check(_libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"prctl(PR_CAPBSET_DROP, {cap})")
    _check(_libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "prctl(PR_CAP_AMBIENT_CLEAR_ALL)")
    if become is not None:
        _switch_user(*become)
    mask = sum(1 << c for c in keep)
    header = struct.pack("Ii", CAP_V3, 0)
    data = struct.pack("IIIIII", mask & 0xFFFFFFFF, mask & 0xFFFFFFFF, 0, mask >> 32, mask >> 32, 0)
    _check(_libc.capset(ctypes.c_char_p(header), ctypes.c_char_p(data)), "capset")


def _switch_user(uid: int, gid: int) -> None:
    """Real, effective and saved uid and gid to (uid, gid), no supplementary groups; checked. OSError on failure."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid) or os.getgroups():
        raise OSError(1, f"the switch to uid {uid} did not hold")


def program_paths(program: list[str]) -> list[str]:
    """What the program must read: the paths in its argv, its executable (found on PATH, and where its
    links lead), the PYTHONPATH entries, and this interpreter's own (its prefixes, sys.path, torch's and
    triton's packages): the launcher is the interpreter kgen's programs run under."""
    import importlib.util
    import shutil

    paths = [p for p in program if os.path.isabs(p) or os.sep in p]
    exe = shutil.which(program[0])
    if exe:
        paths.append(exe)
    paths += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    paths += [sys.executable, sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix]
    paths += [p for p in sys.path if os.path.isabs(p)]
    for name in ("torch", "triton"):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.origin:
            paths.append(spec.origin)
    found = [os.path.abspath(p) for p in paths if os.path.exists(p)]
    # NOTE: a symbolic link on the way (a venv's bin/python) must itself be there, not only where it leads:
    # the directory that holds it is needed too (it may lie under a directory the file system hides)
    links = [os.path.realpath(os.path.dirname(q)) for p in found for q in _prefixes(p) if os.path.islink(q)]
    return list(dict.fromkeys(found + [os.path.realpath(p) for p in found] + links))


def _prefixes(path: str) -> list[str]:
    """/a/b/c -> ["/a", "/a/b", "/a/b/c"]."""
    parts = path.split("/")[1:]
    return ["/" + "/".join(parts[:i + 1]) for i in range(len(parts))]


def _hand_over(own: list[str], shared: list[str], uid: int, gid: int, changed: list[tuple[str, int, int, int]]) -> None:
    """Make the sandbox's directories the uid's to use, each change recorded in `changed` as it is made (owner
    and mode before; on OSError what was done so far is there to give back):
    - own (the sandbox's directory: the program's cwd, HOME, caches): chown to uid:gid, with the directories
      and named pipes in it;
    - shared (the caller's exchange directory, where kgen's files lie beside the program's): group gid, mode
      1770: the program creates files there, but cannot change, remove or rename kgen's (sticky, and theirs
      stay 0644 root's); its named pipes group gid, mode 0660."""
    def change(path: str, st, owner: tuple[int, int], mode: int | None) -> None:
        changed.append((path, st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)))
        os.lchown(path, *owner)
        if mode is not None:
            os.chmod(path, mode)

    for top in own:
        todo = [top]
        while todo:
            path = todo.pop()
            st = os.lstat(path)
            if stat.S_ISDIR(st.st_mode):
                todo += [e.path for e in os.scandir(path)]
            elif not stat.S_ISFIFO(st.st_mode):
                continue
            if (st.st_uid, st.st_gid) != (uid, gid):
                change(path, st, (uid, gid), None)
    for top in shared:
        st = os.lstat(top)
        change(top, st, (st.st_uid, gid), 0o1770)
        for entry in os.scandir(top):
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISFIFO(st.st_mode) and st.st_uid == os.geteuid():
                change(entry.path, st, (st.st_uid, gid), 0o660)


def _give_back(changed: list[tuple[str, int, int, int]]) -> None:
    for path, uid, gid, mode in reversed(changed):
        try:
            os.lchown(path, uid, gid)
            os.chmod(path, mode)
        except OSError:
            pass


def probe_user(uid: int, gid: int, program: list[str], readable: list[str], writable: list[str]) -> str:
    """Whether uid can run the program here: "" or why not ("/root is not searchable by uid 65534").

    A forked child switches to (uid, gid), checks it can search and read every readable path, execute the
    program and write every writable directory (the kernel's own access checks, ACLs included), then, when
    the program is a Python interpreter, runs it (`-c pass`: its libraries, stdlib and site-packages' .pth
    files) as that uid."""
    import shutil

    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        try:
            _switch_user(uid, gid)
            why = _access_problem(uid, program, readable, writable)
            exe = shutil.which(program[0])
            if not why and exe and re.fullmatch(r"python[0-9.]*", os.path.basename(os.path.realpath(exe))):
                os.write(write_fd, f"uid {uid} cannot start {exe}".encode())
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                os.set_inheritable(write_fd, True)
                os.execv(exe, [exe, "-c", "import os; os.write(%d, b'\\nok')" % write_fd])
            os.write(write_fd, why.encode())
        except BaseException as exc:  # noqa: BLE001
            os.write(write_fd, f"uid {uid}: {exc}".encode())
        os._exit(0)
    os.close(write_fd)
    chunks = []
    while chunk := os.read(read_fd, 4096):
        chunks.append(chunk)
    os.close(read_fd)
    _, status = os.waitpid(pid, 0)
    said = b"".join(chunks).decode(errors="replace")
    if said.endswith("\nok") and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        return ""
    return said.split("\n")[0] or f"the probe as uid {uid} {'died' if os.WIFSIGNALED(status) else 'failed'}"


def _access_problem(uid: int, program: list[str], readable: list[str], writable: list[str]) -> str:
    import shutil

    # NOTE: a path the uid cannot reach is not found on PATH either: it is checked as given, for the reason
    exe = shutil.which(program[0]) or (program[0] if os.sep in program[0] else None)
    if not exe:
        return f"uid {uid} finds no executable {program[0]} on PATH"
    checks = [(exe, os.X_OK, "executable")] + \
        [(p, os.R_OK | (os.X_OK if os.path.isdir(p) else 0), "readable") for p in readable] + \
        [(d, os.W_OK | os.X_OK, "writable") for d in writable]
    for path, mode, what in checks:
        if os.access(path, mode):
            continue
        # name the outermost directory it cannot search, when that is the reason
        parts = path.split("/")
        for i in range(2, len(parts)):
            d = "/".join(parts[:i])
            if not os.access(d, os.X_OK):
                return f"{d} is not searchable by uid {uid} (needed for {path})"
        return f"{path} is not {what} by uid {uid}"
    return ""


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


def _init(program: list[str], writable: list[str], readable: list[str], own: list[str], shared: list[str],
          become: tuple | None,
          report: dict, report_fd: int | None, status_w: int, profiler: bool) -> None:
    """PID 1 of the new namespace (module docstring). Never returns."""
    from verifier import seccomp

    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    cwd = os.getcwd()
    report["pid_namespace"] = os.getpid() == 1
    changed: list[tuple[str, int, int, int]] = []
    if become is not None:
        try:
            _hand_over(own, shared, *become, changed)
        except OSError as exc:
            report["uid_problem"] = f"uid 0: cannot hand the sandbox's directories to uid {become[0]}: {exc}"
            _give_back(changed)
            become = None
    try:
        built = build_file_system(writable, readable, become)
        report["files"] = not built["problems"]
        report["proc"] = built["proc"]
        report["devices"] = built["devices"]
        report["sockets_masked"] = built["sockets_masked"]
        report["opened"] = built["opened"]
        report["problems"] += built["problems"]
    except OSError as exc:
        report["files"] = False
        report["problems"].append(f"file system: {exc}")
    os.chdir(cwd)   # the working directory is the bind mount now, not the inode under it
    try:
        _libc.sethostname(SANDBOX_HOSTNAME, len(SANDBOX_HOSTNAME))
    except OSError:
        pass
    if become is not None:
        # NOTE: checked in the file system the program will see, after the sandbox's own directories are its
        why = probe_user(*become, program, readable, writable)
        if why:
            _give_back(changed)
            report["uid_problem"] = f"uid 0: {why}"
            become = None
    go_r, go_w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(status_w)
        os.close(go_w)
        _program(program, become, report, report_fd, go_r, profiler)
    os.close(go_r)
    if report_fd is not None:
        os.close(report_fd)
    # The init's own confinement: a program that shares its uid (the fallback) must not reach it either.
    # NOTE: not dumpable: /proc/1/mem, environ, fd/ and the like need CAP_SYS_PTRACE, which nothing here has
    init: list[str] = []
    if _libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        init.append(f"prctl(PR_SET_DUMPABLE): {os.strerror(ctypes.get_errno())}")
    try:
        drop_capabilities()
    except OSError as exc:
        init.append(str(exc))
    try:
        seccomp.install(allow_perf=profiler)
    except (OSError, ValueError) as exc:
        init.append(f"seccomp: {exc}")
    os.write(go_w, json.dumps(init).encode())
    os.close(go_w)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_IGN)
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


def _program(program: list[str], become: tuple | None, report: dict, report_fd: int | None, go_r: int,
             profiler: bool) -> None:
    """The program's process (PID 2), between fork and exec: it waits for the init to confine itself, confines
    itself (the uid switch with the capability drop, seccomp), reports what holds for it, and execs."""
    from verifier import seccomp

    chunks = []
    while chunk := os.read(go_r, 4096):
        chunks.append(chunk)
    os.close(go_r)
    try:
        init = json.loads(b"".join(chunks) or b'["the init ended"]')
    except ValueError:
        init = ["the init said nothing readable"]
    report["init"] = "not dumpable, no capabilities, seccomp" if not init else "; ".join(init)
    report["problems"] += [f"init: {p}" for p in init]
    try:
        # NOTE: none kept for a profiler either: where the driver keeps GPU counters to admins
        # (RmProfilingAdminOnly: 1), ncu says so and the profiler falls back to its other path
        drop_capabilities(become=become)
        report["capabilities"] = "none"
    except OSError as exc:
        report["capabilities"] = ""
        report["problems"].append(str(exc))
        if become is not None and os.getuid() != become[0]:
            report["uid_problem"] = f"uid {os.getuid()}: {exc}"
    try:
        seccomp.install(allow_perf=profiler)
        report["seccomp"] = "perf_event_open allowed (profiler)" if profiler else "on"
    except (OSError, ValueError) as exc:
        report["seccomp"] = ""
        report["problems"].append(f"seccomp: {exc}")
    with open("/proc/self/status") as f:
        status = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
    report["no_new_privs"] = status.get("NoNewPrivs", "").strip() == "1"
    report["uid"], report["gid"], report["groups"] = os.getuid(), os.getgid(), os.getgroups()
    _write_report(report_fd, report)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
                signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    _exec(program)


def launch(args: list[str]) -> None:
    """The launcher's main (module docstring). Never returns."""
    if "--" not in args:
        raise SystemExit(f"usage: {USAGE}")
    split = args.index("--")
    options, program = args[:split], args[split + 1:]
    if not program:
        raise SystemExit("verifier.confine: no program given")
    report_fd = next((int(o.split("=", 1)[1]) for o in options if o.startswith("--report-fd=")), None)
    profiler = "--profiler" in options
    share_network = "--share-network" in options
    own = [o.split("=", 1)[1] for o in options if o.startswith("--own=")]
    shared = [o.split("=", 1)[1] for o in options if o.startswith("--share=")]
    asked = next((int(o.split("=", 1)[1]) for o in options if o.startswith("--uid=")), None)
    writable = [o for o in options if not o.startswith("--")] + own + shared
    readable = program_paths(program)
    if report_fd is not None:
        os.set_inheritable(report_fd, False)
    flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | (0 if share_network else CLONE_NEWNET)
    user_ns = os.geteuid() != 0
    if user_ns:
        flags |= CLONE_NEWUSER
    report: dict = {"problems": [], "user_namespace": user_ns}
    become = None
    if user_ns:
        report["uid_problem"] = f"kgen's own uid {os.geteuid()}: kgen is not root, and a user namespace it makes " \
                                f"can map only that uid"
    elif asked == 0:
        report["uid_problem"] = "uid 0: kept as asked (--uid=0)"
    else:
        become = (asked or SANDBOX_UID, asked or SANDBOX_GID)
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
            _init(program, writable, readable, own, shared, become, report, report_fd, status_w, profiler)
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
