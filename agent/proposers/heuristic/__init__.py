"""kgen's built-in proposer: Triton kernels from templates, no LLM, guided by the profiler's diagnosis.

    from agent.proposers.heuristic import HeuristicProposer
    proposer = HeuristicProposer("tasks/matmul.py")

Modules: recognise (the reference's op family, from torch.export), program (what was recognised),
expression (expression trees as Triton statements), pointwise / rowwise / matmul (one template each),
modelnew (ModelNew and the parameter holders), configs (configurations and the diagnosis-steered walk),
proposer (the Proposer itself).
"""

from agent.proposers.heuristic.proposer import HeuristicProposer

__all__ = ["HeuristicProposer"]
