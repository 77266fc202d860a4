"""The sandboxed side of verification: `python -m verifier.worker`, run by verifier.verify.

It reads the channel key and its job from stdin as one JSON line. Started
ahead of its job (verifier.sandbox.Sandbox), it gets the key alone first,
imports torch, triton and the verifier's modules, starts CUDA where there is
a GPU (the phase PRESTART_PHASE), and then reads the job from a second line:
only trusted code runs before the job, nothing of the task's or the
candidate's. Then:
1. snapshots what the harness relies on (verifier.integrity.Guard: events,
   synchronize, clocks, comparisons, json/hmac, torch.Tensor...) and installs
   the run-time policy (an audit hook), before any candidate code is imported;
2. imports the task and the candidate (on a CPU machine: Triton under the
   interpreter; CUDA sources compiled with nvcc, not run);
3. builds Model and ModelNew under one seed and copies matching parameters;
4. runs correctness trials on fresh seeded inputs: the candidate first, on
   clones, under the op audit, then the reference with TF32 off. After every
   call of the candidate: nothing patched, nothing refused by the policy, no
   thread of its own left running, outputs plain tensors, no compute op
   through torch (dispatch mode and profiler), no tensor values read on the
   host, at least one kernel launched, every output written by its kernels,
   inputs unchanged, outputs not aliasing them;
5. re-checks on the same input buffers refilled with values from a hidden
   seed (a result cached by pointer, id() or call count is then stale); on a
   GPU this happens after timing: the candidate and eager are timed (fresh
   input values every call, L2 flushed), correctness is re-checked after
   timing and on hidden seeds, the device-wide synchronised time and the
   roofline floor are checked, torch.compile is timed when asked;
6. checks the guard once more (restoring anything patched, so the verdict is
   encoded by untouched code), sends one signed verdict over the result
   channel and exits.

Every failure of the candidate becomes a verdict; only a dead process does not.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import traceback


PRESTART_PHASE = "pre-started: Python, torch, triton, CUDA start (before the job)"


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
    from verifier.channel import ChildChannel

    chan = ChildChannel(int(os.environ.pop("KGEN_RESULT_FD")), bytes.fromhex(hello.pop("key")))
    job = hello["job"]
    del hello
    try:
        message = run_job(job)
    except BaseException as exc:  # noqa: BLE001 - the verdict must always be sent
        message = {"status": "crashed", "reason": f"harness error: {type(exc).__name__}: {exc}",
                   "feedback": _tail(traceback.format_exc())}
    message = _last_word(message)
    message["phases"] = [[name, secs] for name, secs in _PHASES.items()]   # pairs: the channel sorts keys
    sys.stdout.flush()
    sys.stderr.flush()
    chan.send(message)
    os._exit(0)  # NOTE: skip atexit handlers and destructors a candidate may have registered


def _warm_up() -> None:
    """Before the job exists: what every job would do first. Trusted code only; no task, no candidate.

    The guard's snapshot (verifier.integrity) is still taken once the job is here, before the candidate
    is imported; the modules imported here are the ones that snapshot imports first anyway."""
    try:
        import torch

        if not torch.cuda.is_available():
            # NOTE: without a GPU the job can only be a CPU one: set what run_job sets before triton is imported.
            os.environ["TRITON_INTERPRET"] = "1"
        from verifier import integrity

        integrity.import_watched()
        if torch.cuda.is_available():
            torch.cuda.init()
            torch.cuda.synchronize()  # creates the device's context; allocates nothing
    except Exception:  # noqa: BLE001 - the job meets the same failure and its verdict says what it was
        pass
    _mark(PRESTART_PHASE)


def _last_word(message: dict) -> dict:
    """Before the verdict leaves: anything the candidate changed since its last check voids a pass."""
    if _GUARD is None or _POLICY is None:
        return message
    if message.get("status") not in ("ok", "not_run"):
        _GUARD.restore()  # a failure stands as found; only make sure it is encoded by untouched code
        return message
    try:
        _GUARD.check_or_raise(Verdict, "being verified")
        _POLICY.check_or_raise(Verdict, "being verified")
        _check_threads("being verified")
    except Verdict as v:
        message = {**message, "status": v.status, "reason": v.reason, "feedback": v.feedback}
    except BaseException as exc:  # noqa: BLE001
        _GUARD.restore()
        message = {**message, "status": "crashed", "reason": f"harness error: {type(exc).__name__}: {exc}"}
    return message


def _tail(text: str, limit: int = 1500) -> str:
    return text if len(text) <= limit else "...\n" + text[-limit:]


class Verdict(Exception):
    """Raised inside the worker to end verification with a status."""

    def __init__(self, status: str, reason: str, feedback: str = ""):
        super().__init__(reason)
        self.status, self.reason, self.feedback = status, reason, feedback


_PHASES: dict[str, float] = {}      # seconds per stage of this job, in order: where the wall time went
_LAST_MARK = time.perf_counter()


def _mark(phase: str) -> None:
    """Close the current stage under this name."""
    global _LAST_MARK
    now = time.perf_counter()
    _PHASES[phase] = _PHASES.get(phase, 0.0) + now - _LAST_MARK
    _LAST_MARK = now


def _restart_clock() -> None:
    """The next stage starts now: a pre-started worker's wait for its job is no stage's time."""
    global _LAST_MARK
    _LAST_MARK = time.perf_counter()


def run_job(job: dict) -> dict:
    if job["device"] == "cpu":
        # NOTE: before any kernel is decorated: Triton reads it then (a pre-started worker imported triton already)
        os.environ["TRITON_INTERPRET"] = "1"
    import torch  # noqa: F401

    if job["device"] == "cpu" and job.get("backend", "triton") == "triton":
        from verifier import interpreter_fixes

        interpreter_fixes.apply()

    from verifier import integrity

    global _GUARD
    _mark("start and import torch" if PRESTART_PHASE not in _PHASES else "set-up once the job came")
    result: dict = {"ran": False, "trials": 0, "aten_ops": [], "flags": []}
    try:
        if job["kind"] == "baselines":
            result.update(_baselines(job))
        else:
            guard = _GUARD = integrity.Guard.capture()
            _verify(job, guard, result)
        result.setdefault("status", "ok")
        result.setdefault("reason", "correct on every trial")
    except Verdict as v:
        result.update(status=v.status, reason=v.reason, feedback=v.feedback)
    return result


# ----------------------------------------------------------------------------------------------
# building models and inputs


def _load(job: dict):
    from verifier.task import import_task_module

    return import_task_module(os.path.abspath(job["task_path"]), "kgen_task", overrides=job.get("small_overrides"),
                              device=job.get("device"))


def _input_fn(task_mod, device: str):
    use_small = device == "cpu" and callable(getattr(task_mod, "get_small_inputs", None))
    return task_mod.get_small_inputs if use_small else task_mod.get_inputs


def _make_inputs(gen, seed: int, device: str):
    import torch

    torch.manual_seed(seed)
    with torch.device(device):
        xs = list(gen())
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in xs]


def _refresher(gen, buffers, seed: int):
    """refresh(rep): fresh input values (seeded by rep) written into the fixed input buffers.

    NOTE: the candidate and the baselines are timed on the same sequence of inputs."""
    import torch

    def refresh(rep: int) -> None:
        fresh = _make_inputs(gen, seed + 7919 * (rep + 2), "cuda")
        for b, f in zip(buffers, fresh):
            if isinstance(b, torch.Tensor):
                b.copy_(f)

    return refresh


def _clone(xs):
    import torch

    return [x.clone() if isinstance(x, torch.Tensor) else x for x in xs]


def _copy_matching_params(src, dst) -> int:
    import torch

    dst_state = dst.state_dict()
    copied = 0
    with torch.no_grad():
        for name, value in src.state_dict().items():
            if name in dst_state and dst_state[name].shape == value.shape:
                dst_state[name].copy_(value)
                copied += 1
    return copied


# ----------------------------------------------------------------------------------------------
# classifying the candidate's exceptions


def _classify(exc: BaseException, during: str) -> Verdict:
    name = type(exc).__name__
    module = type(exc).__module__ or ""
    text = str(exc)
    tb = _tail(traceback.format_exc())
    if isinstance(exc, SystemExit):
        return Verdict("rejected", f"called sys.exit() {during}: exiting cannot skip the verdict", tb)
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
    return Verdict(status, f"{name} {during}: {first[:300]}", tb)


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
# verification


def _import_candidate(job: dict, guard):
    import importlib.util

    from verifier import integrity

    global _POLICY, _THREADS
    path = os.path.abspath("candidate.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(job["source"])
    if job["device"] == "cpu" and job["backend"] in ("cupy", "load_inline"):
        from verifier import cuda_offline

        cuda_offline.install()
    writable = [os.getcwd()] + [os.environ.get(k, "") for k in
                                ("HOME", "TMPDIR", "TRITON_CACHE_DIR", "TORCH_EXTENSIONS_DIR", "CUPY_CACHE_DIR")]
    _POLICY = integrity.RuntimePolicy([path], writable)
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
    if not hasattr(module, "ModelNew"):
        raise Verdict("rejected", "the candidate defines no ModelNew")
    return module


def _verify(job: dict, guard, result: dict) -> None:
    import torch

    from verifier.audit import OpAudit, compute_ops
    from verifier.correctness import aliases, compare_outputs, flatten_outputs, not_plain
    from verifier.launches import LaunchCounter

    device = job["device"]
    task_mod = _load(job)
    cand_mod = _import_candidate(job, guard)
    _mark("import task and candidate")

    if job["device"] == "cpu" and job["backend"] in ("cupy", "load_inline"):
        from verifier import cuda_offline

        try:  # kernels are often compiled in __init__: build the model to reach them
            torch.manual_seed(job["seed"])
            cand_mod.ModelNew(*task_mod.get_init_inputs())
        except BaseException as exc:  # noqa: BLE001
            raise _classify(exc, "while building ModelNew (nvcc only, no GPU)") from None
        built = cuda_offline.built()
        if not built:
            raise Verdict("rejected", "no CUDA source was compiled at import or in ModelNew(): nothing to check")
        result.update(status="not_run", ran=False,
                      reason=f"CUDA source compiled with nvcc ({', '.join(built)}); nothing was run: no GPU here")
        return

    init = list(task_mod.get_init_inputs())
    seed = job["seed"]
    torch.manual_seed(seed)
    ref_model = task_mod.Model(*init)
    try:
        torch.manual_seed(seed)
        cand_model = cand_mod.ModelNew(*init)
    except BaseException as exc:  # noqa: BLE001
        _after_candidate(guard, "constructing ModelNew")
        raise _classify(exc, "while constructing ModelNew") from None
    _copy_matching_params(ref_model, cand_model)
    ref_model.to(device)
    cand_model.to(device)
    _after_candidate(guard, "constructing ModelNew")
    _mark("build models")

    gen = _input_fn(task_mod, device)
    atol, rtol = job.get("atol"), job.get("rtol")
    exact_reference(torch)

    track_writes = job["backend"] == "triton"

    def run_candidate(xs, originals=None, during: str = "ModelNew.forward"):
        """One checked call of the candidate on xs; returns (output, kernels launched)."""
        audit = OpAudit()
        try:
            with torch.no_grad(), LaunchCounter(device, on_launch=audit.note_launch, inputs=xs) as launches:
                with audit:
                    out = cand_model(*xs)
        except Verdict:
            raise
        except BaseException as exc:  # noqa: BLE001
            _after_candidate(guard, during)
            raise _classify(exc, f"in {during}") from None
        _after_candidate(guard, during)
        outs = flatten_outputs(out)
        odd = not_plain(outs)
        if odd:
            raise Verdict("rejected", f"returned a {odd}, not a plain torch.Tensor: an object that computes or "
                                      f"changes its values after forward returns is not a result")
        result["aten_ops"] = audit.distinct_ops[:50]
        if audit.compute_ops:
            ops = ", ".join(audit.compute_ops[:5])
            raise Verdict("rejected", f"torch did the work: {during} called {ops} "
                                      f"(only allocation, views, copies and casts may go through torch)")
        unseen = compute_ops(launches.aten_ops)
        if unseen:
            raise Verdict("rejected", f"torch did the work: {during} ran {', '.join(unseen[:5])} with the op "
                                      f"audit switched off (seen by the profiler)")
        if audit.host_reads:
            raise Verdict("rejected", f"read tensor values on the host ({', '.join(sorted(set(audit.host_reads)))}) "
                                      f"in {during}: numpy or Python arithmetic is not a kernel")
        if launches.count == 0:
            raise Verdict("rejected", f"{during} launched no kernel of its own")
        if originals is not None:
            _check_inputs_unchanged(xs, originals)
        alias = aliases(outs, xs)
        if alias:
            raise Verdict("rejected", f"returned {alias} (or a view of it) as its output instead of computing one")
        unwritten = audit.unwritten(outs) if track_writes else []
        if unwritten:
            which = "its output" if len(outs) == 1 else f"output {unwritten[0]}"
            raise Verdict("rejected", f"{which} was not written by any kernel of the candidate's: its "
                                      f"{launches.count} launch(es) stored elsewhere (a launch on a dummy tensor, "
                                      f"or a result computed outside the kernels)")
        return out, launches.count

    for trial in range(job["trials"]):
        xs = _make_inputs(gen, seed + trial, device)
        originals = _clone(xs)
        clones = _clone(xs)
        out_c, n_launch = run_candidate(clones, originals)
        result["ran"] = True
        with torch.no_grad():
            out_r = ref_model(*xs)
        problem = compare_outputs(out_c, out_r, atol, rtol)
        guard.check_or_raise(Verdict, "its output was compared")
        if problem:
            raise Verdict("mismatch", f"trial {trial + 1} (seed {seed + trial}): {problem.reason}", problem.feedback)
        result["trials"] = trial + 1
        result["launches"] = n_launch
        del out_c, out_r, xs, originals
        if trial < job["trials"] - 1:
            del clones

    _mark("correctness trials (first call compiles)")
    if device == "cuda":
        result["device"] = torch.cuda.get_device_name()   # also when the candidate is not timed
    if device == "cuda" and job["time_it"]:
        _time_on_gpu(job, task_mod, gen, ref_model, cand_model, run_candidate, result)
    elif job["trials"] > 0:
        _recheck_in_place(job, gen, ref_model, clones, run_candidate)
        _mark("hidden re-check")


def _recheck_in_place(job, gen, ref_model, buffers, run_candidate) -> None:
    """Refill the last trial's input tensors in place with a hidden seed's values and check again.

    Same tensors, same pointers, same id()s, one more call: a result cached by
    pointer, id, shape or call count is now stale, and inputs from a seed the
    candidate could not know defeat outputs precomputed for the public seeds.
    """
    import torch

    from verifier.correctness import compare_outputs

    fresh = _make_inputs(gen, job["hidden_seed"], job["device"])
    with torch.no_grad():
        for b, f in zip(buffers, fresh):
            if isinstance(b, torch.Tensor):
                b.copy_(f)
    out_c, _ = run_candidate(buffers, _clone(fresh), during="ModelNew.forward (hidden re-check)")
    with torch.no_grad():
        out_r = ref_model(*fresh)
    problem = compare_outputs(out_c, out_r, job.get("atol"), job.get("rtol"))
    if problem:
        raise Verdict("mismatch", f"hidden re-check (the same input tensors refilled from a hidden seed): "
                                  f"{problem.reason}", problem.feedback)


_GUARD = None    # the worker's integrity guard; the harness's own flag changes are told to it
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
            if f.f_code.co_filename in _POLICY.untrusted:
                raise Verdict("rejected", f"left a thread of its own running after {during}: work the "
                                          f"harness does not wait for (threads are not allowed)")
            f = f.f_back


def exact_reference(torch) -> None:
    """The correctness reference computes in true fp32: TF32 off (cuDNN and cuBLAS)."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if _GUARD is not None:
        _GUARD.remember_flags()


def torch_defaults(torch) -> dict:
    """Baselines use what users get: torch's defaults (cuBLAS TF32 off, cuDNN TF32 on)."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = True
    if _GUARD is not None:
        _GUARD.remember_flags()
    return {"cuda.matmul.allow_tf32": False, "cudnn.allow_tf32": True}


def _check_inputs_unchanged(clones, originals) -> None:
    import torch

    for j, (c, o) in enumerate(zip(clones, originals)):
        if isinstance(c, torch.Tensor) and not torch.equal(c, o):
            n = int((c != o).sum()) if c.shape == o.shape else c.numel()
            raise Verdict("rejected", f"mutated input {j} in place ({n} elements changed); inputs must be left as given")


# ----------------------------------------------------------------------------------------------
# GPU timing


def _time_on_gpu(job, task_mod, gen, ref_model, cand_model, run_candidate, result) -> None:
    import torch

    from verifier import timing
    from verifier.correctness import compare_outputs

    atol, rtol = job.get("atol"), job.get("rtol")
    hidden = job["hidden_seed"]
    buffers = _make_inputs(gen, hidden, "cuda")

    refresh = _refresher(gen, buffers, hidden)
    flush = timing.l2_flush_buffer()
    method = job.get("timing", "events")

    def timed(call, who: str, check=None):
        t, captured, note = timing.time_call(call, refresh, method=method, reps=job["reps"], warmup=job["warmup"],
                                             flush=flush, check=check)
        if note:
            result["flags"].append(f"{who}: {note}")
        return t, captured

    def check_output(out, what: str) -> None:
        """out, computed from the current buffers, matches the reference on them, or a mismatch saying what."""
        exact_reference(torch)
        problem = compare_outputs(out, ref_model(*buffers), atol, rtol)
        if problem:
            raise Verdict("mismatch", f"{what}: {problem.reason}", problem.feedback)

    def spot_check(out) -> None:
        """A timed call's output, drawn at random: right on the inputs it was given, or a mismatch."""
        check_output(out, "a timed call's output is wrong (timed calls are checked at random)")

    with torch.no_grad():
        cand_call = lambda: cand_model(*buffers)  # noqa: E731
        try:
            t_cand, captured = timed(cand_call, "candidate", spot_check)
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
        _mark("time candidate")
        if captured is not None:
            # The replays ran only the kernels recorded at capture: on fresh inputs they must still be right.
            refresh(10**6 + 1)
            captured.replay()
            torch.cuda.synchronize()
            check_output(captured.output, "replayed from its CUDA graph on fresh inputs, the output is wrong")
            del captured

        # A fast path after many calls must still be right: check the call after timing, on its own inputs.
        refresh(10**6)
        exact_reference(torch)
        out_c, _ = run_candidate(buffers, _clone(buffers), during="ModelNew.forward (after timing)")
        out_r = ref_model(*buffers)
        problem = compare_outputs(out_c, out_r, atol, rtol)
        if problem:
            raise Verdict("mismatch", f"after {t_cand.reps + job['warmup']} timed calls the output is wrong: "
                                      f"{problem.reason}", problem.feedback)
        for h in range(job["hidden_trials"]):
            xs = _make_inputs(gen, hidden + 104729 * (h + 1), "cuda")
            out_c, _ = run_candidate(_clone(xs), _clone(xs), during=f"ModelNew.forward (hidden re-check {h + 1})")
            problem = compare_outputs(out_c, ref_model(*xs), atol, rtol)
            if problem:
                raise Verdict("mismatch", f"hidden re-check {h + 1}: {problem.reason}", problem.feedback)
        del out_c, out_r

        _mark("re-checks after timing")
        escaped = timing.escaped_stream(t_cand)
        if escaped:
            raise Verdict("rejected", escaped)

        result["timing"] = t_cand.__dict__
        if job.get("repeat_timing"):
            result["timing_repeat"] = timed(cand_call, "candidate, timed again", spot_check)[0].__dict__
            _mark("time candidate again")
        result["torch_flags"] = torch_defaults(torch)
        t_eager, _ = timed(lambda: ref_model(*buffers), "eager")
        result["baselines"] = {"eager": t_eager.__dict__}
        for mode in job.get("compile_modes") or []:
            result["baselines"].update(_time_compiled(ref_model, buffers, refresh, mode, job, flush))
        _mark("time baselines")

    _physics(job, ref_model, buffers, t_cand, result)
    _mark("roofline check")


def _time_compiled(ref_model, buffers, refresh, mode: str, job, flush) -> dict:
    import torch

    from verifier import timing

    key = "compile" if mode == "default" else f"compile-{mode.replace('-no-cudagraphs', '')}"
    compiled = torch.compile(ref_model, mode=None if mode == "default" else mode)
    t, _, _ = timing.time_call(lambda: compiled(*buffers), refresh, method=job.get("timing", "events"),
                               reps=job["reps"], warmup=job["warmup"], flush=flush)
    return {key: t.__dict__}


def _physics(job, ref_model, buffers, t_cand, result) -> None:
    """A time below the roofline floor is impossible: reject it."""
    import torch

    try:
        from verifier import physics
    except ImportError:
        return
    try:
        peaks = physics.peaks_for(torch.cuda.get_device_name(), job.get("peaks_override"))
    except ValueError as exc:  # a malformed peaks override (physics.PeaksError)
        result["flags"].append(f"physics check skipped: {exc}")
        return
    if peaks is None:
        result["flags"].append(physics.peaks_note(torch.cuda.get_device_name(), job.get("peaks_override")))
        return
    with torch.no_grad():
        work = physics.count_work(ref_model, buffers)
    result["floor_ms"] = physics.floor_ms(work, peaks)
    reason = physics.impossible(t_cand.median_ms, work, peaks)
    if reason:
        raise Verdict("rejected", reason)


# ----------------------------------------------------------------------------------------------
# baselines only (trusted code: no candidate)


def _baselines(job: dict) -> dict:
    import torch

    from verifier import timing

    # NOTE: torch.compile's generated kernels are built in a cache of this job alone: the shared Triton
    # cache is writable by candidates, and a baseline must not load a kernel that a candidate left there.
    os.environ["TRITON_CACHE_DIR"] = os.path.join(tempfile.mkdtemp(prefix="baseline-"), "triton")
    task_mod = _load(job)
    torch.manual_seed(job["seed"])
    model = task_mod.Model(*task_mod.get_init_inputs()).to("cuda")
    gen = task_mod.get_inputs
    buffers = _make_inputs(gen, job["hidden_seed"], "cuda")

    refresh = _refresher(gen, buffers, job["hidden_seed"])
    flags = torch_defaults(torch)
    flush = timing.l2_flush_buffer()
    out = {"torch_flags": flags, "device": torch.cuda.get_device_name(), "ran": True}
    with torch.no_grad():
        started = time.perf_counter()
        t, _, _ = timing.time_call(lambda: model(*buffers), refresh, method=job.get("timing", "events"),
                                   reps=job["reps"], warmup=job["warmup"], flush=flush)
        base = {"eager": t.__dict__}
        _mark("time eager")
        for mode in job.get("compile_modes") or []:
            base.update(_time_compiled(model, buffers, refresh, mode, job, flush))
            _mark(f"compile and time {mode}")
    out["baselines"] = base
    out["wall_s"] = time.perf_counter() - started
    out["status"], out["reason"] = "ok", "baselines timed"
    return out


if __name__ == "__main__":
    main()
