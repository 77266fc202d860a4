"""The heuristic proposer: Triton kernels from templates, no LLM, configurations steered by the profiler.

    proposer = HeuristicProposer("tasks/softmax.py")
    proposals = proposer.propose(ctx)        # up to ctx.n candidates, each a full ModelNew source
    proposer.exhausted(ctx)                  # why it has nothing new to try, or None

It recognises the reference's op family once (recognise.py), then each round
emits the family's template with the configurations the walk picks
(configs.py): round 1 a default for the benchmark size, later rounds the moves
the diagnosis of the best kernel calls for. Each proposal's note names its
configuration and the reason; notes are how later rounds (and a resumed run)
know what was tried. A reference no template covers gives no proposals, and
`exhausted` says why and what to do instead.
"""

from __future__ import annotations

from pathlib import Path

from agent.proposers.base import Proposal, ProposeContext, Proposer
from agent.proposers.heuristic import configs
from agent.proposers.heuristic.recognise import LLM_HINT, Recognition, recognise

MAX_FAILED_CONFIGS = 3   # template failures (none passing) after which the template itself is suspect


def _emitter(family: str):
    if family == "pointwise":
        from agent.proposers.heuristic.pointwise import emit
    elif family == "rowwise":
        from agent.proposers.heuristic.rowwise import emit
    else:
        from agent.proposers.heuristic.matmul import emit
    return emit


class HeuristicProposer(Proposer):
    """Template kernels for pointwise chains, row reductions and matmuls with epilogues."""

    name = "heuristic"

    def __init__(self, task) -> None:
        """`task` is a verifier Task or the path of a task file."""
        self.task_path = Path(getattr(task, "path", task))
        self._recognition: Recognition | None = None

    @property
    def recognition(self) -> Recognition:
        if self._recognition is None:
            self._recognition = recognise(self.task_path)
        return self._recognition

    # -- what the run so far says ----------------------------------------------------------------

    def _mine(self, ctx: ProposeContext) -> list[tuple]:
        """(attempt, config) for every earlier attempt this proposer's family wrote."""
        family = self.recognition.family
        out = []
        for attempt in ctx.history:
            parsed = configs.parse_note(attempt.note or "")
            if parsed and parsed[0] == family:
                out.append((attempt, parsed[1]))
        return out

    def _tried(self, ctx: ProposeContext) -> set:
        problem = self.recognition.problem
        on_gpu = self._on_gpu(ctx)
        return {configs.launch_key(problem.family, cfg, problem, on_gpu) for _, cfg in self._mine(ctx)}

    def _best(self, ctx: ProposeContext):
        parsed = configs.parse_note(ctx.best_note or "")
        return parsed[1] if parsed and parsed[0] == self.recognition.family else None

    @staticmethod
    def _on_gpu(ctx: ProposeContext) -> bool:
        return bool(ctx.analysis.gpu)

    @staticmethod
    def _sms(ctx: ProposeContext) -> int:
        return configs.H200_SMS     # NOTE: the analysis names the GPU, not its SM count

    def _choices(self, ctx: ProposeContext) -> list[configs.Choice]:
        problem = self.recognition.problem
        n = max(1, ctx.n)
        tried = self._tried(ctx)
        best = self._best(ctx)
        if best is None:
            return configs.first_round(problem, self._on_gpu(ctx), n, tried)
        # the diagnosis describes the best kernel; it steers the walk only when that kernel is one of ours
        return configs.next_round(problem, best, ctx.diagnosis, self._on_gpu(ctx), n, tried, sms=self._sms(ctx))

    # -- Proposer --------------------------------------------------------------------------------

    def exhausted(self, ctx: ProposeContext) -> str | None:
        rec = self.recognition
        if not rec.supported:
            return rec.reason
        if ctx.backend not in ("triton", "", None):
            return f"the heuristic proposer writes Triton kernels only; for --backend {ctx.backend} {LLM_HINT}"
        stop = configs.stop_reason(ctx.diagnosis)
        if stop:
            return stop
        mine = self._mine(ctx)
        passed = [a for a, _ in mine if a.status == "ok"]
        if len(mine) >= MAX_FAILED_CONFIGS and not passed:
            last = mine[-1][0]
            return (f"the {rec.family} template failed on {len(mine)} configurations "
                    f"(last: {last.status}: {last.reason}); {LLM_HINT}")
        if not self._choices(ctx):
            best = self._best(ctx)
            around = f" around {configs.describe(best)}" if best is not None else ""
            return f"every configuration{around} worth trying has been tried ({len(mine)} so far)"
        return None

    def propose(self, ctx: ProposeContext) -> list[Proposal]:
        if self.exhausted(ctx):
            return []
        rec = self.recognition
        emit = _emitter(rec.family)
        account = rec.describe()
        return [
            Proposal(source=emit(rec, choice.config, choice.note), note=choice.note, prompt=account,
                     response=choice.note)
            for choice in self._choices(ctx)
        ]
