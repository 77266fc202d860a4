"""The optimize loop: a LangGraph state graph from a task to its best verified kernel.

    analyze ─► propose ─► verify ─► profile ─► decide ─┬─► propose   (keep going)
                                                       └─► END       (goal met, or a limit reached)

- analyze: the task's shapes, dtypes, FLOPs and bytes (verifier.physics), the
  roofline floor on this GPU; on a machine without a GPU nothing is timed and
  the analysis says so.
- propose: the proposer's N candidates for this round. They are numbered and
  kept in the checkpointed state before anything is verified, so a resumed run
  never pays for the same proposals twice.
- verify: each candidate in the verifier's sandbox (in parallel on the CPU,
  one at a time on a GPU, so timings never overlap). Every attempt is stored as
  soon as its verdict is in; a resumed round reuses the stored verdicts.
- profile: the round's new best kernel under the profiler; its diagnosis goes
  into the next round's context.
- decide: stop when the goal is met (speedup >= --target over the faster of
  eager and torch.compile, or % of speed-of-light >= --sol; without a GPU, the
  first correct kernel), or at --max-iters rounds, --patience rounds without a
  better kernel, the token, dollar or wall-clock budget, or when the proposer
  has nothing new to try.

When the loop has ended, the run's best kernel gets the ncu cross-check (profiler/crosscheck.py:
its claimed time against Nsight Compute's device time for its kernels, on a GPU with ncu; elsewhere
"not run" and why). A claim ncu shows impossible rejects that attempt, and the next best passing
one is checked in its place (agent.lifecycle.cross_check_best, as for a scored kernel); the outcome is on the attempt's verdict
(`VerifyResult.ncu_check`) and on the run (`Run.best_ncu_check`).

State is plain JSON (dicts and lists) and checkpointed after every node in
`results/checkpoints.sqlite` with the run id as thread id, so
`kgen optimize --resume RUN_ID` continues from the last completed step.

    from agent.config import OptimizeConfig
from agent.config import OptimizeConfig
    from agent.graph import optimize
    run = optimize("tasks/softmax.py", OptimizeConfig(max_iters=3))
    print(run.status, run.best_speedup)

Over 450 lines on purpose: the five nodes and `optimize()` are the readers and
writers of one checkpointed schema (LoopState); kept together, a field's every
use is in one file. The analysis, the proposers and the run's bookkeeping live
in agent/analysis.py, agent/proposers/ and agent/lifecycle.py.

Dependencies are injected (`proposer`, `verify_fn`, `profile_fn`, `crosscheck_fn`), so the same
loop runs with the real verifier and profiler, or with any others that keep
their signatures. The default verify_fn takes each candidate's sandboxed worker
from a `verifier.verify.WorkerPool`: started ahead, once the analysis is done and
then whenever a verification ends, so that its start-up overlaps the loop's own
work (profiling, proposing) and never a timing; closed however the loop ends.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import sqlite3
import time
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from contextlib import closing, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TypedDict

from agent.analysis import Analysis, analysis_line, analyze_task, device_and_gpu
from agent.config import OptimizeConfig
from agent.lifecycle import NO_GPU, CrossCheckFn, cross_check_best, finish_run, record_best, start_run
from agent.live import LoopEvent
from agent.proposers import make_proposer
from agent.proposers.base import AttemptSummary, Proposal, ProposeContext, Proposer, ProposerError
from agent.records import Attempt, Run
from agent.store import Store, utc_now
from profiler.records import Diagnosis
from verifier.records import NOT_CHECKED_HERE, NcuCheck, Task, VerifyConfig, VerifyResult

VerifyFn = Callable[[Task, str, VerifyConfig], VerifyResult]
ProfileFn = Callable[[Task, str], "Diagnosis | None"]
AnalyzeFn = Callable[..., "Analysis"]   # analyze_task's signature: where the analysis (and baselines) run
EventFn = Callable[[LoopEvent], None]

_DEFAULT: Any = object()           # "build the default": distinct from an explicit None
MIN_GAIN = 0.01                    # a new best must be this much faster (fraction of the best's time)


class LoopState(TypedDict, total=False):
    """The checkpointed state. NOTE: JSON only (dicts, lists, str, numbers): no dataclasses."""

    run_id: str
    analysis: dict               # Analysis.to_dict(), from analyze (eager's baseline joins from the first timing)
    round: int                   # the round proposed last (0 before the first)
    next_number: int             # the number the next attempt gets
    round_size: int              # proposals the last round brought
    pending: list                # this round's proposals (Proposal as dict + "number", "round"), unverified
    history: list                # AttemptSummary dicts, oldest first; failures of the last round keep their source
    best: dict | None            # BestKernel as a dict: the best passing attempt
    new_best: int | None         # number of the attempt that became best this round, to profile
    diagnosis: dict | None       # Diagnosis.to_dict() of the best kernel
    diagnosis_text: str | None   # Diagnosis.to_text() of the best kernel
    stale_rounds: int            # rounds in a row without a better kernel
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    wall_s: float                # seconds of loop time, over all sessions, as of the last decide
    stop_reason: str | None      # set by decide when the loop ends


# ---- the default collaborators ---------------------------------------------------------------


def default_profile_fn(device: str, config: OptimizeConfig) -> ProfileFn | None:
    """The profiler on a GPU; None without one (there is nothing to profile on the CPU)."""
    if device != "cuda":
        return None
    from profiler.profile import profile_candidate

    def profile(task: Task, source: str):
        return profile_candidate(task, source, timeout_s=config.verify_timeout_s)

    return profile


def default_crosscheck_fn(device: str, config: OptimizeConfig) -> CrossCheckFn | None:
    """The ncu cross-check on a GPU; None without one (nothing was timed, so no claim to check)."""
    if device != "cuda":
        return None
    from profiler.crosscheck import cross_check

    def check(task: Task, source: str, result: VerifyResult) -> NcuCheck:
        return cross_check(task, source, result, timeout_s=config.verify_timeout_s)

    return check


# ---- the loop --------------------------------------------------------------------------------


def _analysis(state: LoopState) -> Analysis:
    return Analysis.from_dict(state.get("analysis") or {})


@dataclass
class BestKernel:
    """The best passing attempt so far, as the state keeps it (JSON there: asdict and from_dict)."""

    number: int                     # the attempt's number
    source: str | None              # its kernel
    median_ms: float | None         # its median time, GPU only
    speedup: float | None           # against the faster baseline, when timed
    speedups: dict[str, float]      # against each baseline, when timed
    sol_pct: float | None           # % of speed-of-light, when timed on a GPU with known peaks
    note: str = ""                  # the proposer's note

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "BestKernel":
        return cls(**data)


def _best(state: LoopState) -> BestKernel | None:
    data = state.get("best")
    return BestKernel.from_dict(data) if data else None


def _proposal_dict(p: Proposal, number: int, round_: int) -> dict[str, Any]:
    return {**dataclasses.asdict(p), "number": number, "round": round_}


# A run's phases besides the nodes' (analysis, proposing, verifying, profiling): the command's start to the loop's
# (Python, kgen, the task's loading, the proposer's set-up) and the rest (checkpoints, the store, the pool's end).
STARTUP_PHASE = "start-up"
OTHER_PHASE = "other"


class OptimizeLoop:
    """The nodes of the graph, bound to one run's task, config, store and collaborators."""

    def __init__(self, *, task: Task, config: OptimizeConfig, proposer: Proposer, store: Store, run: Run,
                 verify_fn: VerifyFn, profile_fn: ProfileFn | None, verify_config: VerifyConfig,
                 on_event: EventFn | None = None, wall_before_s: float = 0.0, analyze_fn: AnalyzeFn | None = None,
                 crosscheck_fn: CrossCheckFn | None = None, no_crosscheck: str = "",
                 started_s: float | None = None, phases_before: dict[str, float] | None = None):
        self.task = task
        self.analyze_fn = analyze_fn or analyze_task
        self.config = config
        self.proposer = proposer
        self.store = store
        self.run = run
        self.verify_fn = verify_fn
        self.profile_fn = profile_fn
        self.crosscheck_fn = crosscheck_fn
        # why there is no crosscheck_fn, as the check's "not run" reason says it
        self.no_crosscheck = no_crosscheck or NO_GPU
        self.verify_config = verify_config
        self.on_event = on_event
        self.timed = run.device == "cuda"
        self._wall_before_s = wall_before_s      # wall time of earlier sessions of this run
        self._phases_before = dict(phases_before or {})
        unaccounted_s = wall_before_s - sum(self._phases_before.values())
        if unaccounted_s > 1e-3:   # a run stored before phases were kept: its earlier wall time, as "other"
            self._phases_before[OTHER_PHASE] = self._phases_before.get(OTHER_PHASE, 0.0) + unaccounted_s
        # NOTE: the session counts from its command's start (time.monotonic()), not from here: the task's loading,
        # the proposer's set-up and the process's own start-up are part of the wall clock a user sees
        now = time.monotonic()
        self._session_t0 = now if started_s is None else min(started_s, now)
        self._phases: dict[str, float] = {STARTUP_PHASE: now - self._session_t0}

    # -- plumbing --

    def emit(self, kind: str, *, round: int = 0, attempt: Attempt | None = None, message: str = "") -> None:
        if self.on_event is not None:
            self.on_event(LoopEvent(kind=kind, run=self.run, round=round, attempt=attempt, message=message))

    def wall_s(self) -> float:
        return self._wall_before_s + (time.monotonic() - self._session_t0)

    def phases(self) -> dict[str, float]:
        """Seconds per phase over every session so far; with "other" (what no phase holds) they sum to wall_s()."""
        session_s = time.monotonic() - self._session_t0
        known = dict(self._phases)
        known[OTHER_PHASE] = max(0.0, session_s - sum(known.values()))
        total = dict(self._phases_before)
        for name, secs in known.items():
            total[name] = total.get(name, 0.0) + secs
        return total

    def _timed(self, phase: str, node):
        """The node, its time added to `phase` (a node cut short by Ctrl-C leaves its time to "other")."""
        def timed(state):
            t0 = time.monotonic()
            out = node(state)
            self._phases[phase] = self._phases.get(phase, 0.0) + (time.monotonic() - t0)
            return out
        return timed

    def context(self, state: LoopState, round_: int) -> ProposeContext:
        best = _best(state)
        diagnosis = state.get("diagnosis")
        return ProposeContext(
            task_name=self.task.name, task_source=self.task.source, backend=self.config.backend,
            analysis=_analysis(state), round=round_, n=self.config.candidates,
            best_source=best.source if best else None, best_ms=best.median_ms if best else None,
            best_speedup=best.speedup if best else None, best_note=best.note if best else "",
            history=[AttemptSummary(**h) for h in state.get("history", [])],
            diagnosis_text=state.get("diagnosis_text"),
            diagnosis=Diagnosis.from_dict(diagnosis) if diagnosis else None,
        )

    def build(self, checkpointer=None):
        from langgraph.graph import END, StateGraph

        graph = StateGraph(LoopState)
        graph.add_node("analyze", self._timed("analysis", self.analyze))
        graph.add_node("propose", self._timed("proposing", self.propose))
        graph.add_node("verify", self._timed("verifying", self.verify))
        graph.add_node("profile", self._timed("profiling", self.profile))
        graph.add_node("decide", self.decide)
        graph.set_entry_point("analyze")
        graph.add_edge("analyze", "propose")
        graph.add_edge("propose", "verify")
        graph.add_edge("verify", "profile")
        graph.add_edge("profile", "decide")
        graph.add_conditional_edges("decide", lambda s: END if s.get("stop_reason") else "propose",
                                    ["propose", END])
        return graph.compile(checkpointer=checkpointer)

    # -- nodes --

    def analyze(self, state: LoopState) -> LoopState:
        analysis = self.analyze_fn(self.task, self.run.device, self.run.gpu, self.verify_config, self.config.backend)
        self.emit("analysis", message=analysis_line(analysis))
        return {"analysis": analysis.to_dict()}

    def propose(self, state: LoopState) -> LoopState:
        round_ = state.get("round", 0) + 1
        self.emit("round", round=round_)
        proposals = self.proposer.propose(self.context(state, round_))[: self.config.candidates]
        number = state.get("next_number", 1)
        pending = []
        for p in proposals:
            pending.append(_proposal_dict(p, number, round_))
            number += 1
        prompt_tokens = state.get("prompt_tokens", 0) + sum(p.prompt_tokens for p in proposals)
        completion_tokens = state.get("completion_tokens", 0) + sum(p.completion_tokens for p in proposals)
        cost = state.get("cost_usd", 0.0) + sum(p.cost_usd for p in proposals)
        self.run.prompt_tokens, self.run.completion_tokens, self.run.cost_usd = prompt_tokens, completion_tokens, cost
        self.run.rounds = round_
        self.store.save_run(self.run)
        spent = sum(p.prompt_tokens + p.completion_tokens for p in proposals)
        self.emit("proposed", round=round_,
                  message=f"{len(proposals)} proposal(s)" + (f", {spent:,} tokens" if spent else ""))
        return {"round": round_, "round_size": len(pending), "next_number": number, "pending": pending,
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens, "cost_usd": cost, "new_best": None}

    def _attempt(self, p: dict[str, Any], result: VerifyResult, started: str, sol_ms: float | None) -> Attempt:
        return Attempt.from_result(
            self.run.run_id, p["number"], p["round"], result, sol_ms=sol_ms, note=p.get("note", ""),
            prompt_tokens=p.get("prompt_tokens", 0), completion_tokens=p.get("completion_tokens", 0),
            cost_usd=p.get("cost_usd", 0.0), started_at=started, finished_at=utc_now())

    def _no_code(self, p: dict[str, Any]) -> Attempt:
        """A reply without a usable kernel: its repair message is the feedback for the next round."""
        repair = p.get("repair") or "the reply held no usable kernel"
        now = utc_now()
        return Attempt(run_id=self.run.run_id, number=p["number"], round=p["round"], status="no_code",
                       reason=repair.splitlines()[0][:200], feedback=repair, note=p.get("note", ""),
                       prompt_tokens=p.get("prompt_tokens", 0), completion_tokens=p.get("completion_tokens", 0),
                       cost_usd=p.get("cost_usd", 0.0), started_at=now, finished_at=now)

    def _store_attempt(self, p: dict[str, Any], attempt: Attempt) -> Attempt:
        self.store.save_attempt(self.run, attempt, source=p.get("source"), prompt=p.get("prompt", ""),
                                response=p.get("response", ""))
        self.run.attempts = max(self.run.attempts, attempt.number)
        self.store.save_run(self.run)
        self.emit("attempt", round=attempt.round, attempt=attempt)
        return attempt

    def _prebuild(self, todo: list[dict[str, Any]]) -> None:
        """The round's load_inline extensions built side by side before its one-at-a-time verifications: the
        compiles need the CPU only, and each verification then finds its own in the cache."""
        from verifier import inline_build
        from verifier.verify import resolve_device

        try:
            device = resolve_device(self.verify_config.device)
            inline_build.prebuild_round([p["source"] for p in todo], device, self.verify_config.timeout_s)
        except Exception:  # noqa: BLE001 - an optimisation: each verification builds what is missing itself
            pass

    def _verify_one(self, p: dict[str, Any]) -> tuple[VerifyResult, str]:
        started = utc_now()
        return self.verify_fn(self.task, p["source"], self.verify_config), started

    def verify(self, state: LoopState) -> LoopState:
        done: dict[int, Attempt] = {}
        todo = []
        for p in state.get("pending", []):
            stored = self.store.load_attempt(self.run.run_id, p["number"])
            if stored is not None:              # verified before an interruption: never again
                done[p["number"]] = stored
            elif p.get("source") is None:
                done[p["number"]] = self._store_attempt(p, self._no_code(p))
            else:
                todo.append(p)

        sol_ms = _analysis(state).sol_ms
        todo, repeats = self._repeats(todo)
        # NOTE: on a GPU candidates are verified one at a time: two timings at once would both be wrong.
        workers = 1 if self.timed else min(len(todo), os.cpu_count() or 1)
        if workers <= 1 and len(todo) > 1:
            self._prebuild(todo)
        if workers <= 1:
            for p in todo:
                result, started = self._verify_one(p)
                done[p["number"]] = self._store_attempt(
                    p, self._attempt(p, result, started, sol_ms))
        elif todo:
            pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kgen-verify")
            try:
                futures: dict[Future, dict[str, Any]] = {pool.submit(self._verify_one, p): p for p in todo}
                for future in as_completed(futures):
                    p = futures[future]
                    result, started = future.result()
                    done[p["number"]] = self._store_attempt(
                        p, self._attempt(p, result, started, sol_ms))
            finally:
                # NOTE: on Ctrl-C, do not wait here for queued candidates; running ones end by their timeout.
                pool.shutdown(wait=False, cancel_futures=True)

        for p, earlier, result in repeats:   # the same source as an attempt verified before: its verdict again
            result = result or done[earlier].verify
            if result is None:
                continue
            again = VerifyResult.from_dict(result.to_dict())
            again.flags = [*again.flags, f"the same source as attempt {earlier}: its verdict, not verified again"]
            done[p["number"]] = self._store_attempt(p, self._attempt(p, again, utc_now(), sol_ms))
        attempts = [done[p["number"]] for p in state.get("pending", []) if p["number"] in done]
        return self._after_round(state, attempts)

    def _repeats(self, todo: list[dict[str, Any]]):
        """(the proposals to verify, [(a proposal, the attempt it repeats, that attempt's verdict or None)]).

        An LLM that sends back a kernel it already sent learns nothing from a second verification (and pays for
        none); the heuristic proposer re-times a kernel on purpose (its walk's re-timing), so it is left alone."""
        if self.run.proposer != "openai" or not todo:
            return todo, []
        seen: dict[str, tuple[int, VerifyResult | None]] = {}
        for a in self.store.load_attempts(self.run.run_id):
            text = self.store.attempt_text(self.run.run_id, a.number, "kernel.py")
            if text is not None and a.verify is not None:
                seen.setdefault(_digest(text), (a.number, a.verify))
        fresh, repeats = [], []
        for p in todo:
            key = _digest(p["source"])
            if key in seen:
                repeats.append((p, *seen[key]))
            else:
                seen[key] = (p["number"], None)   # verified in this round: its verdict once it is known
                fresh.append(p)
        return fresh, repeats

    def _after_round(self, state: LoopState, attempts: list[Attempt]) -> LoopState:
        """Fold a verified round into the state: history, best, baselines."""
        history = [{**h, "source": None} for h in state.get("history", [])]   # only the latest failures keep code
        sources = {p["number"]: p.get("source") for p in state.get("pending", [])}
        for a in attempts:
            history.append(dataclasses.asdict(AttemptSummary(
                number=a.number, status=a.status, reason=a.reason, median_ms=a.median_ms, speedup=a.speedup,
                feedback=a.feedback, source=None if a.passed else sources.get(a.number), note=a.note)))

        analysis = _analysis(state)
        if "eager" not in analysis.baselines_ms:
            # the verifier times eager with every candidate: the first timing completes the analysis
            for a in attempts:
                if a.verify is not None and a.verify.baselines:
                    analysis = analysis.with_baselines({k: t.median_ms for k, t in a.verify.baselines.items()})
                    break

        best = _best(state)
        new_best = None
        for a in attempts:
            if a.passed and self._better(a, best):
                best = BestKernel(number=a.number, source=sources.get(a.number), median_ms=a.median_ms,
                                  speedup=a.speedup, speedups=a.speedups, sol_pct=a.sol_pct, note=a.note)
                new_best = a.number
        if new_best is not None:
            attempt = next(a for a in attempts if a.number == new_best)
            record_best(self.store, self.run, attempt, best.source)
            self.emit("best", round=state.get("round", 0), attempt=attempt)
        return {"pending": [], "history": history, "analysis": analysis.to_dict(),
                "best": dataclasses.asdict(best) if best else None,
                "new_best": new_best}

    def _better(self, attempt: Attempt, best: "BestKernel | None") -> bool:
        if best is None:
            return True
        if attempt.median_ms is None or best.median_ms is None:
            return False   # untimed: no ground to call one correct kernel better than another
        # NOTE: medians of the same kernel differ by about a percent from run to run; a smaller gain is noise
        return attempt.median_ms < best.median_ms * (1.0 - MIN_GAIN)

    def profile(self, state: LoopState) -> LoopState:
        number = state.get("new_best")
        if number is None or self.profile_fn is None:
            return {}
        stored = self.store.load_attempt(self.run.run_id, number)
        if stored is not None and stored.profile is not None:   # profiled before an interruption
            return {"diagnosis": stored.profile.to_dict(),
                    "diagnosis_text": self.store.attempt_text(self.run.run_id, number, "profile.txt")}
        try:
            diagnosis = self.profile_fn(self.task, _best(state).source)
        except Exception as exc:  # profiling is advice: the loop goes on without it
            self.emit("warning", round=state.get("round", 0),
                      message=f"profiling attempt {number} failed: {type(exc).__name__}: {exc}")
            return {}
        if diagnosis is None:
            return {}
        text = diagnosis.to_text()
        self.store.save_profile(self.run, number, diagnosis, text)
        attempt = self.store.load_attempt(self.run.run_id, number)
        self.emit("profile", round=state.get("round", 0), attempt=attempt,
                  message=text.strip().splitlines()[0] if text.strip() else "")
        return {"diagnosis": diagnosis.to_dict(), "diagnosis_text": text}

    def goal_met(self, best: "BestKernel | None") -> str | None:
        """Why the run's goal is met by the best kernel, or None."""
        if best is None:
            return None
        if not self.timed:
            return f"attempt {best.number} is correct; nothing was timed (no GPU)"
        speedup, sol = best.speedup, best.sol_pct
        if speedup is not None and speedup >= self.config.target:
            return f"target reached: {speedup:.2f}x >= {self.config.target:g}x over the faster baseline"
        if self.config.sol is not None and sol is not None and sol >= self.config.sol:
            return f"{sol:.0f}% of speed-of-light >= {self.config.sol:g}%"
        return None

    def decide(self, state: LoopState) -> LoopState:
        cfg = self.config
        round_ = state.get("round", 0)
        stale = 0 if state.get("new_best") is not None else state.get("stale_rounds", 0) + 1
        wall = self.wall_s()
        tokens = state.get("prompt_tokens", 0) + state.get("completion_tokens", 0)
        cost = state.get("cost_usd", 0.0)
        self.run.wall_s = wall
        self.run.phases = self.phases()
        self.run.rounds = round_

        reason = None if cfg.keep_going else self.goal_met(_best(state))
        if reason is None and round_ >= cfg.max_iters:
            reason = f"{round_} round(s) done (--max-iters {cfg.max_iters})"
        if reason is None and stale >= cfg.patience:
            reason = f"no better kernel in the last {stale} round(s) (--patience {cfg.patience})"
        if reason is None and cfg.budget_usd is not None and cost >= cfg.budget_usd:
            reason = f"dollar budget spent: ${cost:.4f} >= ${cfg.budget_usd:g}"
        if reason is None and cfg.budget_tokens is not None and tokens >= cfg.budget_tokens:
            reason = f"token budget spent: {tokens:,} >= {cfg.budget_tokens:,}"
        if reason is None and cfg.timeout_s is not None and wall >= cfg.timeout_s:
            reason = f"wall-clock budget spent: {wall:.0f} s >= {cfg.timeout_s:g} s"
        history = state.get("history", [])
        unchecked = [h for h in history if h["status"] in NOT_CHECKED_HERE]
        if reason is None and state.get("best") is None and unchecked:
            # NOTE: this machine's shortcoming, not the kernels': more rounds would learn nothing
            if any(h["status"] == "not_run" for h in unchecked):
                reason = ("a candidate compiles, but CUDA kernels cannot run without a GPU, so none can be checked "
                          "here: run on a GPU, or use --backend triton (checked under the Triton interpreter)")
            else:
                reason = (f"CUDA kernels are not checkable on this machine ({unchecked[-1]['reason']}); "
                          "or use --backend triton (checked under the Triton interpreter)")
        if reason is None:
            exhausted = self.proposer.exhausted(self.context(state, round_ + 1))
            if exhausted:
                reason = f"the proposer has nothing new to try: {exhausted}"
            elif state.get("round_size", 1) == 0:
                reason = "the proposer proposed nothing"
        self.store.save_run(self.run)
        return {"stale_rounds": stale, "wall_s": wall, "stop_reason": reason}

    # -- after the graph --

    def cross_check_best(self, state: LoopState) -> "BestKernel | None":
        """The ncu cross-check on the run's best kernel (agent.lifecycle.cross_check_best); the best kernel
        that survives it, as the state keeps one (None: none does)."""
        before = _best(state)
        if before is None:
            return None
        survivor = cross_check_best(
            self.store, self.run, self.task, self.crosscheck_fn, not_checked=self.no_crosscheck,
            on_check=lambda a, check: self.emit("crosscheck", round=state.get("round", 0), attempt=a,
                                                message=check.line))
        if survivor is None:
            return None
        if survivor.number == before.number:
            return before
        return BestKernel(number=survivor.number, median_ms=survivor.median_ms, speedup=survivor.speedup,
                          source=self.store.attempt_text(self.run.run_id, survivor.number, "kernel.py"),
                          speedups=survivor.speedups, sol_pct=survivor.sol_pct, note=survivor.note)


# ---- one run, start to end --------------------------------------------------------------------


def _digest(source: str) -> str:
    """A kernel source's identity: the same text, ignoring trailing whitespace and blank lines at the ends."""
    text = "\n".join(line.rstrip() for line in source.strip().splitlines())
    return hashlib.sha256(text.encode()).hexdigest()


def _checkpointer(store: Store):
    from langgraph.checkpoint.sqlite import SqliteSaver

    store.root.mkdir(parents=True, exist_ok=True)
    # NOTE: the saver locks around its own use of the connection; nodes run on the calling thread.
    conn = sqlite3.connect(store.checkpoints_path, check_same_thread=False, timeout=30.0)
    return conn, SqliteSaver(conn)


def _warming(pool, on_event: EventFn | None) -> EventFn:
    """on_event, and the pool's first worker started when the analysis is done."""
    def events(event: LoopEvent) -> None:
        if event.kind == "analysis":
            pool.refill()
        if on_event is not None:
            on_event(event)
    return events


def optimize(task_path: str | Path | None, config: OptimizeConfig, *, resume: str | None = None,
             proposer: Proposer | None = None, verify_fn: VerifyFn | None = None,
             profile_fn: ProfileFn | None = _DEFAULT, on_event: EventFn | None = None,
             store: Store | None = None, analyze_fn: AnalyzeFn | None = None,
             machine: tuple[str, str] | None = None, crosscheck_fn: CrossCheckFn | None = _DEFAULT,
             started_s: float | None = None) -> Run:
    """Run (or resume) the loop for one task; returns the stored Run.

    `started_s`: when the command started (time.monotonic()); the run's wall time counts from there (default:
    this call), so that it holds the task's loading and the set-up too.

    `machine`: the (device, GPU name) the GPU calls run on when they are not this process's (a cluster's:
    agent.board.ray), with `analyze_fn`, `verify_fn` and `profile_fn` sending them there; the ncu cross-check
    of the best kernel runs only where given one then (`crosscheck_fn`), else it says "not run" and why.

    Raises TaskError for an unusable task file, ValueError for a bad device
    request, ProposerError when the proposer cannot be built. Once the run is
    stored, failures end in the Run instead: a proposer that gives up mid-run
    marks it "failed", Ctrl-C marks it "interrupted" (both resumable), and any
    other exception marks it "failed" and is raised again.
    """
    from verifier.task import load_task

    started_s = time.monotonic() if started_s is None else started_s
    store = store or Store(config.results_dir)
    if resume is not None:
        run = store.load_run(store.resolve_run_id(resume))
        task = load_task(run.task_path, small_shapes=config.small_shapes, device=run.device)
        if task_path is not None and Path(task_path).resolve() != Path(run.task_path).resolve():
            raise ValueError(f"run {run.run_id} is for {run.task_path}, not {task_path}")
        device = run.device
        if device == "cuda" and (machine or device_and_gpu("cuda"))[0] != "cuda":   # only where CUDA is
            raise ValueError(f"run {run.run_id} ran on CUDA; the GPU calls would run on {machine[0]} now")
    else:
        if task_path is None:
            raise ValueError("a task file is needed (or --resume RUN_ID)")
        task = load_task(task_path, small_shapes=config.small_shapes, device=config.device)
        device, gpu = machine or device_and_gpu(config.device)
        run = None

    proposer = proposer or make_proposer(config, task)
    if profile_fn is _DEFAULT:
        profile_fn = default_profile_fn(device, config)
    no_crosscheck = ""
    if crosscheck_fn is _DEFAULT:
        crosscheck_fn = default_crosscheck_fn(device, config) if machine is None else None
        if machine is not None and device == "cuda":
            no_crosscheck = "the run's GPU work ran on a cluster's GPUs, where the ncu cross-check is not wired"

    if run is None:
        config = _resolved(config, proposer)
        run = start_run(store, task, config, proposer=getattr(proposer, "name", type(proposer).__name__),
                        model=(config.model or "") if config.proposer == "openai" else "", device=device, gpu=gpu)
    else:
        run.config = config.to_dict()
        run.status, run.stop_reason, run.finished_at = "running", "", ""
        store.save_run(run)

    phases_before = dict(run.phases)
    try:
        return _run_loop(task, config, store, run, proposer, device, verify_fn, profile_fn, on_event, analyze_fn,
                         crosscheck_fn, no_crosscheck, started_s)
    except KeyboardInterrupt:
        # NOTE: Ctrl-C (or SIGTERM/SIGHUP, agent.cli) outside the loop's own handler (before it is in place, or
        # while the loop's pool shuts down): the run is stored already, so it must not stay "running". The loop
        # may have counted part of this session already (each decide writes run.phases): only the rest is added.
        if run.status == "running":
            run.status, run.finished_at = "interrupted", utc_now()
            elapsed = time.monotonic() - started_s
            counted = sum(run.phases.values()) - sum(phases_before.values())
            run.phases = {**run.phases, OTHER_PHASE: run.phases.get(OTHER_PHASE, 0.0) + max(0.0, elapsed - counted)}
            run.wall_s = sum(run.phases.values())
            run.stop_reason = f"interrupted; continue with: kgen optimize --resume {run.run_id}"
            store.save_run(run)
            if on_event is not None:
                on_event(LoopEvent(kind="stop", run=run, message=run.stop_reason))
        return run


def _run_loop(task, config: OptimizeConfig, store: Store, run: Run, proposer: Proposer, device: str,
              verify_fn: VerifyFn | None, profile_fn: ProfileFn | None, on_event: EventFn | None,
              analyze_fn: AnalyzeFn | None, crosscheck_fn: CrossCheckFn | None = None, no_crosscheck: str = "",
              started_s: float | None = None) -> Run:
    """The stored run's loop, from its verifier's set-up to its end."""
    verify_config = config.verify_config(device, store.root)
    conn, saver = _checkpointer(store)
    pool = None
    if verify_fn is None:
        from verifier.verify import WorkerPool

        # NOTE: the first worker starts once the analysis is done: the analysis may time baselines on this GPU,
        # and a worker's start-up (a CUDA context) must not run beside a timing
        pool = WorkerPool(verify_config.output_cap_bytes, warm=False)
        on_event = _warming(pool, on_event)
    loop = OptimizeLoop(task=task, config=config, proposer=proposer, store=store, run=run,
                        verify_fn=pool.verify if pool else verify_fn, profile_fn=profile_fn,
                        verify_config=verify_config, on_event=on_event, wall_before_s=run.wall_s,
                        analyze_fn=analyze_fn, crosscheck_fn=crosscheck_fn, no_crosscheck=no_crosscheck,
                        started_s=started_s, phases_before=run.phases)
    with closing(conn), (pool or nullcontext()):
        app = loop.build(saver)
        thread = {"configurable": {"thread_id": run.run_id},
                  # each round is four steps; LangGraph's default limit (25) would end a long run early
                  "recursion_limit": 5 * config.max_iters + 20}
        snapshot = app.get_state(thread)
        if not snapshot.values:
            graph_input: LoopState | None = {
                "run_id": run.run_id, "round": 0, "next_number": 1, "pending": [], "history": [],
                "best": None, "new_best": None, "diagnosis": None, "diagnosis_text": None, "stale_rounds": 0,
                "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0, "wall_s": 0.0, "stop_reason": None}
        else:
            graph_input = None
            if not snapshot.next:
                # the loop had ended; decide again under this (possibly extended) config
                app.update_state(thread, {"stop_reason": None}, as_node="profile")
        loop.emit("start")
        try:
            final = app.invoke(graph_input, thread, durability="sync")
            before = _best(final)
            # NOTE: inside the try: a Ctrl-C during the cross-check (ncu runs for minutes on a large task) is
            # the loop's interruption, its time counted once by the loop's clock
            best = loop.cross_check_best(final)
            if (best and best.number) != (before and before.number):
                # NOTE: the checkpoint's best follows the store's, or a resumed run would race a rejected kernel
                app.update_state(thread, {"best": dataclasses.asdict(best) if best else None, "diagnosis": None,
                                          "diagnosis_text": None}, as_node="decide")
        except KeyboardInterrupt:
            return _finish(store, run, loop, "interrupted",
                           f"interrupted; continue with: kgen optimize --resume {run.run_id}")
        except ProposerError as exc:
            return _finish(store, run, loop, "failed", f"the proposer failed: {exc}")
        except Exception as exc:
            _finish(store, run, loop, "failed", f"kgen failed: {type(exc).__name__}: {exc}")
            raise

    if loop.goal_met(best) is not None:
        status = "succeeded"
    elif best is not None:
        status = "stopped"
    else:
        status = "failed"
    reason = final.get("stop_reason") or ""
    if before is not None and (best is None or best.number != before.number):
        reason += f"; attempt {before.number}'s claimed time was rejected by the ncu cross-check"
    if best is None:
        reason = f"no correct kernel: {reason}" if reason else "no correct kernel"
    return _finish(store, run, loop, status, reason)


def _resolved(config: OptimizeConfig, proposer: Proposer) -> OptimizeConfig:
    """The config with what "auto" and the environment chose written in, so a resume asks the same proposer."""
    name = getattr(proposer, "name", "")
    if name not in ("openai", "heuristic"):
        return config
    changes: dict[str, Any] = {"proposer": name}
    if name == "openai":
        changes["model"] = getattr(getattr(proposer, "config", None), "model", None) or config.model_name()
        changes["base_url"] = getattr(proposer, "base_url", None) or config.base_url
    return config.replace(**changes)


def _finish(store: Store, run: Run, loop: OptimizeLoop, status: str, reason: str) -> Run:
    run.phases = loop.phases()
    finish_run(store, run, status, reason, wall_s=sum(run.phases.values()))
    loop.emit("stop", message=reason)
    return run
