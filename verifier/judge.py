"""The judge: kgen's own side of verification, in the caller's process; it never runs candidate code.

    from verifier.judge import CandidateProcess, judge
    process = CandidateProcess()                        # the sandboxed candidate process, warming up now
    result = judge(task, source, config, process, device="cpu", backend="triton")

verifier.verify.verify() calls it after the static checks. The judge:
1. hands the job (task path, source, device, backend, the pipes, the variables of an extension built
   before it, verifier.inline_build) to a candidate process
   (verifier.candidate, started in a verifier.sandbox.Sandbox, maybe before the job was known), and
   meanwhile loads the task module itself and builds the reference `Model(*get_init_inputs())` under
   an init seed drawn for this verification (the candidate's ModelNew is built under the same one);
2. sends the reference's parameters as tensor files (verifier.tensorfile) for the candidate process to
   copy into its ModelNew;
3. memory: once ModelNew is built, measures the budget (the GPU's free memory, or config.memory_budget_bytes) and,
   from the first trial's inputs, outputs and (GPU) the reference's measured transients, plans how many copies
   both processes hold at once (verifier.memory_plan: the first trial runs its reference after the candidate's
   reply, to measure it; later ones beside it unless the plan says otherwise); a task that does not fit at the
   plan's minimum ends harness_error before any of its checks is charged to the kernel;
   correctness: for each trial, generates inputs from a seed (config.seed + trial, then hidden seeds
   drawn from the OS) and sends that seed only when the call is due: the candidate process makes the
   same inputs itself and reports their checksums, which must be the judge's (else, and from then on,
   the inputs go as files: a task whose get_inputs() is not a function of torch's seed); runs the reference
   with TF32 off (its parameters checked unchanged before every call), reads the candidate's outputs
   back (dtype, shape, byte count validated) and compares them (verifier.correctness.compare_outputs).
   On a CPU a last call refills the same input tensors from a hidden seed;
4. on a GPU: asks for the in-process timing (fresh inputs from a timing seed that is no correctness
   seed), checks the spot-checked calls and the graph replay on inputs it regenerates, checks the call
   after timing and hidden trials, then times a block by its own clock (verifier.timing.block_*): a
   claimed median the block cannot have taken is rejected ("timing inconsistent"). The block bounds
   a claim from below, loosely (a margin and the host's launch cost allowed); the tighter bound is the
   device's own, made after the verdict for a run's best kernel and for `kgen verify --strict`:
   profiler/crosscheck.py reads gpu__time_duration per launch under ncu, from counters the candidate
   process cannot write, and verifier.timing.ncu_check refuses a claim below their sum / 1.25;
5. closes the candidate process, then times eager on the same inputs with the same timing module,
   nothing of the candidate's running on the GPU beside it, and applies the roofline floor.

What the candidate process reports is believed only when it is negative (the
first layer's readable reasons: "torch did the work", "mutated input 0"); "ok"
is decided here, from outputs this module checked itself. A reply that is not
the protocol (verifier.wire) makes the candidate "crashed"; a process that
died, hung or hit a limit is reported from the sandbox's own result. kgen's
own failures (this module raising, the reference failing, an allocation of the
judge's own failing, the task not fitting the memory plan) are "harness_error",
never charged to the kernel, with the numbers (asked, free, total) where memory
ran short: unless the candidate's process grew past what the plan leaves it,
which makes it the kernel's ("rejected"). A "harness_error" the candidate
process reports (its harness could not allocate) is believed only when the
judge, measuring while that process still holds its memory, finds memory short
(blame_said). Every string that came from the candidate process is capped
before it reaches the result.

NOTE: this module must never import verifier.candidate (tests/verifier/test_judge.py checks it): the
separation is what makes the verdict independent of what the candidate does in its own process.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import re
import secrets
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

from verifier.records import Task, Timing, VerifyConfig, VerifyResult, TIMING_METHODS
from verifier.sandbox import KEPT_BYTES, Sandbox, SandboxResult, describe_exit
from verifier.sandbox import _memory_cap_bytes as _sandbox_memory_cap
from verifier.wire import HARNESS_STATUS, LAST_WORDS, PRESTART_PHASE, REPLAY_REP, JudgeEnd, PeerGone, ProtocolError

CANDIDATE_ARGV = [sys.executable, "-c", "from verifier.candidate import main; main()"]
REASON_CHARS = 300      # a reason line from the candidate process, at most
FEEDBACK_CHARS = 2000   # feedback from it, at most
FLAG_CHARS = 300
MAX_FLAGS_FROM_CANDIDATE = 10
PINGS = 5               # round trips measured before a block; the fastest is subtracted
SHARED_GPU_TIMINGS = 3  # timings of a candidate whose stream check failed while other processes shared the GPU
# The most a GPU shared with n other processes is taken to stretch a call's time: SHARED_GPU_STRETCH x (n + 1), time
# slicing giving each process its share, twice over for bursts. A gap wider than that is the candidate's however
# many processes share the GPU: claiming a tenth of the time with two others there is rejected, not excused.
SHARED_GPU_STRETCH = 2.0
SPIKE_REDUCES_BY = 64   # a task whose inputs hold this many times its outputs' elements gets the spiked trial
GRACE_S = 10.0          # past the sandbox's own limit, the judge stops waiting for a reply
# What may grow beside a verification without being hoarded by the candidate: a pre-started next candidate process's
# CUDA context (about 0.5 GiB on an H200), cuBLAS workspaces and lazily loaded modules, on a CPU the libraries a
# first call imports; the larger of the two below. And the candidate's share of the plan, times SHARE_SLACK: its
# kernels' workspace is only estimated (as much as the reference's transients).
CONTEXT_SLACK_BYTES = 768 << 20
CONTEXT_SLACK_SHARE = 0.1   # of the budget
SHARE_SLACK = 1.25
SMALL_SHAPES_FLAG = ("checked on the CPU under the Triton interpreter, on the task's small inputs "
                     "(get_small_inputs()) only: its real shapes were not run, a path it takes only on a GPU "
                     "was not run either, and nothing was timed")


EXCHANGE_DIR_ENV = "KGEN_EXCHANGE_DIR"   # where exchange directories go, when set (else exchange_root() decides)
SHM_DIR = "/dev/shm"
SHM_MIN_FREE_BYTES = 8 << 30             # a tmpfs with less room is not used: the disk's temporary directory is


def exchange_root() -> str:
    """Where the exchange directories go: $KGEN_EXCHANGE_DIR when set; else /dev/shm where it is a tmpfs kgen can
    write with SHM_MIN_FREE_BYTES free (a tensor file then crosses memory, not a disk's page cache and its
    write-back: about a second a 512 MiB output on the H200's disk); else the temporary directory.

    The memory plan sees the free space of the one chosen (verifier.memory_plan: fewer timed outputs kept)."""
    chosen = os.environ.get(EXCHANGE_DIR_ENV)
    if chosen:
        problem = exchange_dir_problem()
        if problem:
            raise ValueError(problem)
        return chosen
    try:
        if (_is_tmpfs(SHM_DIR) and os.access(SHM_DIR, os.W_OK | os.X_OK)
                and shutil.disk_usage(SHM_DIR).free >= SHM_MIN_FREE_BYTES):
            return SHM_DIR
    except OSError:
        pass
    return tempfile.gettempdir()


def exchange_dir_problem() -> str | None:
    """What is wrong with $KGEN_EXCHANGE_DIR, if it is set and wrong (the CLI says it before anything runs)."""
    chosen = os.environ.get(EXCHANGE_DIR_ENV)
    if chosen and not (os.path.isdir(chosen) and os.access(chosen, os.W_OK | os.X_OK)):
        return f"{EXCHANGE_DIR_ENV}={chosen} is not a directory kgen can write (unset it to let kgen choose)"
    return None


def _is_tmpfs(path: str) -> bool:
    """Whether path lies on a tmpfs (its mount, the longest mount point above its real path)."""
    real, best, kind = os.path.realpath(path), "", ""
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                fields = line.split()
                if len(fields) < 3:
                    continue
                point = fields[1].replace("\\040", " ")
                if (real == point or real.startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
                    best, kind = point, fields[2]
    except OSError:
        return False
    return kind == "tmpfs"


def cap(text, limit: int) -> str:
    """A string from the candidate process, at most limit characters."""
    text = text if type(text) is str else str(text)
    return text if len(text) <= limit else text[:limit - 3] + "..."


class CandidateProcess:
    """A sandboxed candidate process, started before its job, and the directory both sides exchange files in.

    The exchange directory holds the two pipes (verifier.wire) and the tensor files; the sandbox makes the
    process's own working directory inside it and leaves it writable. close() stops the process and removes
    both directories; so do garbage collection and the parent's exit (the sandbox's own finalizer).
    """

    def __init__(self, output_cap_bytes: int = VerifyConfig.output_cap_bytes, prestart: bool = True,
                 argv: list[str] | None = None):
        """prestart=False: the process waits for its job before it imports anything (its start-up is then
        part of the job's time, as when verify() is called without a worker). argv: another program that
        speaks verifier.wire in the candidate process's place (the judge trusts it no more)."""
        import weakref

        from verifier import cleanup

        root = exchange_root()
        cleanup.sweep_stale(root)   # the exchange directories of a killed kgen (SIGKILL runs no finalizer)
        self.exchange = Path(tempfile.mkdtemp(prefix=cleanup.owned_prefix("kgen-exchange"), dir=root))
        self.files_in_memory = _is_tmpfs(root)
        try:
            self.wire = JudgeEnd(str(self.exchange))
            self.sandbox = Sandbox(argv or CANDIDATE_ARGV, output_cap_bytes=output_cap_bytes, cwd=self.exchange,
                                   prestart=prestart, keep_files=(LAST_WORDS,))
        except BaseException:
            cleanup.remove_soon(self.exchange)
            raise
        self._closed = False
        # NOTE: garbage collection and the parent's exit close it too (the exchange directory is not the sandbox's
        # to remove); the finalizer holds the parts, not self
        self._finalize = weakref.finalize(self, _close_candidate_process, self.wire, self.sandbox, self.exchange)

    @property
    def pid(self) -> int:
        return self.sandbox.pid

    @property
    def alive(self) -> bool:
        """Started, still running, and not yet given a job."""
        return not self._closed and self.sandbox.alive

    def close(self) -> None:
        self._closed = True
        self._finalize()

    def __enter__(self) -> "CandidateProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _close_candidate_process(wire, sandbox, exchange: Path) -> None:
    """CandidateProcess.close: the process stopped first, then the directory it could write in removed."""
    from verifier import cleanup

    wire.close()
    sandbox.close()
    # NOTE: the candidate could write here too: removed as its own directory is (verifier.cleanup), the verdict
    # waiting for REMOVE_BUDGET_S of it at most
    cleanup.remove_soon(exchange)


# ----------------------------------------------------------------------------------------------
# how a verification ends, inside the judge


class _Said(Exception):
    """The candidate process reported a problem: believed, because it is negative."""

    def __init__(self, problem: dict, phases=None):
        super().__init__(problem["reason"])
        self.problem, self.phases = problem, phases


class _Decided(Exception):
    """The judge decided a status (mismatch, rejected) from what it checked itself."""

    def __init__(self, status: str, reason: str, feedback: str = ""):
        super().__init__(reason)
        self.status, self.reason, self.feedback = status, reason, feedback


class _HarnessFailure(Exception):
    """kgen's own failure: the task or the reference could not do their part."""


class _RandomReference(Exception):
    """The task's reference gives different outputs on the same inputs: no kernel can be checked against it."""


class _OutOfMemory(Exception):
    """An allocation of the judge's own failed (inputs, the reference, outputs read back): whose fault is decided
    from what the candidate's process holds (_Session.blame_memory)."""

    def __init__(self, what: str, exc: BaseException):
        super().__init__(f"{what}: {exc}")
        self.what, self.exc = what, exc


_MODULES: dict[tuple[str, str], object] = {}
_MODULES_LOCK = threading.Lock()
# NOTE: TF32 and the cuDNN flags are process-wide; the judge sets them around each reference call and
# each eager timing, and verifications in other threads of the caller must not interleave with that.
_FLAGS_LOCK = threading.RLock()


# The torch profiler (the launch counter's, verifier/launches.py) logs two lines per profiled call on stderr:
# noise to a person reading the candidate's own output, and to an LLM shown it.
_PROFILER_NOISE = re.compile(r"^USDT:[^\n]*SyncActivityProfilerHandler\.cpp:\d+\] profiler_(start|stop)\n?", re.M)


def without_profiler_noise(text: str) -> str:
    """The candidate process's stderr without the torch profiler's profiler_start / profiler_stop lines."""
    return _PROFILER_NOISE.sub("", text)


def task_module(task: Task, device: str = "cuda"):
    """The task file imported in the judge's process (once per file content, device and shapes).

    On the CPU it is imported as the CPU check runs it: with the small sizes verifier.shapes derived (the
    Task's small_overrides) and device-neutral (`.cuda()` in its functions lands on the CPU)."""
    from verifier.task import import_task_module

    path = str(task.path.resolve())
    overrides = task.small_overrides if device == "cpu" else None
    digest = hashlib.sha256((task.source + repr(sorted((overrides or {}).items()))).encode()).hexdigest()[:16]
    key = (path, digest, device)
    with _MODULES_LOCK:
        if key not in _MODULES:
            _MODULES[key] = import_task_module(Path(path), f"kgen_judge_task_{task.name}_{digest}",
                                               overrides=overrides, device="cpu" if device == "cpu" else None)
        return _MODULES[key]


@contextlib.contextmanager
def precision(tf32: bool):
    """TF32 off (the correctness reference) or torch's defaults (baselines), restored afterwards."""
    import torch

    with _FLAGS_LOCK:
        before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = tf32
        try:
            yield
        finally:
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def checksum_tolerance(ref, dtype, atol, rtol) -> float:
    """How far a right output's weighted checksum may lie from the reference's: the elementwise bound summed.

    |sum w (c - r)| <= sum |w| (atol + rtol |r|) = atol * N + rtol * sum |r| for ±1 weights (L1 norm N),
    plus float64 rounding of two sums of N terms; atol scaled as the elementwise test scales it."""
    import torch

    from verifier.correctness import atol_scales, tolerance

    a_tol, r_tol = tolerance(dtype, atol, rtol)
    scales = atol_scales(ref)   # per row: the elementwise bound's atol sums to atol x (sum of scales x row length)
    a_tol *= float(scales.sum()) / scales.numel()
    flat = ref.detach().reshape(-1)
    if flat.dtype == torch.bool:   # abs() has no bool kernel; the values are 0 and 1 either way
        flat = flat.to(torch.uint8)
    n = flat.numel()
    total = 0.0
    step = 1 << 22   # NOTE: in slices: a float64 copy of a multi-GB output would not fit beside it
    for start in range(0, n, step):
        total += float(flat[start:start + step].abs().sum(dtype=torch.float64))
    return a_tol * n + r_tol * total + 1e-12 * n * (total + 1.0)


class _Session:
    """One verification, from the hand-over to the verdict."""

    def __init__(self, task: Task, source: str, config: VerifyConfig, process: CandidateProcess,
                 device: str, backend: str, build_env: dict | None = None, libraries: list | None = None):
        self.task, self.source, self.config, self.process = task, source, config, process
        self.device, self.backend = device, backend
        self.offline_cuda = device == "cpu" and backend in ("cupy", "load_inline")   # compiled with nvcc, never run
        self.build_env = dict(build_env or {})
        self.libraries = list(libraries or [])
        self.flags: list[str] = []
        self.phases: dict[str, float] = {}
        self.candidate_phases: dict[str, float] = {}
        self.step = "starting"
        self.requests = 0
        self.seeded_inputs = True   # inputs travel as seeds until the candidate's making of them differs
        self.ran = False
        self.trials = 0
        self.reference_rerun = False   # whether a mismatch has had the reference run again (reference_is_random)
        self.sizes = (0, 0)        # floating-point input and output elements of the last checked call
        self.aten_ops: list[str] = []
        self.timing: Timing | None = None
        self.timing_repeat: Timing | None = None
        self.baselines: dict[str, Timing] = {}
        self.floor_ms: float | None = None
        self.judge_ms: float | None = None
        self.res: SandboxResult | None = None
        self.pending_block: tuple | None = None
        self.memory = None          # verifier.memory_plan.MemoryPlan: for trial 1 a first one, then the task's own
        self.memory_final = False   # the plan was made from the reference's measured outputs and transients
        self.budget = None          # verifier.memory_plan.Budget, measured once the candidate's ModelNew was built
        self.outside0: int | None = None   # what was held outside the judge then (bytes): the candidate's baseline
        self.said_allocator_bytes: int | None = None   # the candidate process's own account after its last call
        self.said_layouts: list | None = None   # its account of its last call's outputs' memory orders
        self.others = ""            # the other processes on the GPU as the timing started (note_others_on_gpu)
        self.others_count = 0
        self.ref_peak: int | None = None   # the reference's first call: what the allocator's peak rose by (GPU)
        self._thread: threading.Thread | None = None
        self.started = False
        self._last = time.perf_counter()
        from verifier.tensorfile import Staging

        self.staging = Staging()    # the host buffer every tensor file of this verification passes through

    # -- bookkeeping

    def mark(self, phase: str) -> None:
        now = time.perf_counter()
        self.phases[phase] = self.phases.get(phase, 0.0) + now - self._last
        self._last = now

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _path(self, name: str) -> str:
        return str(self.process.exchange / name)

    def _task_copy(self) -> str:
        """The task's source as a file in the exchange directory: the candidate process reads it there, where
        its unprivileged uid can (the task's own path may lie under a directory only kgen can enter)."""
        from verifier import tensorfile

        path = self._path("task.py")
        tensorfile.write_fresh(path, self.task.source.encode())
        return path

    # -- the candidate process

    def _lend_libraries(self) -> list[dict]:
        """A copy of each load_inline library built before this verification (verifier.inline_build), written
        fresh into the exchange directory, where the candidate process can read it: [{"name", "digest", "dir"}].
        A library that cannot be copied is left out (the candidate's load_inline then builds it, as before)."""
        from verifier.inline_build import lend_copies

        lent = lend_copies(self.libraries, self.process.exchange)
        missing = [lib["name"] for lib in self.libraries if lib["name"] not in {x["name"] for x in lent}]
        if missing:
            self.flags.append(f"load_inline: {', '.join(missing)[:200]} could not be lent: built in the candidate's "
                              f"process")
        return lent

    def start(self) -> None:
        wire = self.process.wire
        wire.open()
        job = {"task_path": self._task_copy(), "source": self.source, "device": self.device,
               "small_overrides": self.task.small_overrides if self.device == "cpu" else None,
               "backend": self.backend, "requests": wire.requests_path, "replies": wire.replies_path,
               "exchange": str(self.process.exchange), "build_env": self.build_env,
               "prebuilt": self._lend_libraries()}
        self.deadline = time.monotonic() + self.config.timeout_s + GRACE_S

        def run() -> None:
            self.res = self.process.sandbox.run(job, timeout_s=self.config.timeout_s)

        self._thread = threading.Thread(target=run, daemon=True, name="kgen-candidate-process")
        self._thread.start()
        self.started = True
        self.handed = time.perf_counter()

    def send(self, op: str, step: str, **fields) -> None:
        self.step = step
        self.process.wire.send({"op": op, **fields}, self.deadline)

    def receive(self, op: str) -> dict:
        reply = self.process.wire.receive(op, self.deadline, self.alive)
        problem = reply["problem"]
        if problem is not None:
            if problem["status"] == "not_run" and not (op == "build" and self.offline_cuda):
                # NOTE: "not run" is no verdict on the kernel, so it is a status to hide behind: believed only where
                # the judge knows nothing can run (a CUDA candidate on a machine without a GPU, compiled at build)
                raise ProtocolError(f"a 'not_run' problem in its {op!r} reply, where the judge runs the kernel")
            raise _Said(problem, reply.get("phases"))
        return reply

    def ask(self, op: str, step: str, **fields) -> dict:
        self.send(op, step, **fields)
        return self.receive(op)

    def finish(self) -> SandboxResult:
        """Close the judge's pipes (the process reads their end and exits) and wait for the sandbox's result."""
        self.process.wire.close()
        if self._thread is not None:
            self._thread.join(max(0.0, self.deadline - time.monotonic()) + GRACE_S)
        if self.res is None:   # the sandbox did not end in time: stop it; the verdict says it hung
            self.process.sandbox.close()
            if self._thread is not None:
                self._thread.join(GRACE_S)
        return self.res

    # -- the reference

    def build_reference(self) -> None:
        from verifier.inputs import build_seeded, input_fn

        try:
            self.mod = task_module(self.task, self.device)
            init = list(self.mod.get_init_inputs())
            self.init_seed = secrets.randbelow(2**31 - 1)
            self.ref = build_seeded(lambda: self.mod.Model(*init), self.init_seed, self.device).to(self.device)
        except Exception as exc:  # noqa: BLE001
            raise _HarnessFailure(f"the task's reference Model could not be built: {type(exc).__name__}: "
                                  f"{str(exc)[:200]}") from exc
        self.gen = input_fn(self.mod, self.device)
        self.ref_params = [(name, p.detach().clone()) for name, p in self.ref.named_parameters()]

    def reference_unchanged(self) -> None:
        """The reference's parameters are as built: nothing (of kgen's own) changed them between calls."""
        import torch

        current = dict(self.ref.named_parameters())
        for name, snap in self.ref_params:
            now = current.get(name)
            same = now is not None and now.shape == snap.shape and (
                torch.equal(now, snap) or bool(((now == snap) | (now.isnan() & snap.isnan())).all()))
            if not same:
                raise _HarnessFailure(f"the reference's parameter {name} changed between calls: the judge's "
                                      f"reference is not what it built, so no verdict can stand")

    def reference(self, xs, measure: bool = False):
        """The reference on xs, TF32 off; measure: on a GPU, what its call added to the allocator's peak (ref_peak)."""
        import torch

        from verifier.memory_plan import is_out_of_memory

        self.reference_unchanged()
        measure = measure and self.device == "cuda"
        try:
            if measure:
                torch.cuda.synchronize()
                before = torch.cuda.memory_allocated()
                torch.cuda.reset_peak_memory_stats()
            with precision(tf32=False), torch.no_grad():
                out = self.ref(*xs)
            if measure:
                self.ref_peak = torch.cuda.max_memory_allocated() - before
            return out
        except Exception as exc:  # noqa: BLE001
            if is_out_of_memory(exc):
                raise _OutOfMemory("running the reference", exc) from None
            raise _HarnessFailure(f"the reference Model raised {type(exc).__name__}: {str(exc)[:200]}") from exc

    def inputs(self, seed: int, device: str | None = None) -> list:
        from verifier.inputs import input_fn, make_inputs
        from verifier.memory_plan import is_out_of_memory

        gen = self.gen if device is None else input_fn(self.mod, device)
        try:
            return make_inputs(gen, seed, device or self.device)
        except Exception as exc:  # noqa: BLE001
            if is_out_of_memory(exc):
                raise _OutOfMemory("making the task's inputs", exc) from None
            raise _HarnessFailure(f"the task's input generator raised {type(exc).__name__}: {str(exc)[:200]}") \
                from exc

    # -- memory (verifier.memory_plan)

    def release(self) -> None:
        """Give the judge's cached device memory back: the candidate's process allocates on the same GPU."""
        if self.device == "cuda":
            import torch

            torch.cuda.empty_cache()

    def _param_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in list(self.ref.parameters()) + list(self.ref.buffers()))

    def _outside(self) -> int | None:
        """What is held outside the judge's own allocations now, in bytes: on a GPU the device's used memory less
        the judge's reserved (the candidate's process, contexts, anyone else); on a CPU the candidate's
        process tree's resident memory."""
        if self.device == "cuda":
            import torch

            try:
                free, total = torch.cuda.mem_get_info()
                return total - free - torch.cuda.memory_reserved()
            except Exception:  # noqa: BLE001
                return None
        return _tree_rss_bytes(self.process.pid)

    def measure_budget(self) -> None:
        """Once the candidate's ModelNew is built: the budget (free memory, or memory_budget_bytes) and the baseline of
        what the candidate's process holds, against which an out-of-memory is judged later."""
        from verifier.memory_plan import device_budget

        self.release()
        self.budget = device_budget(self.device, self.config.memory_budget_bytes, held_bytes=3 * self._param_bytes())
        self.outside0 = self._outside()

    def plan_memory(self, xs, ref_out=None) -> None:
        """The memory plan: before trial 1 from its input set alone (outputs and transients not known yet), then from
        the reference's outputs and (GPU) its measured transients. MemoryShort: harness_error with its numbers."""
        from verifier.memory_plan import MemoryShort, TaskMemory, disk_free_bytes, plan_memory, tensor_bytes

        timed = self.device == "cuda" and self.config.time_it
        if ref_out is None:
            memory, timed = TaskMemory(tensor_bytes(xs), 0, self._param_bytes(), 0, called=False), False
        else:
            memory = TaskMemory.of(xs, ref_out, self.ref, self.ref_peak)
        flush = spots = 0
        if timed:
            from verifier import timing

            import torch

            # what timing.l2_flush_buffer allocates (twice the L2), or KernelBench's own 256 MiB buffer
            l2 = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 0) or 64 << 20
            flush = 2 * l2 if self.config.timing != "kernelbench" else 256 << 20
            spots = timing.SPOT_CHECKS
        try:
            self.memory = plan_memory(memory, self.device, self.budget, timing=timed, flush_bytes=flush,
                                      spot_checks=spots, disk_free_bytes=disk_free_bytes(self.process.exchange),
                                      host_cap_bytes=_sandbox_memory_cap() or None,
                                      files_in_memory=self.process.files_in_memory)
        except MemoryShort as exc:
            raise _HarnessFailure(str(exc)) from None
        self.memory_final = ref_out is not None
        if self.memory_final and self.memory.note():
            self.flags.append(self.memory.note())

    def blame_memory(self, text: str) -> tuple[str, str]:
        """(status, reason) for memory that ran short (text: what, with the numbers): kgen's own failure, unless the
        candidate's process grew past what the plan leaves it since its ModelNew was built."""
        from verifier.memory_plan import gib

        now = self._outside()
        share = self.memory.candidate_share_bytes if self.memory is not None else None
        # NOTE: the process's own account is told, never used to decide: it can say anything
        said = (f" (its torch allocator held {gib(self.said_allocator_bytes)} after its last call, as it says)"
                if self.said_allocator_bytes is not None and self.device == "cuda" else "")
        if now is not None and self.outside0 is not None and share is not None:
            grown = now - self.outside0
            slack = max(CONTEXT_SLACK_BYTES, CONTEXT_SLACK_SHARE * self.memory.budget.bytes)
            if grown > share * SHARE_SLACK + slack:
                return "rejected", (f"the candidate's process took {gib(grown)} of memory beyond its ModelNew{said}, "
                                    f"more than the {gib(share)} the memory plan leaves it, and then {text}")
        return "harness_error", f"kgen's own failure, not the kernel's: {text}{said}"

    def blame_said(self, problem: dict) -> tuple[str, str]:
        """The candidate's process said kgen's harness there ran out of memory: checked here, while it still holds
        what it had, before it is believed (it could say so itself)."""
        from verifier.memory_plan import MIN_HEADROOM_BYTES, gib, memory_numbers

        reason = cap(problem["reason"], REASON_CHARS)
        free, _ = memory_numbers(self.device)
        m = self.memory.memory if self.memory is not None else None
        largest = max(m.input_bytes, m.output_bytes) if m is not None else 0
        if free is not None and m is not None and free > largest * 1.05 + MIN_HEADROOM_BYTES:
            return "crashed", (f"its process said kgen's harness ran out of memory there ({reason}), but "
                               f"{gib(free)} is free, more than the {gib(largest)} its largest tensor needs: not "
                               f"believed")
        return self.blame_memory(f"in the candidate's process: {reason}")

    # -- moving tensors

    def write_inputs(self, xs) -> list:
        import torch

        from verifier import tensorfile

        self.requests += 1
        spec = []
        for j, x in enumerate(xs):
            if isinstance(x, torch.Tensor):
                path = self._path(f"in-{self.requests}-{j}.t")
                tensorfile.write(path, x, self.staging)
                spec.append({"tensor": path})
            elif x is None or type(x) in (bool, int, float, str):
                spec.append({"value": x})
            else:
                raise _HarnessFailure(f"input {j} of the task is a {type(x).__name__}: the judge sends tensors "
                                      f"and plain numbers only")
        return spec

    def read_outputs(self, items: list, sequence: bool, prefix: str, ref_out):
        """The candidate's outputs from its files, on the reference's device, shaped as it said."""
        import torch

        from verifier import tensorfile
        from verifier.correctness import flatten_outputs

        refs = [r for r in flatten_outputs(ref_out) if isinstance(r, torch.Tensor)]
        largest = max((r.numel() * r.element_size() for r in refs), default=0)
        limit = 4 * largest + (1 << 20)
        device = refs[0].device if refs else torch.device(self.device)
        outs = []
        for j, item in enumerate(items):
            if item != "tensor":
                outs.append(item["value"])
                continue
            path = f"{prefix}-{j}.t"
            try:
                t = tensorfile.read(path, max_bytes=limit, staging=self.staging, max_staged=largest)
                # NOTE: copy=True: on the CPU the view of the reused buffer would otherwise be the output itself
                outs.append(t.to(device, copy=True))
                del t
            except tensorfile.TensorTooLarge as exc:
                raise _Decided("mismatch", f"output {j}: {exc}") from None
            except tensorfile.TensorFileError as exc:
                raise ProtocolError(f"output {j}'s tensor file: {exc}") from None
            except (MemoryError, RuntimeError) as exc:
                from verifier.memory_plan import is_out_of_memory

                if is_out_of_memory(exc):
                    raise _OutOfMemory("reading the candidate's outputs back", exc) from None
                raise
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(path)
        if sequence:
            return outs
        return outs[0] if len(outs) == 1 else outs

    def _cleanup_inputs(self) -> None:
        for entry in os.scandir(self.process.exchange):
            if entry.name.startswith(("in-", "param-")) and entry.name.endswith(".t"):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)

    # -- requests

    def build(self) -> None:
        from verifier import tensorfile

        params = []
        for i, (name, t) in enumerate(self.ref.state_dict().items()):
            path = self._path(f"param-{i}.t")
            tensorfile.write(path, t, self.staging)
            params.append([name, path])
        reply = self.ask("build", "being built", init_seed=self.init_seed, params=params)
        self._cleanup_inputs()
        self._take_start_phases(reply["phases"])
        self.measure_budget()

    def _take_start_phases(self, pairs) -> None:
        """The candidate process's own start-up stages, trimmed to the interval the judge saw them take."""
        span = time.perf_counter() - self.handed
        pairs = [(cap(name, 100), max(0.0, float(secs))) for name, secs in (pairs or [])]
        prestart = [(n, s) for n, s in pairs if n == PRESTART_PHASE]
        rest = [(n, s) for n, s in pairs if n != PRESTART_PHASE]
        total = sum(s for _, s in rest)
        scale = min(1.0, span / total) if total > 0 else 1.0
        for name, secs in prestart[:1]:
            self.candidate_phases[name] = min(secs, 3600.0)
        for name, secs in rest[:8]:
            self.candidate_phases[name] = secs * scale
        self._last = time.perf_counter()

    def forward(self, xs, during: str, into: str = "fresh", seed: int | None = None):
        """One call of the candidate on xs: (its outputs, the reference's), after the candidate said no problem.

        The reference runs while the candidate computes, unless the memory plan says after its reply (and always
        for the first call, whose reference is measured for the plan).

        seed: the seed xs were made from (self.inputs). The candidate process then makes them itself from the
        seed, sent only now, instead of reading them from files: half the bytes of a call stop travelling.
        The checksums it reports of what it made are compared with the judge's own; where they differ (a
        task whose get_inputs() is not a function of torch's seed: torch.empty, Python's random), the call
        is made again with the inputs as files, and so is every later one."""
        if self.memory is None:
            self.plan_memory(xs)
        plan = self.memory
        seeded = seed is not None and self.seeded_inputs
        if seeded:
            self.requests += 1
            spec: list | dict = {"seed": seed}
        else:
            spec = self.write_inputs(xs)
        prefix = self._path(f"out-{self.requests}")
        # keep: only an untimed check refills the last trial's tensors (hidden_refill); timed, they would take memory
        timed = self.device == "cuda" and self.config.time_it
        self.send("forward", during, inputs=spec, into=into, out=prefix, during=during,
                  snapshot="host" if plan.snapshot_on_host else "device", keep=not timed)
        sequential = not (plan.overlap and self.memory_final)
        reply = self.receive("forward") if sequential else None
        ref_out = self.reference(xs, measure=not self.memory_final)
        if not self.memory_final:
            self.plan_memory(xs, ref_out)
        if reply is None:
            reply = self.receive("forward")
        self._cleanup_inputs()
        self.ran = True
        self.aten_ops = [cap(op, 100) for op in reply["aten_ops"][:50]]
        self.said_allocator_bytes = reply.get("allocator_bytes")
        self.said_layouts = reply.get("layouts")
        if seeded and not self.same_inputs(xs, seed, reply["input_checksums"]):
            self.seeded_inputs = False
            self.flags.append("inputs sent as files: the candidate process's own making of them from a seed "
                              "differed from the judge's (the task's get_inputs() is not a function of torch's seed)")
            for j, _ in enumerate(reply["outputs"]):
                with contextlib.suppress(OSError):
                    os.unlink(f"{prefix}-{j}.t")
            return self.forward(xs, during, into)
        return self.read_outputs(reply["outputs"], reply["sequence"], prefix, ref_out), ref_out

    def same_inputs(self, xs, seed: int, theirs: list) -> bool:
        """Whether the candidate process's checksums of the inputs it made from seed are those of xs."""
        import torch

        from verifier.inputs import input_checksums

        if len(theirs) != len(xs):
            return False
        mine = input_checksums(xs, seed, self.device)
        for x, m, t in zip(xs, mine, theirs):
            if not (math.isfinite(m) and math.isfinite(t)):   # a NaN or inf hides the rest: use files
                return False
            # the same code on the same device gives the same sum; the slack is for a reordered reduction
            scale = float(x.detach().abs().to(torch.float64).sum()) if isinstance(x, torch.Tensor) else 0.0
            if abs(t - m) > 1e-9 * (scale + 1.0):
                return False
        return True

    def check(self, xs, during: str, what: str, into: str = "fresh", seed: int | None = None,
              finite_only: bool = False) -> bool:
        """One call of the candidate on xs, compared with the reference's; a verdict raised where it is wrong.
        finite_only: where the reference's output is not all finite on these inputs, nothing is decided (False)."""
        import torch

        from verifier.correctness import flatten_outputs

        cand, ref = self.forward(xs, during, into, seed)
        flat = flatten_outputs(ref)
        refs = [r for r in flat if type(r) is torch.Tensor]
        self.sizes = (sum(x.numel() for x in xs if isinstance(x, torch.Tensor) and x.is_floating_point()),
                      sum(r.numel() for r in refs))
        if finite_only and not all(bool(torch.isfinite(r).all()) for r in refs if r.is_floating_point()):
            del cand, ref, flat, refs
            self.release()
            return False
        del refs
        wrong = self.outputs_wrong(cand, ref, flat, self.said_layouts)
        del cand, flat
        self.release()
        # NOTE: only where the inputs are a function of their seed (seeded_inputs): made again, they are the same
        if wrong and wrong[0] == "mismatch" and seed is not None and self.seeded_inputs and not self.reference_rerun:
            self.reference_rerun = True
            self.reference_is_random(ref, seed)
        del ref
        if wrong:
            status, why, feedback = wrong
            raise _Decided(status, f"{what}: {why}", feedback)
        return True

    def reference_is_random(self, ref, seed: int) -> None:
        """Raised where the reference, run again on the same inputs (made again from their seed), gives another
        output: nn.Dropout in training mode, a random op. A mismatch against it says nothing about the kernel.
        Only on a mismatch, once: an honest run pays nothing; a reference too large to run twice keeps the verdict."""
        from verifier.correctness import compare_outputs

        try:
            again = self.reference(self.inputs(seed))
        except _OutOfMemory:
            return
        differs = compare_outputs(again, ref, self.task.atol, self.task.rtol)
        del again
        self.release()
        if differs:
            raise _RandomReference(
                f"the task's reference is random: run twice on the same inputs it gave different outputs "
                f"({cap(differs.reason, 160)}), so no kernel can match it. A random op in forward (nn.Dropout or "
                f"F.dropout in training mode, torch.rand*): build the model in eval mode (self.eval() in "
                f"Model.__init__) or take the randomness out of the task")

    def outputs_wrong(self, cand, ref, flat_ref: list, layouts) -> tuple[str, str, str] | None:
        """(status, why, feedback) where the candidate's outputs differ from the reference's ("mismatch") or lie
        in memory against the layout rule ("rejected"), else None. The one verdict on outputs: every call the
        judge checks (a trial, a spot check, a replay) goes through it."""
        from verifier.correctness import compare_outputs, layout_problem

        problem = compare_outputs(cand, ref, self.task.atol, self.task.rtol)
        if problem:
            return "mismatch", problem.reason, problem.feedback
        laid_out = layout_problem(cand, flat_ref, layouts)
        return ("rejected", laid_out, "") if laid_out else None

    # -- the stages

    def correctness(self) -> None:
        seed = self.config.seed
        for trial in range(self.config.trials):
            xs = self.inputs(seed + trial)
            self.check(xs, "ModelNew.forward", f"trial {trial + 1} (seed {seed + trial})", seed=seed + trial)
            del xs   # before the next set is made: one set at a time
            self.trials = trial + 1
        self.mark("correctness trials (first call compiles)")

    def spiked(self) -> None:
        """Where the task reduces (its floating-point inputs hold SPIKE_REDUCES_BY times its outputs' elements or
        more), one more trial on inputs with a few large values (verifier.inputs.spike_inputs), sent as files: a
        kernel that reads only part of its input estimates an i.i.d. input's reduction within the tolerance, never
        a spiked one's. Skipped where the reference's output is not finite on them (a spike out of the task's
        domain, such as a log of a negative value)."""
        from verifier.inputs import SPIKE_EVERY, spike_inputs

        inputs, outputs = self.sizes
        if outputs == 0 or inputs < SPIKE_REDUCES_BY * outputs:
            return
        seed = secrets.randbelow(2**31 - 1)
        xs = self.inputs(seed)
        if not spike_inputs(xs, seed):
            return
        checked = self.check(xs, "ModelNew.forward (spiked trial)",
                             f"on inputs with one element in {SPIKE_EVERY} set far from the rest (the spiked trial: "
                             f"every input element must count)", finite_only=True)
        del xs
        if not checked:
            self.flags.append("spiked trial skipped: the reference's output is not finite on spiked inputs")
        self.mark("spiked trial")

    def hidden_refill(self) -> None:
        """The last trial's input tensors refilled in place from a hidden seed, and one more call.

        Same tensors, same pointers, same id()s in the candidate process: a result cached by pointer, id,
        shape or call count is now stale, and inputs from a seed nobody knew defeat precomputed outputs."""
        hidden = secrets.randbelow(2**31 - 1)
        xs = self.inputs(hidden)
        self.check(xs, "ModelNew.forward (hidden re-check)",
                   "hidden re-check (the same input tensors refilled from a hidden seed)",
                   into="last" if self.trials else "fresh", seed=hidden)
        self.mark("hidden re-check")

    def time_on_gpu(self) -> None:
        from verifier import timing

        config = self.config
        self.timing_seed = secrets.randbelow(2**31 - 1)
        self.note_others_on_gpu()
        t_cand = self.timed("candidate")
        self.mark("time candidate")

        after = secrets.randbelow(2**31 - 1)
        xs = self.inputs(after)
        self.check(xs, "ModelNew.forward (after timing)",
                   f"after {t_cand.reps + config.warmup} timed calls the output is wrong", into="timing", seed=after)
        del xs
        # the memory plan may have the hidden re-checks refill the timing buffers rather than arrive beside them
        hidden_into = "timing" if self.memory.refill_hidden else "fresh"
        for h in range(config.hidden_trials):
            hidden = secrets.randbelow(2**31 - 1)
            xs = self.inputs(hidden)
            self.check(xs, f"ModelNew.forward (hidden re-check {h + 1})", f"hidden re-check {h + 1}", into=hidden_into,
                       seed=hidden)
            del xs
        self.mark("re-checks after timing")
        escaped = timing.escaped_stream(t_cand)
        timings = 1
        while escaped and self.others and timings < SHARED_GPU_TIMINGS:
            # another process's work on the GPU lengthens a synchronised call, never an honest kernel's events:
            # time again (a cheat's escaped work is there every time; a burst of someone else's is not)
            timings += 1
            self.note_others_on_gpu()
            t_cand = self.timed(f"candidate, timed again (timing {timings}: the GPU was shared)")
            self.mark(f"time candidate again (the GPU shared, timing {timings})")
            escaped = timing.escaped_stream(t_cand)
        if escaped:
            self.blame_time(escaped + (f", on each of {timings} timings" if timings > 1 else ""), t_cand.median_ms,
                            t_cand.sync_ms)
        self.timing = t_cand
        if config.repeat_timing:
            self.timing_repeat = self.timed("candidate, timed again")
            self.mark("time candidate again")
        self.block(t_cand)
        self.mark("timing block (the judge's clock)")

    def note_others_on_gpu(self) -> None:
        """Flag the other processes on this GPU as the timing starts (nvidia-smi; nothing where it cannot tell).

        NOTE: kgen's own process tree (the candidate's sandbox, a pre-started next worker) is not "other"; a
        process the candidate started is in that tree, so a candidate cannot pass its own work off as another's."""
        import torch

        from verifier.devices import gpu_uuid, other_gpu_processes

        mine = set(_process_tree(os.getpid()) or {os.getpid(): 0})
        found = other_gpu_processes(gpu_uuid(torch.cuda.current_device()), mine)
        self.others, self.others_count = "", len(found)
        if not found:
            return
        listed = ", ".join(f"pid {pid} ({mib} MiB)" for pid, mib in found[:5])
        more = f" and {len(found) - 5} more" if len(found) > 5 else ""
        self.others = (f"{len(found)} other process(es) on this GPU as it was timed: {listed}{more}; kgen's timing "
                       f"checks assume a GPU of its own")
        if self.others not in self.flags:
            self.flags.append(self.others)

    def blame_time(self, reason: str, claimed_ms: float, measured_ms: float) -> None:
        """A time check failed: the kernel's fault on a GPU of its own ("rejected"); where other processes shared
        the GPU as it was timed, their work may be what the check saw, so the verdict is kgen's ("harness_error":
        neither a pass nor a kernel called wrong), unless the measured time exceeds the claim by more than sharing
        can explain (SHARED_GPU_STRETCH). A candidate cannot bring this on itself: a process it starts is in kgen's
        own process tree, never "other" (note_others_on_gpu)."""
        if self.others:
            stretch = SHARED_GPU_STRETCH * (self.others_count + 1)
            if measured_ms > stretch * claimed_ms:
                raise _Decided("rejected", f"{reason}; {measured_ms / max(claimed_ms, 1e-9):.0f}x the claimed time, "
                                           f"more than the {stretch:g}x that {self.others_count} other process(es) "
                                           f"sharing the GPU can explain")
            raise _Decided("harness_error", f"kgen's own failure, not the kernel's: the GPU was shared as it was timed "
                                            f"({self.others}), and {reason}; verify it on a GPU no other process uses")
        raise _Decided("rejected", reason)

    def timed(self, who: str) -> Timing:
        """The candidate process's own timing loop, its spot checks and graph replay checked here."""
        from verifier.correctness import flatten_outputs
        from verifier.inputs import refresh_seed

        config = self.config
        prefix = self._path(f"timed-{self.requests}")
        self.requests += 1
        spot_checks = self.memory.spot_checks
        reply = self.ask("time", "being timed", seed=self.timing_seed, reps=config.reps, warmup=config.warmup,
                         method=config.timing, out=prefix, spot_checks=spot_checks)
        t = Timing(**reply["timing"])
        if t.method not in TIMING_METHODS or t.reps != config.reps:
            raise ProtocolError(f"a timing of {t.reps} reps by {cap(t.method, 20)!r}; {config.reps} by "
                                f"{config.timing!r} were asked for")
        if reply["note"]:
            self.flags.append(cap(f"{who}: {reply['note']}", FLAG_CHARS))
        spots = [c for c in reply["checked"] if c["rep"] != REPLAY_REP]
        replays = [c for c in reply["checked"] if c["rep"] == REPLAY_REP]
        if len(spots) != min(spot_checks, config.reps) or len(replays) != (t.method == "graph"):
            raise ProtocolError(f"{len(spots)} spot-checked and {len(replays)} replayed calls reported")
        for i, c in enumerate(reply["checked"]):
            if c["rep"] != REPLAY_REP and not -config.warmup <= c["rep"] < config.reps:
                raise ProtocolError(f"a spot check of call {c['rep']}, which was not timed")
            xs = self.inputs(refresh_seed(self.timing_seed, c["rep"]), "cuda")
            ref = self.reference(xs)
            cand = self.read_outputs(c["outputs"], c["sequence"], f"{prefix}-c{i}", ref)
            wrong = self.outputs_wrong(cand, ref, flatten_outputs(ref), c.get("layouts"))
            del xs, ref, cand
            self.release()
            if wrong:
                status, why, feedback = wrong
                what = ("replayed from its CUDA graph on fresh inputs, the output" if c["rep"] == REPLAY_REP
                        else "a timed call's output")
                what += " is wrong" if status == "mismatch" else ""
                raise _Decided(status, f"{what} (timed calls are checked at random): {why}", feedback)
        return t

    def block(self, t_cand: Timing) -> None:
        """K calls inside the judge's clock. Checked later (check_block), once the candidate process has ended:
        the judge's own work must not count against the process's time limit."""
        import torch

        from verifier import timing
        from verifier.inputs import block_seed

        trips = []
        for _ in range(PINGS):
            t0 = time.perf_counter()
            self.ask("ping", "answering a ping")
            trips.append((time.perf_counter() - t0) * 1e3)
        seed = secrets.randbelow(2**62)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        self.inputs(block_seed(seed, 0), "cuda")
        torch.cuda.synchronize()
        self.release()
        calls = timing.block_calls(t_cand.median_ms, generation_ms=(time.perf_counter() - t0) * 1e3)
        t0 = time.perf_counter()
        reply = self.ask("block", "being timed in a block", seed=seed, calls=calls)
        wall_ms = (time.perf_counter() - t0) * 1e3
        if len(reply["checksums"]) != calls:
            raise ProtocolError(f"{len(reply['checksums'])} checksums for a block of {calls} calls")
        self.pending_block = (t_cand, seed, calls, wall_ms, min(trips), reply["checksums"])

    def check_block(self) -> None:
        """The block's checksums against the reference's on the same inputs; the claim against its clock."""
        import torch

        from verifier import timing
        from verifier.correctness import flatten_outputs
        from verifier.inputs import block_seed

        t_cand, seed, calls, wall_ms, round_trip_ms, sums = self.pending_block
        weights = timing.checksum_weights(seed, "cuda")
        replay = t_cand.method == "graph"
        buffers = None
        gen_ms = sum_ms = 0.0
        for k in range(calls):
            torch.cuda.synchronize()
            a = time.perf_counter()
            xs = self.inputs(block_seed(seed, k), "cuda")
            if replay:   # the candidate's harness copies each set into the graph's input buffers: so does this
                if buffers is None:
                    buffers = [x.clone() if isinstance(x, torch.Tensor) else x for x in xs]
                for b, x in zip(buffers, xs):
                    if isinstance(b, torch.Tensor):
                        b.copy_(x)
            torch.cuda.synchronize()
            b_ = time.perf_counter()
            refs = flatten_outputs(self.reference(xs))
            torch.cuda.synchronize()
            c = time.perf_counter()
            mine = [float(timing.weighted_checksum(r, weights)) if isinstance(r, torch.Tensor) else math.nan
                    for r in refs]
            d = time.perf_counter()
            gen_ms += (b_ - a) * 1e3
            sum_ms += (d - c) * 1e3
            if len(sums[k]) != len(refs):
                raise _Decided("mismatch", f"timed in a block, call {k + 1} returned {len(sums[k])} output(s), the "
                                           f"reference returns {len(refs)}")
            for j, (theirs, ours, r) in enumerate(zip(sums[k], mine, refs)):
                if not isinstance(r, torch.Tensor):   # a plain value: checked in the correctness trials
                    continue
                allowed = checksum_tolerance(r, r.dtype, self.task.atol, self.task.rtol)
                if not abs(float(theirs) - ours) <= allowed:
                    raise _Decided("mismatch", f"timed in a block of {calls} calls on fresh inputs, call {k + 1}'s "
                                               f"output {j} is wrong: weighted checksum {float(theirs):.6g}, the "
                                               f"reference's {ours:.6g} (at most {allowed:.3g} apart)")
        measure = timing.BlockMeasure(calls=calls, wall_ms=wall_ms, generation_ms=gen_ms, checksum_ms=sum_ms,
                                      round_trip_ms=round_trip_ms)
        self.judge_ms = timing.block_per_call_ms(measure)
        self.flags.append(f"the judge's clock: {self.judge_ms:.4f} ms per call over a block of {calls} calls "
                          f"(claimed median {t_cand.median_ms:.4f} ms, {t_cand.method})")
        reason = timing.block_inconsistency(t_cand.median_ms, measure)
        self.mark("the block checked (in the judge, the candidate process closed)")
        if reason:
            self.blame_time(reason, t_cand.median_ms, self.judge_ms)

    def last_word(self) -> None:
        reply = self.ask("exit", "being verified")
        del reply

    def eager_and_floor(self) -> None:
        """Eager timed here, the candidate process closed; then the roofline floor for the claimed median."""
        import torch

        from verifier import timing
        from verifier.inputs import refresh_seed

        config = self.config
        buffers = self.inputs(refresh_seed(self.timing_seed, -100), "cuda")

        def refresh(rep: int) -> None:
            fresh = self.inputs(refresh_seed(self.timing_seed, rep), "cuda")
            for b, f in zip(buffers, fresh):
                if isinstance(b, torch.Tensor):
                    b.copy_(f)

        self.reference_unchanged()
        with precision(tf32=True), torch.no_grad():
            t, _, note = timing.time_call(lambda: self.ref(*buffers), refresh, method=config.timing, reps=config.reps,
                                          warmup=config.warmup, flush=timing.l2_flush_buffer())
        if note:
            self.flags.append(f"eager: {note}")
        self.baselines["eager"] = t
        self.mark("time eager (in the judge, the candidate process closed)")
        self.floor(buffers)
        self.mark("roofline check")

    def warm_up_floor(self) -> None:
        """The roofline check's one-time import, while the candidate process may still be starting (it would
        otherwise wait after the timing); the first verification of a kgen process pays it, the rest find it done."""
        try:
            from verifier import physics
        except ImportError:
            return
        # NOTE: no phase of its own: it lies inside the hand-over, beside the candidate process's start-up stages
        physics.warm_up()

    def floor(self, buffers) -> None:
        import torch

        try:
            from verifier import physics
        except ImportError:
            return
        name = torch.cuda.get_device_name()
        try:
            peaks = physics.peaks_for(name, self.config.peaks_override)
        except ValueError as exc:  # a malformed peaks override (physics.PeaksError)
            self.flags.append(f"physics check skipped: {exc}")
            return
        if peaks is None:
            self.flags.append(physics.peaks_note(name, self.config.peaks_override))
            return
        with torch.no_grad():
            work = physics.count_work(self.ref, buffers)
        self.floor_ms = physics.floor_ms(work, peaks)
        reason = physics.impossible(self.timing.median_ms, work, peaks)
        if reason:
            raise _Decided("rejected", reason)


def judge(task: Task, source: str, config: VerifyConfig, process: CandidateProcess, *, device: str,
          backend: str, build_env: dict | None = None,
          libraries: list | None = None) -> tuple[VerifyResult, dict[str, float]]:
    """Verify source in process (started, not yet given a job); (the verdict, where its time went).

    The verdict's phases are left to the caller, who knows its own stages; the second value holds the
    candidate process's start-up stages, then the judge's own, in order. build_env: the variables the
    candidate process sets before it imports the candidate (verifier.inline_build's prebuilt extensions);
    libraries: those extensions as library files, lent to its load_inline (verifier.inline_build.lends_library)."""
    s = _Session(task, source, config, process, device, backend, build_env, libraries)
    base = dict(task=task.name, backend=backend)
    status, reason, feedback = "ok", "correct on every trial", ""
    try:
        s.start()
        s.build_reference()
        if device == "cuda" and config.time_it:
            s.warm_up_floor()
        s.build()
        s.correctness()
        if s.trials:
            s.spiked()
        if device == "cuda" and config.time_it:
            s.time_on_gpu()
        elif config.trials > 0:
            s.hidden_refill()
        s.last_word()
    except _Said as said:
        p = said.problem
        status, reason, feedback = p["status"], cap(p["reason"], REASON_CHARS), cap(p["feedback"], FEEDBACK_CHARS)
        if status == HARNESS_STATUS:   # not believed as it stands: the judge measures (the process still waits)
            status, reason = s.blame_said(p)
        if said.phases and not s.candidate_phases:
            s._take_start_phases(said.phases)
    except _OutOfMemory as exc:
        from verifier.memory_plan import oom_text

        status, reason = s.blame_memory(oom_text(exc.exc, device, exc.what))
    except _Decided as d:
        status, reason, feedback = d.status, d.reason, d.feedback
    except ProtocolError as exc:
        status, reason = "crashed", f"the candidate's process spoke an unknown protocol: {cap(str(exc), 200)}"
    except PeerGone:
        status, reason = "", ""   # decided below, from how the process ended
    except _HarnessFailure as exc:
        status, reason = "harness_error", f"kgen's own failure, not the kernel's: {exc}"
    except _RandomReference as exc:
        status, reason = "harness_error", f"the task's fault, not the kernel's: {exc}"
    except Exception as exc:  # noqa: BLE001 - the judge's own bug or an OOM here: never the kernel's fault
        import traceback

        from verifier.memory_plan import is_out_of_memory, oom_text

        status = "harness_error"
        reason = f"kgen's own failure, not the kernel's: the judge raised {type(exc).__name__}: {str(exc)[:200]}"
        if is_out_of_memory(exc):
            status, reason = s.blame_memory(oom_text(exc, device, f"the judge was {s.step}"))
        feedback = traceback.format_exc()[-FEEDBACK_CHARS:]
    res = s.finish()
    s._last = time.perf_counter()   # the process's exit is the sandbox's part of the time, not a stage's
    if res is None and s.started:
        status, reason = "timeout", f"ran past the {config.timeout_s:.0f} s limit; its process group was killed"
    elif res is None:
        pass   # the judge failed before the process got its job: the failure above is the verdict
    elif res.timed_out:
        status, reason = "timeout", f"ran past the {config.timeout_s:.0f} s limit; its process group was killed"
        feedback = _tail(res.stderr)
    elif res.limit:
        status = "crashed"
        reason = f"the candidate's process {describe_exit(res.returncode)} without a verdict ({res.limit}; the " \
                 f"sandbox killed it)"
        feedback = _tail(res.stderr)
    elif not status:
        status = "crashed"
        site, words = crash_site(res.kept.get(LAST_WORDS, "")) if (res.returncode or 0) < 0 else ("", "")
        reason = f"the candidate's process {describe_exit(res.returncode)} without a verdict (while {s.step}{site})"
        feedback = _tail(res.stderr)
        if words:   # the stack first: the stderr's tail is what is cut to fit
            head = f"--- its last words (Python's stack when it died):\n{words[:FEEDBACK_CHARS // 2]}\n--- its stderr:\n"
            feedback = head + _tail(res.stderr, FEEDBACK_CHARS - len(head))

    if status == "ok" and device == "cuda" and config.time_it:
        try:
            s.check_block()
            s.eager_and_floor()
        except _Decided as d:
            status, reason, feedback = d.status, d.reason, d.feedback
        except _HarnessFailure as exc:
            status, reason = "harness_error", f"kgen's own failure, not the kernel's: {exc}"
        except Exception as exc:  # noqa: BLE001 - the candidate's process has ended: nothing here is its doing
            from verifier.memory_plan import is_out_of_memory, oom_text

            exc = exc.exc if isinstance(exc, _OutOfMemory) else exc
            reason = (oom_text(exc, device, "checking the block and timing eager (the candidate's process closed)")
                      if is_out_of_memory(exc) else f"timing eager raised {type(exc).__name__}: {str(exc)[:200]}")
            status, reason = "harness_error", f"kgen's own failure, not the kernel's: {reason}"
    result = VerifyResult(status=status, reason=cap(reason, 1000), feedback=cap(feedback, 4000), **base,
                          ran=s.ran, trials=s.trials, aten_ops=s.aten_ops, flags=s.flags, floor_ms=s.floor_ms,
                          judge_ms_per_call=s.judge_ms)
    if res is not None:
        result.isolation = list(res.isolation)
        result.isolation_complete = bool(res.isolation_complete)
        result.isolation_missing = list(res.isolation_missing)
        result.stdout, result.stderr = res.stdout, without_profiler_noise(res.stderr)
        if res.stdout_dropped or res.stderr_dropped:
            result.flags.append(f"output capped: {res.stdout_dropped + res.stderr_dropped} bytes dropped")
    if status == "ok" and s.timing is not None:
        result.timing, result.timing_repeat, result.baselines = s.timing, s.timing_repeat, dict(s.baselines)
    stages = {**s.candidate_phases, **s.phases}
    s.staging.release()
    if device == "cuda":
        import torch

        result.device = torch.cuda.get_device_name()
        # the session's reference, parameters and buffers go, and the cache they leave goes back to the device:
        # the next verification's baselines and candidate process allocate on the same GPU
        del s
        torch.cuda.empty_cache()
    return result, stages


_FRAME = re.compile(r'^\s*File "(?P<path>[^"\n]{1,1000})", line (?P<line>\d{1,9}) in (?P<func>[\w<>.]{1,200})\s*$')
# kgen's steps a fatal signal can interrupt, as its stack names them (verifier.timing, verifier.candidate)
CRASH_STEPS = {
    "capture": ("while its forward was captured in a CUDA graph (kgen's graph timing): work that a capture does not "
                "allow (a stream or cuBLAS handle created inside forward, work on a stream kgen does not time, a "
                "device synchronisation) can crash there; --timing events times a forward without a graph"),
    "replay_reproduces": "while its captured CUDA graph was replayed and compared with a plain call",
    "_timed": "in the timed calls",
    "time_kernelbench": "in the timed calls (KernelBench's protocol)",
    "run_candidate": "in a checked call of its forward",
    "block": "in the judge's timing block",
    "build": "while ModelNew was built",
    "_import_candidate": "while its file was imported",
}


def crash_site(words: str) -> tuple[str, str]:
    """(", <where it died>" for a reason, the stack as written) from the dead candidate process's last words
    (verifier.candidate._last_words, read back by its sandbox); ("", "") when there are none. The file is the
    candidate's to write: what it says is quoted as a hint in a "crashed" verdict, never believed for more."""
    if not words:
        return "", ""
    words = words[:KEPT_BYTES]
    frames = [m for m in (_FRAME.match(line) for line in words.splitlines()) if m]   # the most recent first
    if not frames:
        return "", words
    step = next((CRASH_STEPS[m["func"]] for m in frames if "/verifier/" in m["path"] and m["func"] in CRASH_STEPS),
                "")
    own = next((m for m in frames if "/verifier/" not in m["path"] and Path(m["path"]).name == "candidate.py"), None)
    site = (f", at line {own['line']} of the candidate's file, in {own['func'][:60]}" if own else "") + \
        (f"; {step}" if step else "")
    return cap(site, 600), words


def _tail(text: str, limit: int = FEEDBACK_CHARS) -> str:
    return text if len(text) <= limit else "...\n" + text[-limit:]


def _process_tree(pid: int) -> dict[int, int] | None:
    """{pid: resident bytes} of pid and every process below it (from /proc); None where /proc cannot tell."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return None
    for entry in entries:
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        # after the command's closing parenthesis: state, ppid, ... rss is the 22nd field from there (24th in all)
        p = int(entry)
        children.setdefault(int(fields[1]), []).append(p)
        rss[p] = int(fields[21]) * page
    if pid not in rss:
        return None
    tree, todo = {}, [pid]
    while todo:
        p = todo.pop()
        tree[p] = rss.get(p, 0)
        todo += children.get(p, [])
    return tree


def _tree_rss_bytes(pid: int) -> int | None:
    """Resident memory of pid and every process below it (from /proc), in bytes; None where /proc cannot tell."""
    tree = _process_tree(pid)
    return None if tree is None else sum(tree.values())
