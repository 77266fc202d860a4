"""A seccomp filter for the sandboxed candidate: the syscalls that reach outside its box fail with EPERM.

    from verifier import seccomp
    seccomp.install()                    # this process and everything it starts from now on
    seccomp.install(allow_perf=True)     # the same, but perf_event_open stays allowed (a profiler needs it)
    seccomp.DENIED                       # the names denied, for the notes and the tests

The filter is classic BPF written here with ctypes (no libseccomp): it checks
the architecture (x86-64 or aarch64; a foreign ABI, i386 or x32 on an x86-64
kernel, gets EPERM for every syscall, since its numbers differ), then denies
by number. Denied with EPERM: ptrace, process_vm_readv/writev, setns,
unshare, the mount family (mount, umount2, pivot_root, fsopen, fsmount,
move_mount, open_tree, ...), the pidfd calls, the kernel keyring, bpf,
perf_event_open (unless allow_perf), reboot, kexec, kernel modules, swap,
clocks, io_uring (its operations would bypass this filter), userfaultfd,
name_to_handle_at/open_by_handle_at, chroot, and clone() with a namespace
flag. AF_UNIX sockets stay allowed: CUDA's driver makes one at start-up
(cudaGetDeviceCount fails with error 304 without it); the named sockets of
the host are masked by the mount namespace instead (verifier.confine). clone3 answers ENOSYS, so that glibc falls back to clone(), whose flags
the filter can read (clone3's are behind a pointer).

Not filtered: kill/tkill/tgkill. seccomp sees only the target pid number, not
whose it is; the candidate runs in its own PID namespace (verifier.confine),
where no process outside it has a pid, so it can only signal its own.

Must run after prctl(PR_SET_NO_NEW_PRIVS) or with CAP_SYS_ADMIN; install() sets no_new_privs itself.
"""

from __future__ import annotations

import ctypes
import errno
import platform

# NOTE: AUDIT_ARCH_* values: EM_X86_64 / EM_AARCH64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_SYSCALL_BIT = 0x40000000

# name -> (x86-64 number, aarch64 number); None where the architecture has no such call
SYSCALLS: dict[str, tuple[int | None, int | None]] = {
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "setns": (308, 268),
    "unshare": (272, 97),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "pidfd_open": (434, 434),
    "pidfd_send_signal": (424, 424),
    "pidfd_getfd": (438, 438),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "fanotify_init": (300, 262),
    "reboot": (169, 142),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "create_module": (174, None),
    "query_module": (178, None),
    "get_kernel_syms": (177, None),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "acct": (163, 89),
    "quotactl": (179, 60),
    "quotactl_fd": (443, 443),
    "settimeofday": (164, 170),
    "clock_settime": (227, 112),
    "clock_adjtime": (305, 266),
    "adjtimex": (159, 171),
    "syslog": (103, 116),
    "sethostname": (170, 161),
    "setdomainname": (171, 162),
    "vhangup": (153, 58),
    "iopl": (172, None),
    "ioperm": (173, None),
    "uselib": (134, None),
    "nfsservctl": (180, None),
    "_sysctl": (156, None),
    "lookup_dcookie": (212, 18),
    "kcmp": (312, 272),
    "userfaultfd": (323, 282),
    "name_to_handle_at": (303, 264),
    "open_by_handle_at": (304, 265),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "process_madvise": (440, 440),
}
DENIED = tuple(SYSCALLS)
CLONE = (56, 220)
CLONE3 = (435, 435)
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET (CLONE_NEWTIME is clone3/unshare only)
CLONE_NAMESPACE_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_OFF_NR, _OFF_ARCH, _OFF_ARG0 = 0, 4, 16
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_SockFilter))]


def machine() -> str:
    """'x86_64' or 'aarch64' (ValueError elsewhere: no filter is better than a wrong one)."""
    m = platform.machine().lower()
    m = {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m)
    if m not in AUDIT_ARCH:
        raise ValueError(f"no seccomp syscall table for {platform.machine()}")
    return m


def program(arch: str, *, allow_perf: bool = False) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions for `arch`."""
    col = 0 if arch == "x86_64" else 1
    eperm, enosys = _RET_ERRNO | errno.EPERM, _RET_ERRNO | errno.ENOSYS
    ins = [(_LD_W_ABS, 0, 0, _OFF_ARCH),
           (_JEQ_K, 1, 0, AUDIT_ARCH[arch]),
           (_RET_K, 0, 0, eperm),
           (_LD_W_ABS, 0, 0, _OFF_NR)]
    if arch == "x86_64":
        ins += [(_JGE_K, 0, 1, X32_SYSCALL_BIT), (_RET_K, 0, 0, eperm)]
    for name, numbers in SYSCALLS.items():
        nr = numbers[col]
        if nr is None or (allow_perf and name == "perf_event_open"):
            continue
        ins += [(_JEQ_K, 0, 1, nr), (_RET_K, 0, 0, eperm)]
    ins += [(_JEQ_K, 0, 1, CLONE3[col]), (_RET_K, 0, 0, enosys)]
    # clone(): its flags are the first argument on both architectures; the low 32 bits hold every namespace flag
    ins += [(_JEQ_K, 0, 3, CLONE[col]),
            (_LD_W_ABS, 0, 0, _OFF_ARG0),
            (_JSET_K, 0, 1, CLONE_NAMESPACE_FLAGS),
            (_RET_K, 0, 0, eperm)]
    ins += [(_RET_K, 0, 0, _RET_ALLOW)]
    return ins


def install(*, allow_perf: bool = False) -> None:
    """Set no_new_privs and load the filter into this thread (and all it forks and executes). OSError on failure."""
    libc = ctypes.CDLL(None, use_errno=True)
    ins = program(machine(), allow_perf=allow_perf)
    array = (_SockFilter * len(ins))(*[_SockFilter(*i) for i in ins])
    prog = _SockFprog(len(ins), ctypes.cast(array, ctypes.POINTER(_SockFilter)))
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_NO_NEW_PRIVS): {errno.errorcode.get(err, err)}")
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_SECCOMP): {errno.errorcode.get(err, err)}")
