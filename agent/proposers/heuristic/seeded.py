"""One round of the heuristic proposer with two tracks: its own templates and Inductor's kernels (the seed).

    plan = plan_round(proposer, ctx)     # RoundPlan: proposals, or the reason there are none
    plan.proposals[0].note               # "inductor k0=c0: Inductor's first configuration ..."

Round one: on the CPU (nothing can be timed) the template where one covers the task, else the seed;
on a GPU both, the template's default first, then Inductor's own first configuration. Later rounds
first give a slot to a track not tried yet, then branch from the best configuration by median time
(`retime.branch_point`: two configurations within the run-to-run spread are timed again before
one is followed), or, where nothing was timed (the CPU), from the loop's best kernel. A template
branch walks configs.py's moves, a seed branch inductor_emit's (Inductor's other autotuning
candidates, num_warps, num_stages); the diagnosis steers a move only when it describes the kernel
branched from. Every proposal's note says which configuration and why.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.proposers.base import Proposal, ProposeContext
from agent.proposers.heuristic import configs, retime
from agent.proposers.heuristic.inductor import Seed, SeedUnavailable, capture
from agent.proposers.heuristic.inductor_emit import (
    SEED_FAMILY, SeedChoice, emit_candidate, launch_key, parse_seed_note, seed_first_round,
    seed_next_round,
)
from agent.proposers.heuristic.recognise import LLM_HINT

MAX_FAILED_CONFIGS = 3   # failures (none passing) after which a track itself is suspect


@dataclass
class RoundPlan:
    proposals: list[Proposal] = field(default_factory=list)
    reason: str = ""          # why there are no proposals


class SeedTrack:
    """The task's Inductor seed, captured once, on first need (Inductor takes ~10-30 s on a CPU)."""

    def __init__(self, task) -> None:
        self.task = task                # a Task or a task file's path
        self._seed: Seed | SeedUnavailable | None = None

    @property
    def seed(self) -> Seed | SeedUnavailable:
        if self._seed is None:
            self._seed = capture(self.task)
        return self._seed

    @property
    def available(self) -> bool:
        return isinstance(self.seed, Seed)


def _seed_proposal(seed: Seed, choice: SeedChoice) -> Proposal | None:
    try:
        source = emit_candidate(seed, choice.config, choice.note)
    except Exception as exc:   # noqa: BLE001 - a configuration the emitter cannot write is skipped, with its reason
        return Proposal(source=None, repair=f"seed unavailable: {exc}", note=choice.note)
    return Proposal(source=source, note=choice.note, prompt=seed.kernel_summary(), response=choice.note)


def _template_proposal(proposer, choice: configs.Choice) -> Proposal:
    from agent.proposers.heuristic.proposer import _emitter

    rec = proposer.recognition
    return Proposal(source=_emitter(rec.family)(rec, choice.config, choice.note), note=choice.note,
                    prompt=rec.describe(), response=choice.note)


def _failed_out(attempts) -> str | None:
    passed = [a for a in attempts if a.status == "ok"]
    if len(attempts) >= MAX_FAILED_CONFIGS and not passed:
        last = attempts[-1]
        return f"failed on {len(attempts)} configurations (last: {last.status}: {last.reason})"
    return None


def plan_round(proposer, ctx: ProposeContext) -> RoundPlan:
    """The proposals for this round from both tracks, or why there are none."""
    rec = proposer.recognition
    n = max(1, ctx.n)
    on_gpu = proposer._on_gpu(ctx)
    if ctx.backend not in ("triton", "", None):
        return RoundPlan(reason=f"the heuristic proposer writes Triton kernels only; for --backend {ctx.backend} "
                                f"{LLM_HINT}")
    stop = configs.stop_reason(ctx.diagnosis)
    if stop:
        return RoundPlan(reason=stop)

    template_attempts = [a for a, _ in proposer._mine(ctx)] if rec.supported else []
    seed_attempts = [a for a in ctx.history if parse_seed_note(a.note or "") is not None]
    template_dead = None if rec.supported else rec.reason
    if rec.supported and _failed_out(template_attempts):
        template_dead = f"the {rec.family} template {_failed_out(template_attempts)}"
    # the seed is captured only where it may be proposed: on a GPU always, on the CPU where no template covers
    want_seed = on_gpu or template_dead is not None or bool(seed_attempts)
    seed = proposer.seeds.seed if want_seed else None
    seed_dead = None
    if isinstance(seed, SeedUnavailable):
        seed_dead = str(seed)
    elif seed is not None and _failed_out(seed_attempts):
        seed_dead = f"the Inductor seed {_failed_out(seed_attempts)}"
    elif seed is None:
        seed_dead = "not needed"

    if template_dead and seed_dead:
        return RoundPlan(reason=_combined_reason(template_dead, seed_dead))

    template_moves = _template_moves(proposer, ctx, n) if not template_dead else []
    seed_moves = _seed_moves(seed, ctx, on_gpu, n) if not seed_dead else []
    retimes = _retimes(proposer, seed, ctx) if on_gpu else []

    picks: list[Proposal] = list(retimes)
    # a track that has never been tried gets the first slot it can
    untried = []
    if template_moves and not template_attempts:
        untried.append(_template_proposal(proposer, template_moves.pop(0)))
    if seed_moves and not seed_attempts:
        prop = _seed_proposal(seed, seed_moves.pop(0))
        if prop is not None:
            untried.append(prop)
    picks += untried
    order = _branch_order(proposer, ctx)
    for track in order:
        moves = template_moves if track == "template" else seed_moves
        for move in moves:
            if len(picks) >= n:
                break
            prop = _template_proposal(proposer, move) if track == "template" else _seed_proposal(seed, move)
            if prop is not None:
                picks.append(prop)
    picks = [p for p in picks if p.source is not None][:n]
    if not picks:
        best = ctx.best_note.split(":", 1)[0] if ctx.best_note else ""
        around = f" around {best}" if best else ""
        tried = len(template_attempts) + len(seed_attempts)
        return RoundPlan(reason=f"every configuration{around} worth trying has been tried ({tried} so far)")
    return RoundPlan(proposals=picks)


def _combined_reason(template_dead: str, seed_dead: str) -> str:
    if seed_dead == "not needed":
        return template_dead
    reason = template_dead.replace(f"; {LLM_HINT}", "")
    return f"{reason}; {seed_dead}; {LLM_HINT}"


def _branch(proposer, ctx: ProposeContext) -> tuple[str | None, str]:
    """(the note key to branch from, why): by median time where timed, else the loop's best kernel."""
    rec = proposer.recognition
    prefixes = tuple(p for p in ((f"{rec.family} " if rec.supported else None), f"{SEED_FAMILY} ") if p)
    decision = retime.branch_point(retime.timings_by_config(ctx.history, prefixes))
    if decision.branch:
        return decision.branch, decision.why
    if decision.retime:
        # while re-timing, the walk goes on from the best by median so far
        return decision.retime[0], decision.why
    if ctx.best_note and ctx.best_note.startswith(prefixes):
        return retime.note_key(ctx.best_note), "the loop's best kernel"
    return None, ""


def _branch_order(proposer, ctx) -> list[str]:
    key, _ = _branch(proposer, ctx)
    return ["seed", "template"] if key and key.startswith(SEED_FAMILY) else ["template", "seed"]


def _diagnosis_for(ctx: ProposeContext, key: str | None):
    """The diagnosis describes the loop's best kernel: it steers only a walk from that same configuration."""
    if key and ctx.best_note and retime.note_key(ctx.best_note) == key:
        return ctx.diagnosis
    return None


def _template_moves(proposer, ctx: ProposeContext, n: int) -> list[configs.Choice]:
    problem = proposer.recognition.problem
    tried = proposer._tried(ctx)
    key, _ = _branch(proposer, ctx)
    parsed = configs.parse_note(key or "")
    if parsed is None or parsed[0] != proposer.recognition.family:
        return configs.first_round(problem, proposer._on_gpu(ctx), n, tried)
    return configs.next_round(problem, parsed[1], _diagnosis_for(ctx, key), proposer._on_gpu(ctx), n, tried,
                              sms=proposer._sms(ctx))


def _seed_moves(seed: Seed, ctx: ProposeContext, on_gpu: bool, n: int) -> list[SeedChoice]:
    tried = {launch_key(seed, cfg) for a in ctx.history if (cfg := parse_seed_note(a.note or "")) is not None}
    best_key = None
    decision = retime.branch_point(retime.timings_by_config(ctx.history, (f"{SEED_FAMILY} ",)))
    if decision.branch or decision.retime:
        best_key = decision.branch or decision.retime[0]
    elif ctx.best_note and ctx.best_note.startswith(f"{SEED_FAMILY} "):
        best_key = retime.note_key(ctx.best_note)
    best = parse_seed_note(best_key or "")
    if best is None:
        return seed_first_round(seed, on_gpu, n, tried)
    return seed_next_round(seed, best, _diagnosis_for(ctx, best_key), n, tried)


def _retimes(proposer, seed, ctx: ProposeContext) -> list[Proposal]:
    """The two best configurations again, when their gap is inside the spread and one was timed once."""
    rec = proposer.recognition
    prefixes = tuple(p for p in ((f"{rec.family} " if rec.supported else None), f"{SEED_FAMILY} ") if p)
    decision = retime.branch_point(retime.timings_by_config(ctx.history, prefixes))
    out = []
    for key in decision.retime:
        cfg = parse_seed_note(key)
        if cfg is not None and isinstance(seed, Seed):
            prop = _seed_proposal(seed, SeedChoice(cfg, f"re-timed: {decision.why}", len(seed.benchmark.kernels)))
            if prop is not None and prop.source is not None:
                out.append(prop)
            continue
        parsed = configs.parse_note(key)
        if parsed is not None and rec.supported and parsed[0] == rec.family:
            out.append(_template_proposal(proposer, configs.Choice(parsed[0], parsed[1], f"re-timed: {decision.why}")))
    return out
