"""The candidate process: the sandboxed side of verification, which runs the candidate's code.

    python -c "from verifier.candidate import main; main()"    # started by verifier.judge in a Sandbox

Nothing this process says makes a kernel pass. It imports the candidate,
builds ModelNew, and serves the judge's requests (verifier.wire) over two
named pipes; the judge (verifier.judge, in kgen's own process) generates every
input, runs the reference, compares, times blocks by its own clock and decides.
What this process does report and the judge believes are negative findings:
the first layer's readable reasons ("torch did the work", "mutated input 0").

Started ahead of its job (verifier.sandbox.Sandbox), it reads the sandbox's
key line, imports torch, triton and the verifier's modules and starts CUDA
where there is a GPU (the phase PRESTART_PHASE), then reads its job (task
path, source, device, backend, the pipes): only trusted code runs before the
job. Then:
1. reseeds torch from the OS's entropy (torch.initial_seed() tells nothing), snapshots what the harness
   relies on (verifier.integrity.Guard) and installs the run-time policy (an audit hook) before any
   candidate code is imported; imports the task (for get_init_inputs and the timing inputs' generator)
   and the candidate (on a CPU machine: Triton under the interpreter; CUDA sources compiled with nvcc,
   not run: "not_run"), under the build variables of a load_inline extension built before this process
   (the job's build_env, verifier.inline_build: its own load_inline finds the build up to date);
2. build: ModelNew under the judge's init seed; the reference's parameters arrive as tensor files and are
   copied, by plain storage copies, into the parameters and buffers this harness finds itself (walking
   `_parameters`, `_buffers`, `_modules` with object.__getattribute__, exact tensor types only): the
   candidate's state_dict(), copy_() and __torch_function__ are never called;
3. forward: the inputs the judge sent (into fresh tensors, or refilled into the last call's or the
   timing buffers, same pointers), one call under the first layer: nothing patched, nothing refused by
   the policy, no thread of its own left running, outputs plain tensors, no compute op through torch
   (dispatch mode and profiler), no tensor values read on the host, at least one kernel launched, every
   output written by its kernels, inputs unchanged, outputs not aliasing them; the outputs go back as
   tensor files;
4. time (GPU): the in-process loop (verifier.timing: graph replays or events, L2 flushed, fresh inputs
   from the judge's timing seed, which is no correctness seed); the spot-checked calls' outputs and a
   replay of the captured graph on fresh inputs go back as files, for the judge to check;
5. block (GPU): K input sets from the judge's block seed, one forward (or graph replay) each, a weighted
   float64 checksum of every output, all inside the judge's clock;
6. exit: the guard and the policy once more, and the phases; then the process ends (os._exit).

Every failure of the candidate becomes a problem in a reply; only a dead process does not, and the judge
reports that from the sandbox's result. A failure of this harness's own allocations (an input set, the
snapshot, a tensor file: out of memory, disk or file limit) is a "harness_error" problem instead, after which
the process keeps what it holds and waits for the judge to close: the judge measures before it believes it.
What the judge's memory plan asks for arrives in the requests: the inputs snapshot on the host, a fresh set
not kept, fewer spot checks; this process collects its garbage and frees its cached device memory after
every request.
"""

from __future__ import annotations

import gc
import json
import os
import secrets
import sys
import time
import traceback

from verifier.wire import HARNESS_STATUS, PRESTART_PHASE, REPLAY_REP  # noqa: F401 - PRESTART_PHASE: this module's API

REASON_CHARS = 300
FEEDBACK_CHARS = 2000


def main() -> None:
    hello = json.loads(sys.stdin.readline())
    if "job" not in hello:
        _warm_up()
        line = sys.stdin.readline()
        if not line:  # closed unused: nothing to verify, nobody to tell
            os._exit(0)
        hello.update(json.loads(line))
        _restart_clock()
    sys.stdin.close()
    # NOTE: the sandbox's signed result channel is not used: nothing this process could sign is believed.
    fd = os.environ.pop("KGEN_RESULT_FD", None)
    if fd is not None:
        try:
            os.close(int(fd))
        except (OSError, ValueError):
            pass
    job = hello["job"]
    del hello
    from verifier.wire import CandidateEnd

    try:
        wire = CandidateEnd(job["requests"], job["replies"])
    except OSError:
        os._exit(3)
    try:
        _serve(job, wire)
    except BaseException as exc:  # noqa: BLE001 - the judge must hear why, whatever happened
        try:
            wire.send({"reply": _CURRENT_OP, "problem": _problem(
                "crashed", f"harness error in the candidate's process: {_name(exc)}: {_text(exc)[:200]}",
                _tail(traceback.format_exc()))})
        except BaseException:  # noqa: BLE001
            pass
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # NOTE: skip atexit handlers and destructors a candidate may have registered


def _warm_up() -> None:
    """Before the job exists: what every job would do first. Trusted code only; no task, no candidate."""
    try:
        import torch

        if not torch.cuda.is_available():
            # NOTE: without a GPU the job can only be a CPU one: set what _serve sets before triton is imported.
            os.environ["TRITON_INTERPRET"] = "1"
        from verifier import integrity

        integrity.import_watched()
        if torch.cuda.is_available():
            torch.cuda.init()
            torch.cuda.synchronize()  # creates the device's context; allocates nothing
    except Exception:  # noqa: BLE001 - the job meets the same failure and its reply says what it was
        pass
    gc.freeze()   # torch and Triton stay: the collections after each request need not look at them again
    _mark(PRESTART_PHASE)


def _tail(text: str, limit: int = FEEDBACK_CHARS) -> str:
    return text if len(text) <= limit else "...\n" + text[-limit:]


def _name(exc: BaseException) -> str:
    """An exception's class name, short whatever the candidate named it."""
    name = type(exc).__name__
    return name if len(name) <= 80 else name[:77] + "..."


def _text(exc: BaseException) -> str:
    """str(exc), capped; the candidate's __str__ may raise or return anything."""
    try:
        text = str(exc)
    except BaseException:  # noqa: BLE001
        return "<unprintable>"
    return text[:FEEDBACK_CHARS] if type(text) is str else "<unprintable>"


def _problem(status: str, reason: str, feedback: str = "") -> dict:
    return {"status": status, "reason": reason[:REASON_CHARS], "feedback": _tail(feedback)}


class Verdict(Exception):
    """Raised inside the candidate process to end a request with a negative finding."""

    def __init__(self, status: str, reason: str, feedback: str = ""):
        super().__init__(reason)
        self.status, self.reason, self.feedback = status, reason, feedback


_PHASES: dict[str, float] = {}      # seconds per stage before the first reply: where the start-up went
_LAST_MARK = time.perf_counter()
_CURRENT_OP = "build"


def _mark(phase: str) -> None:
    """Close the current stage under this name."""
    global _LAST_MARK
    now = time.perf_counter()
    _PHASES[phase] = _PHASES.get(phase, 0.0) + now - _LAST_MARK
    _LAST_MARK = now


def _restart_clock() -> None:
    """The next stage starts now: a pre-started process's wait for its job is no stage's time."""
    global _LAST_MARK
    _LAST_MARK = time.perf_counter()


def _reseed_from_entropy() -> None:
    """torch's generators seeded from the OS: torch.initial_seed() here tells nothing about any input."""
    import torch

    torch.manual_seed(secrets.randbits(62))


# ----------------------------------------------------------------------------------------------
# serving the judge


def _serve(job: dict, wire) -> None:
    global _GUARD, _CURRENT_OP, _STAGING
    if job["device"] == "cpu":
        # NOTE: before any kernel is decorated: Triton reads it then (a pre-started process imported triton already)
        os.environ["TRITON_INTERPRET"] = "1"
    import torch  # noqa: F401

    if job["device"] == "cpu" and job.get("backend", "triton") not in ("cupy", "load_inline"):   # a Triton run
        from verifier import interpreter_fixes

        interpreter_fixes.apply()
    from verifier import integrity, tensorfile

    _mark("start and import torch" if PRESTART_PHASE not in _PHASES else "set-up once the job came")
    _last_words(os.getcwd())
    _STAGING = tensorfile.Staging()
    _reseed_from_entropy()
    _GUARD = integrity.Guard.capture()
    # NOTE: bound before any candidate code runs, as verifier.timing binds its own
    empty_cache = torch.cuda.empty_cache if job["device"] == "cuda" else (lambda: None)

    def release() -> None:
        _release_after_request(empty_cache)

    state = _State(job)
    handlers = {"build": state.build, "forward": state.forward, "time": state.time, "ping": lambda r: {},
                "block": state.block, "exit": state.exit}
    while True:
        request = wire.receive()
        if request is None:
            return
        op = _CURRENT_OP = request["op"]
        try:
            reply = {"reply": op, "problem": None, **handlers[op](request)}
        except Verdict as v:
            _GUARD.restore()   # the finding stands as found; only make sure the reply is encoded by untouched code
            reply = {"reply": op, "problem": _problem(v.status, v.reason, v.feedback)}
            if op == "build":
                reply["phases"] = _phase_pairs()
        except BaseException as exc:  # noqa: BLE001 - candidate code's exceptions are Verdicts by now: this is ours
            short = _harness_short(exc, job["device"], op)
            if short is None:
                raise
            _GUARD.restore()
            reply = {"reply": op, "problem": _problem(HARNESS_STATUS, short, _tail(traceback.format_exc()))}
        if op != "ping" and (reply["problem"] is None or reply["problem"]["status"] != HARNESS_STATUS):
            # what this process freed goes back to the device: the judge allocates on the same GPU meanwhile
            # (after a harness_error it stays held: the judge measures what was short). A ping allocates
            # nothing: its round trip, which the judge's block subtracts, stays a round trip.
            release()
        wire.send(reply)
        if op == "build":
            # what is alive now (torch, Triton, the task, the candidate's module) is kept to the end: frozen out of
            # the collections after each request, which then look at that request's objects only
            gc.freeze()
        if op == "exit" or reply["problem"] is not None and reply["problem"]["status"] != HARNESS_STATUS:
            return
        # after a harness_error the process waits, its memory held, until the judge has measured and closes


_LAST_WORDS = None


def _last_words(own_dir: str) -> None:
    """On a fatal signal (a segfault in a kernel's host code, an abort in a driver call), the Python stack of the
    thread that died goes to a file in this process's own directory, which the sandbox reads back once every
    process has ended (verifier.sandbox keep_files) and the judge quotes (verifier.judge.crash_site). Only a
    hint in a verdict that is "crashed" anyway: the file is in the candidate's reach."""
    global _LAST_WORDS
    import faulthandler

    from verifier.wire import LAST_WORDS

    try:
        _LAST_WORDS = open(os.path.join(own_dir, LAST_WORDS), "w", encoding="utf-8")
        faulthandler.enable(file=_LAST_WORDS, all_threads=False)
    except (OSError, ValueError):
        pass


_collect = gc.collect   # NOTE: bound at import, before any candidate code runs


def _release_after_request(empty_cache) -> None:
    """What a request left behind goes back: its garbage, then (GPU) the allocator's cached blocks.

    NOTE: reference cycles (an exception caught inside a call, the profiler's events, Triton's launch path)
    keep a call's inputs and outputs alive until Python's collector runs, and a few large calls seldom wake it:
    on an H200, KernelBench's LeakyReLU (6 GiB in, 6 GiB out) piled up 85 GiB of dead trial sets in this
    process, and the judge's next allocation ran out. Collected after every request, before the cache goes back."""
    _collect()
    empty_cache()


def _harness_short(exc: BaseException, device: str, op: str) -> str | None:
    """The reason line when the harness's own allocation or file write failed (out of memory, disk, file limit)."""
    import errno

    from verifier.memory_plan import is_out_of_memory, oom_text

    if isinstance(exc, OSError) and exc.errno in (errno.EFBIG, errno.ENOSPC):
        return f"kgen's harness in the candidate's process could not write a tensor file while serving {op!r}: " \
               f"{_text(exc)[:200]}"
    if is_out_of_memory(exc):
        return oom_text(exc, device, f"serving {op!r} in the candidate's process")
    return None


def _phase_pairs() -> list:
    return [[name, secs] for name, secs in _PHASES.items()]


class _State:
    """What the candidate process holds between requests: the models, the last inputs, the timing buffers."""

    def __init__(self, job: dict):
        self.job = job
        self.device = job["device"]
        self.model = None
        self.task_mod = None
        self.last_inputs: list | None = None
        self.timing_buffers: list | None = None
        self.captured = None
        self.timed_calls = 0

    # -- build

    def build(self, request: dict) -> dict:
        from verifier import tensorfile
        from verifier.inputs import build_seeded

        job, device = self.job, self.device
        self.task_mod = _load(job)
        cand_mod = _import_candidate(job, _GUARD)
        _mark("import task and candidate")
        init = list(self.task_mod.get_init_inputs())
        if device == "cpu" and job["backend"] in ("cupy", "load_inline"):
            from verifier import cuda_offline

            try:  # kernels are often compiled in __init__: build the model to reach them
                build_seeded(lambda: cand_mod.ModelNew(*init), request["init_seed"], "cpu")
            except BaseException as exc:  # noqa: BLE001
                raise _classify(exc, "while building ModelNew (nvcc only, no GPU)") from None
            built = cuda_offline.built()
            if not built:
                raise Verdict("rejected", "no CUDA source was compiled at import or in ModelNew(): nothing to check")
            hits = cuda_offline.cache_hits()
            cached = f", {len(hits)} of them found compiled in the cache" if hits else ""
            raise Verdict("not_run", f"CUDA source compiled with nvcc ({', '.join(built)}{cached}); nothing was "
                                     f"run: no GPU here")
        try:
            model = build_seeded(lambda: cand_mod.ModelNew(*init), request["init_seed"], device)
        except BaseException as exc:  # noqa: BLE001
            _after_candidate(_GUARD, "constructing ModelNew")
            raise _classify(exc, "while constructing ModelNew") from None
        _after_candidate(_GUARD, "constructing ModelNew")
        params = {name: tensorfile.read(path, max_bytes=1 << 40) for name, path in request["params"]}
        filled = fill_parameters(model, params)
        del params
        try:
            model.to(device)
        except BaseException as exc:  # noqa: BLE001
            _after_candidate(_GUARD, "moving ModelNew to the device")
            raise _classify(exc, "while moving ModelNew to the device") from None
        _after_candidate(_GUARD, "constructing ModelNew")
        self.model = model
        _reseed_from_entropy()
        _mark("build models")
        return {"filled": filled, "phases": _phase_pairs()}

    # -- one checked call

    def run_candidate(self, xs, originals=None, during: str = "ModelNew.forward"):
        """One checked call of the candidate on xs; returns (output, kernels launched, ops seen)."""
        import torch

        from verifier.audit import OpAudit, compute_ops
        from verifier.correctness import aliases, flatten_outputs, not_plain
        from verifier.launches import LaunchCounter

        audit = OpAudit()
        try:
            with torch.no_grad(), LaunchCounter(self.device, on_launch=audit.note_launch, inputs=xs) as launches:
                with audit:
                    out = self.model(*xs)
        except Verdict:
            raise
        except BaseException as exc:  # noqa: BLE001
            _after_candidate(_GUARD, during)
            raise _classify(exc, f"in {during}") from None
        _after_candidate(_GUARD, during)
        outs = flatten_outputs(out)
        odd = not_plain(outs)
        if odd:
            raise Verdict("rejected", f"returned a {odd[:80]}, not a plain torch.Tensor: an object that computes or "
                                      f"changes its values after forward returns is not a result")
        if audit.compute_ops:
            ops = ", ".join(audit.compute_ops[:5])
            raise Verdict("rejected", f"torch did the work: {during} called {ops} "
                                      f"(only allocation, views, copies and casts may go through torch)")
        # NOTE: host reads first: torch's own formatter (a printed tensor) runs its ops with the audit's mode off
        if audit.host_reads:
            raise Verdict("rejected", f"read tensor values on the host ({', '.join(sorted(set(audit.host_reads)))}) "
                                      f"in {during}: numpy or Python arithmetic is not a kernel"
                                      + (", and a printed tensor's values are a copy to the host (print its shape "
                                         "instead)" if {"Tensor.__repr__", "Tensor.__format__"} & set(audit.host_reads)
                                         else ""))
        unseen = compute_ops(launches.aten_ops)
        if unseen:
            raise Verdict("rejected", f"torch did the work: {during} ran {', '.join(unseen[:5])} with the op "
                                      f"audit switched off (seen by the profiler)")
        if launches.count == 0:
            raise Verdict("rejected", f"{during} launched no kernel of its own")
        if originals is not None:
            _check_inputs_unchanged(xs, originals)
        alias = aliases(outs, xs)
        if alias:
            raise Verdict("rejected", f"returned {alias} (or a view of it) as its output instead of computing one")
        # NOTE: by what launched, not by the file's label (a Triton file can read as another backend's): provenance
        # needs every launch's tensor arguments, which Triton's launcher gives and a CUDA extension's call does not
        problem = audit.provenance(outs) if launches.triton_launches >= launches.count else None
        if problem:   # provenance by bytes: every element of every output a kernel's store (verifier.audit)
            raise Verdict("rejected", problem)
        return out, launches.count, audit.distinct_ops[:50]

    def forward(self, request: dict) -> dict:
        import torch

        from verifier import tensorfile

        into = request["into"]
        if into == "fresh":
            self.last_inputs = None   # replaced by this call's: freed before its set arrives, not after
        target = {"last": self.last_inputs, "timing": self.timing_buffers}.get(into)
        spec, sums = request["inputs"], []
        if isinstance(spec, dict):   # made here from the judge's seed: no tensor travels (verifier.wire)
            from verifier.inputs import input_checksums, input_fn, make_inputs

            # NOTE: made on the device, so a refill holds one more set for a moment (verifier.memory_plan)
            given = make_inputs(input_fn(self.task_mod, self.device), spec["seed"], self.device)
            sums = input_checksums(given, spec["seed"], self.device)
        else:
            # a set refilled into buffers is copied from the host: no second copy of it on the device
            given = []
            for j, a in enumerate(spec):
                if "tensor" not in a:
                    given.append(a["value"])
                    continue
                # NOTE: a view of the one staging buffer: copied out before the next file is read into it
                g = tensorfile.read(a["tensor"], max_bytes=1 << 40, staging=_STAGING)
                if target is not None and j < len(target) and type(target[j]) is torch.Tensor:
                    with torch.no_grad():
                        torch._C.TensorBase.copy_(target[j], g)
                    given.append(target[j])
                else:
                    given.append(torch._C.TensorBase.to(g, self.device, copy=True))
                del g
        if target is not None:
            with torch.no_grad():
                for b, g in zip(target, given):
                    if type(b) is torch.Tensor and g is not b:
                        torch._C.TensorBase.copy_(b, g)
            xs = target
        else:
            xs = given
        del given
        originals = _clone(xs, "cpu" if request.get("snapshot") == "host" else None)
        out, n_launch, ops = self.run_candidate(xs, originals, during=request["during"])
        del originals
        if into == "fresh" and request.get("keep", True):
            self.last_inputs = xs
        return {**_write_outputs(out, request["out"]), "launches": n_launch,
                "aten_ops": [str(o)[:200] for o in ops], "input_checksums": sums,
                "allocator_bytes": int(torch.cuda.memory_reserved()) if self.device == "cuda" else 0}

    # -- the in-process timing loop (GPU)

    def time(self, request: dict) -> dict:
        import torch

        from verifier import timing
        from verifier.inputs import input_fn, make_inputs, refresh_seed

        gen = input_fn(self.task_mod, "cuda")
        seed = request["seed"]
        self.last_inputs = None   # no refill into="last" follows timing: the set would only take memory
        if self.timing_buffers is None:
            self.timing_buffers = make_inputs(gen, refresh_seed(seed, -100), "cuda")
        buffers = self.timing_buffers
        current = [0]

        def refresh(rep: int) -> None:
            current[0] = rep
            fresh = make_inputs(gen, refresh_seed(seed, rep), "cuda")
            for b, f in zip(buffers, fresh):
                if type(b) is torch.Tensor:
                    b.copy_(f)

        checked = []

        def spot_check(out) -> None:
            i = len(checked)
            checked.append({"rep": current[0], **_write_outputs(out, f"{request['out']}-c{i}")})

        flush = timing.l2_flush_buffer()
        self.captured = None
        with torch.no_grad():
            try:
                t, captured, note = timing.time_call(lambda: self.model(*buffers), refresh, method=request["method"],
                                                     reps=request["reps"], warmup=request["warmup"], flush=flush,
                                                     check=spot_check,
                                                     spot_checks=request.get("spot_checks", timing.SPOT_CHECKS))
            except Verdict:
                _after_candidate(_GUARD, "being timed")
                raise
            except timing.EscapedStream as exc:
                _after_candidate(_GUARD, "being timed")
                raise Verdict("rejected", str(exc)) from None
            except BaseException as exc:  # noqa: BLE001 - the candidate ran unchecked in the loop; its fault is data
                _after_candidate(_GUARD, "being timed")
                raise _classify(exc, "in ModelNew.forward (while timed)") from None
            _after_candidate(_GUARD, "being timed")
            if captured is not None:
                # The replays ran only the kernels recorded at capture: on fresh inputs they must still be right.
                refresh(REPLAY_REP)
                captured.replay()
                torch.cuda.synchronize()
                i = len(checked)
                checked.append({"rep": REPLAY_REP, **_write_outputs(captured.output, f"{request['out']}-c{i}")})
                self.captured = captured
        self.timed_calls += t.reps + request["warmup"]
        _reseed_from_entropy()
        return {"timing": dict(t.__dict__), "note": note[:2000], "checked": checked}

    # -- a block of calls inside the judge's clock (GPU)

    def block(self, request: dict) -> dict:
        import torch

        from verifier import timing
        from verifier.correctness import flatten_outputs
        from verifier.inputs import block_seed, input_fn, make_inputs

        gen = input_fn(self.task_mod, "cuda")
        weights = timing.checksum_weights(request["seed"], "cuda")
        sums = []
        with torch.no_grad():
            try:
                for k in range(request["calls"]):
                    xs = make_inputs(gen, block_seed(request["seed"], k), "cuda")
                    if self.captured is not None:
                        for b, x in zip(self.timing_buffers, xs):
                            if type(b) is torch.Tensor:
                                b.copy_(x)
                        self.captured.replay()
                        out = self.captured.output
                    else:
                        out = self.model(*xs)
                    sums.append([timing.weighted_checksum(o, weights) if type(o) is torch.Tensor
                                 else torch.tensor(float("nan")) for o in flatten_outputs(out)])
                values = [[float(s) for s in call] for call in sums]
            except Verdict:
                raise
            except BaseException as exc:  # noqa: BLE001
                _after_candidate(_GUARD, "being timed in a block")
                raise _classify(exc, "in ModelNew.forward (timed in a block)") from None
        _after_candidate(_GUARD, "being timed in a block")
        _reseed_from_entropy()
        return {"checksums": values}

    # -- the last word

    def exit(self, request: dict) -> dict:
        """Anything the candidate changed since its last check is a finding; the phases go back too."""
        _GUARD.check_or_raise(Verdict, "being verified")
        _POLICY.check_or_raise(Verdict, "being verified")
        _check_threads("being verified")
        return {"phases": _phase_pairs()}


def _write_outputs(out, prefix: str) -> dict:
    """Every output of one call as the judge reads it: tensors to f"{prefix}-{j}.t", plain values inline."""
    import torch

    from verifier import tensorfile
    from verifier.correctness import _is_sequence, flatten_outputs

    from verifier.correctness import memory_order

    items, layouts = [], []
    for j, o in enumerate(flatten_outputs(out)[:64]):
        if type(o) is torch.Tensor:
            layouts.append(memory_order(o))   # before the file, which is written in the shape's order
            try:
                tensorfile.write(f"{prefix}-{j}.t", o, _STAGING)
            except tensorfile.TensorFileError as exc:
                raise Verdict("rejected", f"output {j}: {exc}") from None
            items.append("tensor")
        else:
            layouts.append(None)
            items.append({"value": o})
    return {"outputs": items, "sequence": _is_sequence(out), "layouts": layouts}


# ----------------------------------------------------------------------------------------------
# building the candidate's model


def _load(job: dict):
    from verifier.task import import_task_module

    cpu = job["device"] == "cpu"   # the CPU check's shapes (verifier.shapes), device-neutral as the judge has it
    return import_task_module(os.path.abspath(job["task_path"]), "kgen_task",
                              overrides=job.get("small_overrides") if cpu else None, device="cpu" if cpu else None)


def _clone(xs, device: str | None = None):
    """Copies of xs' tensors (on device, when given: the memory plan may keep the snapshot in host memory)."""
    import torch

    if device is not None:
        # NOTE: copy=True: a tensor already on that device would otherwise come back as itself, no snapshot at all
        return [torch._C.TensorBase.to(x, device, copy=True) if type(x) is torch.Tensor else x for x in xs]
    return [torch._C.TensorBase.clone(x) if type(x) is torch.Tensor else x for x in xs]


def fill_parameters(model, params: dict) -> int:
    """Copy params[name] into the model's parameter or buffer of that name and shape; the count copied.

    The harness finds the tensors itself: it walks `_parameters`, `_buffers` and `_modules` through
    object.__getattribute__ and dict's own methods, takes only tensors of the exact types torch.Tensor and
    nn.Parameter, and copies with torch._C.TensorBase.copy_ with torch-function and dispatch overrides off.
    NOTE: none of the candidate's methods runs (no state_dict(), no named_parameters(), no copy_() of its
    own, no __getattr__): a copy that goes through them lets the candidate see, keep or change the source.
    """
    import collections

    import torch
    import torch.nn as nn

    get = object.__getattribute__
    seen: set[int] = set()
    filled = 0

    def entries(owner, name: str) -> list:
        d = get(owner, name)
        return list(dict.items(d)) if type(d) in (dict, collections.OrderedDict) else []

    def walk(module, prefix: str) -> None:
        nonlocal filled
        if id(module) in seen or not issubclass(type(module), nn.Module):
            return
        seen.add(id(module))
        for kind in ("_parameters", "_buffers"):
            for name, t in entries(module, kind):
                if type(name) is not str or type(t) not in (torch.Tensor, nn.Parameter):
                    continue
                src = params.get(prefix + name)
                if src is None or tuple(torch._C.TensorBase.size(t)) != tuple(src.shape):
                    continue
                with torch.no_grad(), torch._C.DisableTorchFunction(), torch._C._DisableTorchDispatch():
                    torch._C.TensorBase.copy_(t, src)
                filled += 1
        for name, child in entries(module, "_modules"):
            if type(name) is str and child is not None:
                walk(child, prefix + name + ".")

    walk(model, "")
    return filled


def _import_candidate(job: dict, guard):
    import importlib
    import importlib.util

    from verifier import integrity

    global _POLICY, _THREADS
    path = os.path.abspath("candidate.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(job["source"])
    _apply_build_env(job.get("build_env") or {})
    from verifier.inline_build import use_lent_libraries

    use_lent_libraries(job.get("prebuilt") or [])
    if job["device"] == "cpu" and job["backend"] in ("cupy", "load_inline"):
        from verifier import cuda_offline

        cuda_offline.install()
    writable = [os.getcwd()] + [os.environ.get(k, "") for k in
                                ("HOME", "TMPDIR", "TRITON_CACHE_DIR", "TORCH_EXTENSIONS_DIR", "CUPY_CACHE_DIR")]
    _POLICY = integrity.RuntimePolicy([path], writable)
    # NOTE: nothing is imported from where the candidate can write (its directory is on sys.path as the
    # interpreter's start directory): a module it writes there is not found by name
    sys.path[:] = [p for p in sys.path if p and not _POLICY.is_untrusted_file(os.path.join(p, "-"))]
    importlib.invalidate_caches()
    _POLICY.install()
    _THREADS = set(sys._current_frames())
    spec = importlib.util.spec_from_file_location("candidate", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["candidate"] = module
    try:
        spec.loader.exec_module(module)
    except BaseException as exc:  # noqa: BLE001
        _after_candidate(guard, "importing the candidate")
        raise _classify(exc, "while importing the candidate") from None
    _after_candidate(guard, "importing the candidate")
    integrity.check_module_aliases_or_raise(Verdict, vars(module))   # torch.os, typing.sys: modules under other names
    if not hasattr(module, "ModelNew"):
        raise Verdict("rejected", "the candidate defines no ModelNew")
    return module


BUILD_ENV = ("TORCH_EXTENSIONS_DIR", "TORCH_CUDA_ARCH_LIST", "MAX_JOBS")


def _apply_build_env(env: dict) -> None:
    """The variables the load_inline build before this process ran under (verifier.inline_build): the
    candidate's own load_inline then finds its build folder up to date. Only these names, only strings."""
    for name in BUILD_ENV:
        value = env.get(name)
        if type(value) is str and value:
            os.environ[name] = value


# ----------------------------------------------------------------------------------------------
# classifying the candidate's exceptions


def _missing_header(exc: BaseException) -> str:
    """The torch or CUDA header whose absence stopped nvcc on the compile-only path, or ""."""
    from verifier import cuda_offline

    seen = 0
    while exc is not None and seen < 8:
        if type(exc) is cuda_offline.MissingHeader:
            return exc.header if type(exc.header) is str else ""
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return ""


def _classify(exc: BaseException, during: str) -> Verdict:
    name = _name(exc)
    module = type(exc).__module__ if type(type(exc).__module__) is str else ""
    text = _text(exc)
    try:
        tb = _tail(traceback.format_exc())
    except BaseException:  # noqa: BLE001 - a traceback can call the candidate's code too
        tb = ""
    if isinstance(exc, SystemExit):
        return Verdict("rejected", f"called sys.exit() {during}: exiting cannot skip the verdict", tb)
    missing = _missing_header(exc)
    if missing:   # only on the CPU's compile-only path (verifier.cuda_offline): no verdict on the source here
        return Verdict("not_run", f"CUDA source needs {missing[:100]}, which this machine's torch or CUDA toolkit "
                                  f"does not have: nvcc could not finish and nothing was run (no GPU here)", tb)
    cause = exc.__cause__ or exc.__context__
    compile_like = (
        _interpreter_compile_error(exc, cause)
        or "CompilationError" in name
        or "CompileException" in name
        or (module.startswith("triton") and ("compil" in name.lower() or "compil" in text.lower()[:200]))
        or "Error building extension" in text
        or "nvcc" in text[:200] and "error" in text.lower()
        or isinstance(exc, SyntaxError)
    )
    status = "compile_error" if compile_like else "runtime_error"
    first = text.strip().splitlines()[0] if text.strip() else ""
    return Verdict(status, f"{name} {during}: {first[:200]}", tb)


def _interpreter_compile_error(exc: BaseException, cause: BaseException | None) -> bool:
    """Under TRITON_INTERPRET=1 a kernel that would not compile (a non-power-of-2 arange, an
    undefined name, a bad dtype) fails at launch as an InterpreterError; on a GPU the same
    kernel is a CompilationError. Classify it the way the GPU would."""
    if type(exc).__name__ != "InterpreterError" or cause is None:
        return False
    if isinstance(cause, NameError):
        return True
    tb = cause.__traceback__
    last = None
    while tb is not None:
        last = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    return last is not None and ("triton/language/" in last.replace(os.sep, "/"))


# ----------------------------------------------------------------------------------------------
# the checks due after any stretch of candidate code


_STAGING = None  # verifier.tensorfile.Staging: the host buffer the tensor files pass through (made at start)
_GUARD = None    # the integrity guard; the harness's own flag changes are told to it
_POLICY = None   # the run-time policy (audit hook) refusing the candidate frames, processes, files...
_THREADS: set = set()   # Python threads alive before the candidate was imported


def _after_candidate(guard, during: str) -> None:
    """The checks due after any stretch of candidate code: policy, patches, threads left behind."""
    _POLICY.check_or_raise(Verdict, during)
    guard.check_or_raise(Verdict, during)
    _check_threads(during)


def _check_threads(during: str) -> None:
    """A Python thread of the candidate's still running does work nobody waits for."""
    frames = sys._current_frames()
    for ident, frame in frames.items():
        if ident in _THREADS:
            continue
        f = frame
        while f is not None:
            if _POLICY.is_untrusted_file(f.f_code.co_filename):
                raise Verdict("rejected", f"left a thread of its own running after {during}: work the "
                                          f"harness does not wait for (threads are not allowed)")
            f = f.f_back


def _check_inputs_unchanged(clones, originals) -> None:
    import torch

    for j, (c, o) in enumerate(zip(clones, originals)):
        if type(c) is torch.Tensor and c.device != o.device:   # a snapshot in host memory: one tensor at a time
            c = torch._C.TensorBase.to(c, o.device)
        if type(c) is torch.Tensor and not torch.equal(c, o):
            n = int((c != o).sum()) if c.shape == o.shape else c.numel()
            raise Verdict("rejected", f"mutated input {j} in place ({n} elements changed); inputs must be left as given")


if __name__ == "__main__":
    main()
