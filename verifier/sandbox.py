"""Running untrusted candidate code in a fresh, limited subprocess.

    from verifier.sandbox import run_sandboxed
    res = run_sandboxed([sys.executable, "-m", "verifier.worker"], job, timeout_s=120)
    res.message  # the child's signed verdict, or None

What is isolated:
- a fresh Python process per run, in its own process group and session; on
  timeout the whole group is killed (SIGKILL), grandchildren included;
- its own temporary working directory (also $HOME and $TMPDIR), removed afterwards;
- an environment scrubbed of secrets: every variable whose name contains KEY,
  TOKEN, SECRET, PASSWORD or CREDENTIAL, and every OPENAI_* variable, is removed;
- no network, where the OS allows: the child runs under `unshare -n` (as root)
  or `unshare -rn` (an unprivileged user namespace). When neither works the
  result's `isolation` list says "network: NOT isolated";
- limits: no core dumps, files it writes capped in size, processes and threads
  capped (RLIMIT_NPROC, where it applies: it does not bind root), captured
  stdout/stderr capped per stream (the rest is drained and dropped);
- the verdict comes back over a pipe, signed with a key only the harness knows
  (verifier.channel): the candidate's stdout, files and exit code cannot forge it.

What is NOT isolated:
- the file system: the child runs as the same user and could write wherever
  that user can (the verifier's static checks reject file writes, but this is
  not a boundary against a determined attacker);
- the GPU: it is shared with the parent; a GPU fault kills only the child's
  context, but a kernel that hangs the GPU until the timeout holds it that long;
- memory: host and GPU memory are not capped by this module (CUDA reserves
  huge virtual ranges, so RLIMIT_AS would break honest kernels); a candidate
  that allocates too much fails with an out-of-memory error or is killed by the OS;
- shared compile caches (Triton, torch extensions, CuPy) under ~/.cache/kgen,
  which make a re-verification fast.
A candidate that defeats the static checks with dynamic code could reach the
harness's memory; kgen's guarantees hold against the exploit classes its test
suite names, not against arbitrary malicious code. Run untrusted kernels on a
machine you can afford to lose.
"""

from __future__ import annotations

import functools
import os
import re
import resource
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from verifier import channel

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|^OPENAI_", re.IGNORECASE)
PROJECT_ROOT = Path(__file__).resolve().parent.parent
CACHE_ROOT = Path(os.environ.get("KGEN_CACHE", Path.home() / ".cache" / "kgen"))
MAX_PROCS = 512            # threads count against RLIMIT_NPROC on Linux; torch + triton use ~100
MAX_FILE_BYTES = 1 << 30   # largest file the child may write


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
    wall_s: float = 0.0
    stdout_dropped: int = 0          # bytes beyond the cap
    stderr_dropped: int = 0


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


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_sandboxed(
    argv: list[str],
    job: dict,
    *,
    timeout_s: float,
    output_cap_bytes: int = 64_000,
    cwd: Path | None = None,
    extra_env: dict[str, str] | None = None,
    isolate_network: bool = True,
) -> SandboxResult:
    """Run argv in a fresh sandboxed process; the job reaches it on stdin with the channel's key."""
    key = secrets.token_bytes(32)
    read_fd, write_fd = os.pipe()
    workdir = Path(tempfile.mkdtemp(prefix="kgen-sandbox-", dir=cwd))
    prefix, net_note = network_isolation() if isolate_network else ([], "network: not isolated (not asked)")
    env = scrubbed_env(extra_env)
    env.update(HOME=str(workdir), TMPDIR=str(workdir), KGEN_RESULT_FD=str(write_fd))
    for d in ("TRITON_CACHE_DIR", "TORCH_EXTENSIONS_DIR", "CUPY_CACHE_DIR"):
        Path(env[d]).mkdir(parents=True, exist_ok=True)

    start = time.perf_counter()
    import json

    stdin_line = json.dumps({"key": key.hex(), "job": job}).encode() + b"\n"
    proc = subprocess.Popen(
        prefix + list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=workdir,
        env=env,
        pass_fds=(write_fd,),
        start_new_session=True,  # NOTE: its own process group, so the timeout kill reaches grandchildren
        preexec_fn=_limit_child,
    )
    os.close(write_fd)
    out, err = _Drain(proc.stdout, output_cap_bytes), _Drain(proc.stderr, output_cap_bytes)
    result_chunks: list[bytes] = []

    def read_result() -> None:
        total = 0
        with os.fdopen(read_fd, "rb") as f:
            while chunk := f.read(65536):
                total += len(chunk)
                if total <= channel.MAX_MESSAGE_BYTES:
                    result_chunks.append(chunk)

    reader = threading.Thread(target=read_result, daemon=True)
    for t in (out, err, reader):
        t.start()
    try:
        proc.stdin.write(stdin_line)
        proc.stdin.close()
    except BrokenPipeError:
        pass  # the child died before reading its job; its exit status says why

    timed_out = False
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        timed_out = True
    # Kill whatever is left of the group: on timeout, and also stray children of a finished child.
    _kill_group(proc)
    proc.wait()
    for t in (out, err, reader):
        t.join(timeout=5)
    wall = time.perf_counter() - start
    shutil.rmtree(workdir, ignore_errors=True)

    message, problem = channel.decode(key, b"".join(result_chunks))
    return SandboxResult(
        returncode=None if timed_out else proc.returncode,
        stdout=out.kept.decode(errors="replace"),
        stderr=err.kept.decode(errors="replace"),
        timed_out=timed_out,
        message=None if timed_out else message,
        channel_problem="timed out" if timed_out else problem,
        isolation=[net_note, "env: secrets scrubbed", "cwd: fresh temporary directory",
                   f"time: {timeout_s:.0f} s wall limit, process group killed"],
        wall_s=wall,
        stdout_dropped=out.dropped,
        stderr_dropped=err.dropped,
    )
