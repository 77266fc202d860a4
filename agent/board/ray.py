"""The Ray executor: a board's loops on this machine, their GPU calls on the GPUs of a Ray cluster.

    kgen leaderboard tasks/suite-small.txt --executor ray                       # a one-node cluster, here
    kgen leaderboard SUITE --executor ray --ray-address auto --name nightly    # the cluster `ray start` made
    kgen leaderboard SUITE --executor ray --ray-address HEAD:6379 --loops-per-gpu 3 --accelerator-type H200

What runs where (docs/distributed.md says how to start a cluster):
- on this machine (the driver): every task's optimize loop (agent.graph), each
  in a thread of its own, with its proposer (and the API key), the store (one
  SQLite index), the checkpoints and the board's files. `--loops-per-gpu N`
  (default 2) loops per GPU are in flight, so a GPU verifies one task's
  candidate while another task's LLM thinks.
- on the cluster: one `GpuActor` per GPU (`num_gpus=1`), one call at a time,
  each the same sandboxed worker as a local board's: the analysis (baseline
  timing, verifier.verify.cached_baselines), verification (verifier.verify)
  and profiling (profiler). The unit of work is one such call: any free actor
  takes the next one (`ActorPool`). What comes back is the verifier's record
  (VerifyResult.to_dict) or the profiler's (Diagnosis.to_dict); the driver
  stores it.

Faults: an actor (or its node) lost during a verification makes that attempt
`crashed` ("the GPU actor on node X died: ...") and a new actor takes its
place; the loop goes on. Ctrl-C stops every loop at its next GPU call (its run
is stored as interrupted) and `--name` resumes the board as with the local
executor. A board never mixes GPU models: actors on different models are
refused unless `--accelerator-type` picks one (Ray's accelerator_type).

The key stays here: nothing of this process's environment goes to the cluster
(no runtime_env; a cluster started here starts without the secret names of
the environment), no call carries it, and each actor scrubs its own
environment of such names when it starts (`secret_names`).

Over 450 lines on purpose: it is one executor, the actor, the pool that places calls on actors and
replaces lost ones, and the collaborators a loop gets from them, which change together; apart, each
would be read only beside the others.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import hashlib
import itertools
import json
import os
import queue
import socket
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.board.executor import FINISHED, STARTED, JobEvent, QueuedExecutor
from agent.board.job import Job, JobOutcome, run_job
from agent.board.records import ERROR, INTERRUPTED, LeaderboardError
from agent.store import utc_now

LOOPS_PER_GPU = 2           # task loops in flight per GPU actor: one verifies while the other proposes
ACTOR_START_S = 180.0       # how long a new actor may take to be placed and to start
ACTOR_CLOSE_S = 10.0        # how long an actor's close() may take before it is killed all the same
ANALYSIS_TRIES = 3          # an analysis whose actor is lost is tried again on another; it is not an attempt
INSTALL = "pip install 'kgen[ray]'"
INSPECT = "inspect"         # GpuActor's concurrency group for describe(): it answers while a GPU call runs
NAMESPACE = "kgen"          # where the GPU actors are named ("kgen-gpu-..."): `ray list actors` shows them


def import_ray():
    """The ray module; a LeaderboardError saying how to install it when it is missing."""
    try:
        import ray
    except ImportError as exc:
        raise LeaderboardError(f"--executor ray needs Ray, which is not installed here ({exc}): {INSTALL}") from None
    return ray


def secret_names(env) -> list[str]:
    """The names of `env` a GPU actor must not hold: the sandbox's rule (OPENAI_*, and any name with KEY,
    TOKEN, SECRET, PASSWORD or CREDENTIAL in it)."""
    from verifier.sandbox import SECRET_NAME

    return sorted(n for n in env if SECRET_NAME.search(n))


@contextlib.contextmanager
def _without_secrets():
    """This process's environment without its secret names, for as long as the block runs (then restored)."""
    saved = {n: os.environ.pop(n) for n in secret_names(os.environ)}
    try:
        yield
    finally:
        os.environ.update(saved)


def connect(address: str | None = None, **init_options) -> bool:
    """Join the Ray cluster at `address` ("auto", HOST:PORT), or start one on this machine when None.

    Returns True when this call connected (the caller shuts Ray down after), False when this process
    was connected already. A cluster started here forks its daemons from this process; they start
    without the secret names of the environment, so no actor can inherit the key.
    """
    ray = import_ray()
    if ray.is_initialized():
        return False
    if address is not None and "RAY_AUTH_MODE" not in os.environ and _ray_token_here():
        # NOTE: `ray start` turns token authentication on and keeps the token in ~/.ray/auth_token; a driver
        # sends it only in token mode, which Ray switches on by itself only for a cluster it starts. The mode
        # is read into Ray's config when ray is imported: it is read again, as Ray does for its own cluster.
        os.environ["RAY_AUTH_MODE"] = "token"
        from ray._raylet import Config

        Config.initialize("")
    try:
        # a cluster started here forks its daemons now: they (and every actor) start without the secrets
        with _without_secrets() if address is None else contextlib.nullcontext():
            ray.init(address=address, log_to_driver=False, configure_logging=False, **init_options)
    except ConnectionError as exc:
        raise LeaderboardError(f"--ray-address {address}: no Ray cluster there ({exc}); start one with "
                               "`ray start --head` (docs/distributed.md)") from None
    return True


def _ray_token_here() -> bool:
    """A Ray authentication token this driver can send: RAY_AUTH_TOKEN(_PATH), or ~/.ray/auth_token."""
    return bool(os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH")
                or (Path.home() / ".ray" / "auth_token").exists())


# ---- the GPU actor -----------------------------------------------------------------------------------


class GpuActor:
    """One GPU of the cluster (Ray gives it `num_gpus=1` and sets CUDA_VISIBLE_DEVICES), one call at a time.

    Its methods are the GPU calls of a loop: `analyze`, `verify`, `profile`. Each takes the task as
    {"name", "source"} (written to a folder of this node, so that a node without the driver's files can
    run it) and returns plain records. `describe`, in a concurrency group of its own (INSPECT) so that it
    answers while a call runs, says where the actor is, what it is doing, and what it holds: its
    environment and every call's arguments, as text (what `kgen` sent it, for anyone to check that the
    key never came).
    """

    def __init__(self, driver_node: str):
        self.scrubbed = secret_names(os.environ)
        for name in self.scrubbed:
            del os.environ[name]
        import ray

        self.driver_node = driver_node
        self.node_id = ray.get_runtime_context().get_node_id()
        self._lock = threading.Lock()
        self.received: collections.deque[str] = collections.deque([f"__init__{(driver_node,)!r}"], maxlen=1000)
        self.busy = ""                  # the method running now, "" when idle
        self.calls = 0
        self._tasks: dict[str, Any] = {}
        self._folder = Path(tempfile.gettempdir()) / f"kgen-ray-{os.getuid()}"
        self._pool = None

    @contextlib.contextmanager
    def _serving(self, method: str, *args):
        with self._lock:
            self.received.append(f"{method}{args!r}")
            self.busy = method
            self.calls += 1
        try:
            yield
        finally:
            with self._lock:
                self.busy = ""

    def describe(self) -> dict[str, Any]:
        import ray

        with self._lock:
            received, busy, calls = list(self.received), self.busy, self.calls
        return {"host": socket.gethostname(), "node_ip": ray.util.get_node_ip_address(), "node_id": self.node_id,
                "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
                "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES", ""), "pid": os.getpid(),
                "busy": busy, "calls": calls, "env": dict(os.environ), "scrubbed": list(self.scrubbed),
                "received": received}

    def machine(self, requested: str) -> tuple[str, str]:
        """("cuda" or "cpu", the GPU's name) for --device auto|cpu|cuda, as this actor sees its GPU."""
        from agent.analysis import device_and_gpu

        with self._serving("machine", requested):
            try:
                return device_and_gpu(requested)
            except ValueError as exc:
                return "error", str(exc)

    def _task(self, payload: dict[str, str]):
        from verifier.task import load_task

        digest = hashlib.sha256(payload["source"].encode()).hexdigest()[:16]
        key = f"{digest}/{payload['name']}"
        if key not in self._tasks:
            path = self._folder / "tasks" / digest / f"{payload['name']}.py"
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
                tmp.write_text(payload["source"], encoding="utf-8")
                os.replace(tmp, path)
            self._tasks[key] = load_task(path)
        return self._tasks[key]

    def _config(self, config):
        """The config, with the baseline cache on this node: the driver's own where this is the driver's node,
        else this node's (the cache key holds the GPU's name and torch's version)."""
        if self.node_id == self.driver_node:
            return config
        peaks = config.peaks_override if config.peaks_override and Path(config.peaks_override).exists() else None
        return dataclasses.replace(config, cache_dir=self._folder / "baselines", peaks_override=peaks)

    def _drop_warm_worker(self) -> None:
        # NOTE: a pre-started worker creates a CUDA context as it starts; none may start beside a timing
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def close(self, timeout_s: float) -> bool:
        """Before the actor is killed (ray.kill is a SIGKILL: no finalizer runs): its warm candidate process
        stopped and the directories it leaves removed; whether the removal finished within timeout_s."""
        from verifier import cleanup

        self._drop_warm_worker()
        return cleanup.wait_for_cleaner(timeout_s)

    def analyze(self, task: dict[str, str], device: str, gpu: str, config, backend: str):
        """analyze_task's Analysis, computed on this actor's GPU."""
        from agent.analysis import analyze_task

        with self._serving("analyze", task, device, gpu, config, backend):
            self._drop_warm_worker()
            return analyze_task(self._task(task), device, gpu, self._config(config), backend)

    def verify(self, task: dict[str, str], source: str, config) -> dict[str, Any]:
        from verifier.verify import WorkerPool

        with self._serving("verify", task, source, config):
            if self._pool is None:
                self._pool = WorkerPool(config.output_cap_bytes, warm=False)
            return self._pool.verify(self._task(task), source, self._config(config)).to_dict()

    def profile(self, task: dict[str, str], source: str, timeout_s: float) -> dict[str, Any]:
        from profiler.profile import profile_candidate

        with self._serving("profile", task, source, timeout_s):
            diagnosis = profile_candidate(self._task(task), source, timeout_s=timeout_s)
            return diagnosis.to_dict() if diagnosis is not None else None


# ---- the pool: any free actor takes the next call ----------------------------------------------------


class ActorLost(Exception):
    """The actor running a call died (or its node did); `where` names it, `why` is Ray's first line."""

    def __init__(self, where: str, why: str):
        super().__init__(f"the GPU actor on {where} died: {why}")
        self.where, self.why = where, why


@dataclass
class Slot:
    """One live actor and what it said of itself."""

    actor: Any
    info: dict[str, Any]

    @property
    def label(self) -> str:
        """"host GPU 1": the node and the GPU (Ray's id on that node)."""
        gpus = ",".join(self.info.get("gpu_ids") or [])
        return f"{self.info.get('host') or self.info.get('node_ip')} " + (f"GPU {gpus}" if gpus else "CPU")


class ActorPool:
    """GPU actors, each running one call at a time; a call takes any free one and gives it back after.

    A lost actor is replaced (a new actor, wherever Ray places it); while none is free, a call waits, and
    gives up with KeyboardInterrupt as soon as `stop` is set (Ctrl-C on the board).
    """

    def __init__(self, count: int, *, gpu: bool, accelerator_type: str | None, stop: threading.Event,
                 num_cpus: float = 1.0):
        self.ray = import_ray()
        self.stop = stop
        self.gpu = gpu
        self.accelerator_type = accelerator_type
        self.num_cpus = num_cpus
        self.driver_node = self.ray.get_runtime_context().get_node_id()
        # NOTE: the default group runs one call at a time (one job per GPU); describe() has a group of its own
        self._remote = self.ray.remote(concurrency_groups={INSPECT: 1})(GpuActor)
        self._names = (f"kgen-gpu-{os.getpid()}-{id(self) & 0xffff:04x}-{n}" for n in itertools.count(1))
        self._free: queue.Queue[Slot] = queue.Queue()
        self._lock = threading.Lock()
        self.slots: list[Slot] = []
        self.model: str | None = None       # the GPU model every actor has ("" on the CPU), once checked
        self.requested = "auto"             # the --device the model was checked for
        starting = [self._new_actor() for _ in range(count)]
        try:
            infos = self.ray.get([_describe(a) for a in starting], timeout=ACTOR_START_S)
        except self.ray.exceptions.GetTimeoutError:
            for a in starting:
                self.ray.kill(a)
            raise LeaderboardError(f"{count} GPU actor(s) could not be placed within {ACTOR_START_S:.0f} s: "
                                   f"the cluster has {self.ray.cluster_resources()} and "
                                   f"{self.ray.available_resources()} free") from None
        for actor, info in zip(starting, infos):
            self._add(Slot(actor, info))

    def _new_actor(self):
        options: dict[str, Any] = {"num_gpus": 1 if self.gpu else 0, "num_cpus": self.num_cpus, "max_restarts": 0,
                                   "max_task_retries": 0, "name": next(self._names), "namespace": NAMESPACE}
        if self.accelerator_type:
            options["accelerator_type"] = self.accelerator_type
        # NOTE: no runtime_env: nothing of this process's environment travels with the actor
        return self._remote.options(**options).remote(self.driver_node)

    def _add(self, slot: Slot) -> None:
        with self._lock:
            self.slots.append(slot)
        self._free.put(slot)

    def labels(self) -> list[str]:
        with self._lock:
            return [s.label for s in self.slots]

    def check_models(self, requested: str) -> tuple[str, str]:
        """(device, GPU name) the actors run on for --device `requested`; LeaderboardError when they disagree
        (two GPU models on one board would make its speedups incomparable) or the device cannot be had."""
        with self._lock:
            slots = list(self.slots)
        seen = self.ray.get([s.actor.machine.remote(requested) for s in slots], timeout=ACTOR_START_S)
        for (device, detail), slot in zip(seen, slots):
            if device == "error":
                raise LeaderboardError(f"the GPU actor on {slot.label}: {detail}")
        models = sorted({tuple(m) for m in seen})
        if len(models) > 1:
            names = ", ".join(f"{gpu or device}" for device, gpu in models)
            raise LeaderboardError(f"the cluster's actors run on more than one device ({names}): one board times "
                                   "on one GPU model; pick one with --accelerator-type (Ray's accelerator type)")
        device, gpu = models[0]
        self.requested, self.model = requested, gpu
        return device, gpu

    def call(self, method: str, *args, used: list[str] | None = None) -> Any:
        """actor.method(*args) on the next free actor; raises ActorLost when it dies, KeyboardInterrupt on stop."""
        slot = self._acquire()
        if used is not None and slot.label not in used:
            used.append(slot.label)
        ray = self.ray
        try:
            ref = getattr(slot.actor, method).remote(*args)
            while not ray.wait([ref], timeout=0.2)[0]:
                if self.stop.is_set():
                    raise KeyboardInterrupt
            value = ray.get(ref)
        except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError,
                ray.exceptions.NodeDiedError) as exc:
            if self.stop.is_set():   # ended by the board's own close, not lost
                raise KeyboardInterrupt from None
            self._replace(slot)
            raise ActorLost(slot.label, _first_line(exc)) from None
        except BaseException:
            self._free.put(slot)
            raise
        self._free.put(slot)
        return value

    def _acquire(self) -> Slot:
        while True:
            if self.stop.is_set():
                raise KeyboardInterrupt
            try:
                return self._free.get(timeout=0.2)
            except queue.Empty:
                with self._lock:
                    if not self.slots:
                        raise RuntimeError("no GPU actor is left on the cluster (each lost one could not be "
                                           "replaced)") from None

    def _replace(self, lost: Slot) -> None:
        """A new actor in place of a lost one; the pool shrinks (a line on stderr says why) when none can start."""
        with self._lock:
            if lost in self.slots:
                self.slots.remove(lost)
        try:
            self.ray.kill(lost.actor)
        except Exception:   # noqa: BLE001 - it is gone already
            pass
        actor = self._new_actor()
        try:
            info = self.ray.get(_describe(actor), timeout=ACTOR_START_S)
            if self.model is not None:
                device, gpu = self.ray.get(actor.machine.remote(self.requested), timeout=ACTOR_START_S)
                if (gpu or "") != self.model:
                    raise LeaderboardError(f"its replacement runs on {gpu or device}, not {self.model}")
        except Exception as exc:   # noqa: BLE001 - the board goes on with the actors it has
            self.ray.kill(actor)
            print(f"kgen: the GPU actor on {lost.label} could not be replaced: {type(exc).__name__}: "
                  f"{_first_line(exc)}", file=sys.stderr, flush=True)
            return
        self._add(Slot(actor, info))

    def describe_all(self) -> list[dict[str, Any]]:
        """Every live actor's describe(): where it is, its environment, the arguments it got."""
        with self._lock:
            slots = list(self.slots)
        return self.ray.get([_describe(s.actor) for s in slots], timeout=ACTOR_START_S)

    def close(self) -> None:
        with self._lock:
            slots, self.slots = list(self.slots), []
        # each actor first stops its warm candidate process and removes what it leaves (beside a GPU call still
        # running, which the kill then ends): a SIGKILL alone left every actor's exchange directory behind
        closing = [s.actor.close.options(concurrency_group=INSPECT).remote(ACTOR_CLOSE_S) for s in slots]
        try:
            self.ray.get(closing, timeout=ACTOR_CLOSE_S + 5.0)
        except Exception:   # noqa: BLE001 - an actor lost or busy past the wait: the kill below ends it anyway
            pass
        for s in slots:
            try:
                self.ray.kill(s.actor)
            except Exception:   # noqa: BLE001 - gone already
                pass


def _describe(actor):
    return actor.describe.options(concurrency_group=INSPECT).remote()


def _first_line(exc: BaseException, limit: int = 300) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:limit]


# ---- a loop's GPU calls, routed to the pool -----------------------------------------------------------


class RoutedCalls:
    """optimize()'s collaborators for one job: its analysis, verification and profiling on the pool.

    `used` lists the actors that served the job, in order of first use: the row's "where".
    """

    def __init__(self, pool: ActorPool, machine: tuple[str, str], profile_timeout_s: float):
        self.pool = pool
        self.machine = machine
        self.profile_timeout_s = profile_timeout_s
        self.used: list[str] = []

    @staticmethod
    def _payload(task) -> dict[str, str]:
        return {"name": task.name, "source": task.source}

    def analyze(self, task, device: str, gpu: str, verify_config=None, backend: str = "triton"):
        """analyze_task on a free actor (the Analysis comes back pickled by Ray); retried on a lost actor."""
        for attempt in range(ANALYSIS_TRIES):
            try:
                return self.pool.call("analyze", self._payload(task), device, gpu, verify_config, backend,
                                      used=self.used)
            except ActorLost:
                if attempt == ANALYSIS_TRIES - 1:
                    raise
        raise AssertionError("unreachable")

    def verify(self, task, source: str, config):
        from verifier.records import VerifyResult
        from verifier.verify import detect_backend

        try:
            return VerifyResult.from_dict(self.pool.call("verify", self._payload(task), source, config,
                                                         used=self.used))
        except ActorLost as lost:
            return VerifyResult(status="crashed", reason=str(lost), task=task.name, backend=detect_backend(source),
                                feedback="the verification was lost with its actor; this says nothing of the "
                                         "kernel, which a later attempt may try again")

    def profile(self, task, source: str):
        from profiler.records import Diagnosis

        data = self.pool.call("profile", self._payload(task), source, self.profile_timeout_s, used=self.used)
        return Diagnosis.from_dict(data) if data is not None else None

    def for_optimize(self) -> dict[str, Any]:
        device = self.machine[0]
        return {"verify_fn": self.verify, "analyze_fn": self.analyze, "machine": self.machine,
                "profile_fn": self.profile if device == "cuda" else None}


class OneAtATime:
    """A proposer whose calls take one lock shared by every loop of this process.

    NOTE: for the heuristic proposer: it recognises a task with torch.export, whose tracing keeps global
    state and fails when two threads trace at once (a local board runs each task in its own process).
    Its work is a fraction of a second a round; an LLM proposer, whose calls are waits, is not wrapped.
    """

    _lock = threading.Lock()

    def __init__(self, inner):
        self.inner = inner
        self.name = getattr(inner, "name", type(inner).__name__)

    def propose(self, ctx):
        with self._lock:
            return self.inner.propose(ctx)

    def exhausted(self, ctx):
        with self._lock:
            return self.inner.exhausted(ctx)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


def _proposer_for(job: Job) -> dict[str, Any]:
    """{"proposer": ...} for an optimize job whose proposer must not run beside another (the heuristic)."""
    from agent.config import OptimizeConfig

    if job.kind != "optimize" or OptimizeConfig.from_dict(job.config).proposer_name() != "heuristic":
        return {}
    from agent.proposers.heuristic import HeuristicProposer

    return {"proposer": OneAtATime(HeuristicProposer(job.task_path))}


# ---- the executor -------------------------------------------------------------------------------------


class RayExecutor(QueuedExecutor):
    """Each job's loop in a driver thread (`loops` at once); its GPU calls on the pool's actors."""

    name = "ray"

    def __init__(self, *, address: str | None, device: str = "auto", workers: int | None = None,
                 loops_per_gpu: int = LOOPS_PER_GPU, accelerator_type: str | None = None,
                 init_options: dict[str, Any] | None = None):
        if loops_per_gpu < 1:
            raise LeaderboardError(f"--loops-per-gpu must be at least 1, got {loops_per_gpu}")
        if workers is not None and workers < 1:
            raise LeaderboardError(f"--workers must be at least 1, got {workers}")
        # a cluster started here for the board has no dashboard: nothing of it is served to the network
        default = {"include_dashboard": False} if address is None else {}
        self._owns_ray = connect(address, **(default if init_options is None else init_options))
        self.ray = import_ray()
        self._stop = threading.Event()
        try:
            gpus = _cluster_gpus(self.ray, accelerator_type)
            if accelerator_type and not gpus:
                types = sorted({k.split(":", 1)[1] for node in self.ray.nodes() if node.get("Alive")
                                for k in (node.get("Resources") or {}) if k.startswith("accelerator_type:")})
                raise LeaderboardError(f"--accelerator-type {accelerator_type}: no live node of the Ray cluster has "
                                       f"GPUs of that type (it has: {', '.join(types) or 'none'})")
            if device == "cuda" and not gpus:
                raise LeaderboardError("--device cuda: the Ray cluster has no GPU")
            # NOTE: where the cluster has GPUs each actor owns one, even for --device cpu (nothing is timed
            # then): the actors are the cluster's GPUs, whatever the verifier runs on
            use_gpus = gpus > 0
            count = workers or (int(gpus) if use_gpus else 1)
            if use_gpus and count > gpus:
                raise LeaderboardError(f"--workers {count}: each actor owns one GPU and the cluster has {gpus:g}")
            self.pool = ActorPool(count, gpu=use_gpus, accelerator_type=accelerator_type, stop=self._stop)
            self.machine = self.pool.check_models(device)
        except BaseException:
            self._shutdown()
            raise
        self.loops = loops_per_gpu * count
        self._init_queues()
        self._closed = False

    @property
    def slots(self) -> list[str]:
        return self.pool.labels()

    def _loops(self) -> list[tuple[str, tuple]]:
        return [(f"kgen-ray-loop-{i + 1}", (i,)) for i in range(self.loops)]

    def cancel(self) -> None:
        self._stop.set()
        self._drop_queued()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        deadline = time.monotonic() + 10.0   # a loop inside a proposer's call stops at its next GPU call
        for t in self._threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        self._shutdown()

    def _shutdown(self) -> None:
        pool = getattr(self, "pool", None)
        if pool is not None:
            pool.close()
        if self._owns_ray:
            self.ray.shutdown()
            self._owns_ray = False

    def describe_actors(self) -> list[dict[str, Any]]:
        return self.pool.describe_all()

    # -- one loop thread --

    def _work(self, index: int) -> None:
        while not self._stop.is_set():
            try:
                job = self._jobs.get(timeout=0.2)
            except queue.Empty:
                continue
            if self._stop.is_set():
                with self._lock:
                    self._outstanding -= 1
                return
            self._events.put(JobEvent(STARTED, job, f"the Ray cluster (loop {index + 1} of {self.loops})"))
            started = time.monotonic()
            calls = RoutedCalls(self.pool, self.machine, float(job.config.get("verify_timeout_s") or 300.0))
            outcome = self._run(job, calls)
            try:
                Path(job.result_path).write_text(json.dumps(outcome.to_dict()))
            except OSError:
                pass
            with self._lock:
                self._outstanding -= 1
            self._events.put(JobEvent(FINISHED, job, ", ".join(calls.used) or "-", outcome=outcome,
                                      ended="finished", wall_s=time.monotonic() - started))

    def _run(self, job: Job, calls: RoutedCalls) -> JobOutcome:
        log_path = Path(job.log_path)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "a", encoding="utf-8") as log:
            log.write(f"== {utc_now()} {job.kind} {job.task} on the Ray cluster"
                      + (f" (resuming {job.resume})" if job.resume else "") + "\n")
            log.flush()
            try:
                return run_job(job, log=log, **calls.for_optimize(), **_proposer_for(job))
            except KeyboardInterrupt:
                return JobOutcome(error=INTERRUPTED, message="interrupted before the run was stored")
            except Exception as exc:   # the task's row says what broke; the traceback goes to its log
                traceback.print_exc(file=log)
                return JobOutcome(error=ERROR, message=f"kgen failed: {type(exc).__name__}: {exc}")


def _cluster_gpus(ray, accelerator_type: str | None) -> float:
    """GPUs of the live nodes; with an accelerator type, of the nodes that have it."""
    total = 0.0
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        resources = node.get("Resources") or {}
        if accelerator_type and f"accelerator_type:{accelerator_type}" not in resources:
            continue
        total += resources.get("GPU", 0.0)
    return total
