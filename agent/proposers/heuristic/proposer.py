"""The heuristic proposer: Triton kernels from templates, no LLM, configurations steered by the profiler.

    proposer = HeuristicProposer("tasks/softmax.py")
    proposals = proposer.propose(ctx)        # up to ctx.n candidates, each a full ModelNew source
    proposer.exhausted(ctx)                  # why it has nothing new to try, or None

It recognises the reference's op family once (recognise.py), then each round
emits the family's template with the configurations the walk picks
(configs.py): round 1 a default for the benchmark size, later rounds the moves
the diagnosis of the best kernel calls for. Each proposal's note names its
configuration and the reason; notes are how later rounds (and a resumed run)
know what was tried. Beside the templates runs a second track, Inductor's own
kernels for the task (inductor.py, the seed); seeded.py plans each round over
both (on the CPU the template first where one exists, the seed where none does;
on a GPU both in round one). A reference neither covers gives no proposals, and
`exhausted` says why and what to do instead.
"""

from __future__ import annotations

from pathlib import Path

from agent.proposers.base import Proposal, ProposeContext, Proposer
from agent.proposers.heuristic import configs
from agent.proposers.heuristic.recognise import Recognition, recognise
from agent.proposers.heuristic.seeded import MAX_FAILED_CONFIGS, SeedTrack, plan_round  # noqa: F401


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
        self.task = task                            # a Task (its CPU check's small sizes too) or a path
        self.task_path = Path(getattr(task, "path", task))
        self._recognition: Recognition | None = None
        self.seeds = SeedTrack(task)      # Inductor's kernels for the task, captured on first need
        self._planned = None

    @property
    def recognition(self) -> Recognition:
        if self._recognition is None:
            self._recognition = recognise(self.task)
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

    # -- Proposer --------------------------------------------------------------------------------

    def _plan(self, ctx: ProposeContext):
        # exhausted() and propose() are asked about the same context in turn: plan the round once
        key = (id(ctx), ctx.round, len(ctx.history), ctx.best_note)
        if self._planned is None or self._planned[0] != key:
            self._planned = (key, plan_round(self, ctx))
        return self._planned[1]

    def exhausted(self, ctx: ProposeContext) -> str | None:
        return self._plan(ctx).reason or None

    def propose(self, ctx: ProposeContext) -> list[Proposal]:
        return list(self._plan(ctx).proposals)
