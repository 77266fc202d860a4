"""The proposers `kgen optimize --proposer` offers, by name; each factory imports its package only when chosen.

    from agent.proposers import PROPOSERS, make_proposer
    PROPOSERS.names                          # ("openai", "heuristic")
    proposer = make_proposer(config, task)   # the one OptimizeConfig selects ("auto": openai when configured)

`base.py` is what every proposer is; `openai/` asks any OpenAI-compatible
endpoint; `heuristic/` writes Triton kernels from templates with no LLM.
A factory raises ProposerError saying what to configure when it cannot build
its proposer.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from agent.registry import Registry

if TYPE_CHECKING:
    from agent.config import OptimizeConfig
    from agent.proposers.base import Proposer
    from verifier.records import Task

PROPOSERS: "Registry[Proposer]" = Registry("proposer", flag="--proposer")
DEFAULT_OPENAI_MODEL = "gpt-4.1"   # on OpenAI's own endpoint when neither --model nor KGEN_MODEL says


@PROPOSERS.register("openai")
def _openai(config: "OptimizeConfig", task: "Task") -> "Proposer":
    """Any OpenAI-compatible chat endpoint (OpenAI, vLLM, SGLang, Ollama)."""
    from agent.proposers.base import ProposerError
    from agent.proposers.openai import DEFAULT_BASE_URL, OpenAIConfig, OpenAIProposer
    from agent.store import scrub_url

    model = config.model_name()
    if model is None:
        endpoint = config.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        if endpoint.rstrip("/") != DEFAULT_BASE_URL:
            raise ProposerError(f"--model is needed for the endpoint {scrub_url(endpoint)}: the name of a "
                                "model it serves (or set KGEN_MODEL)")
        model = DEFAULT_OPENAI_MODEL
    options: dict = {"model": model, "base_url": config.base_url}
    if config.temperature is not None:
        options["temperature"] = config.temperature
    return OpenAIProposer(OpenAIConfig(**options))


@PROPOSERS.register("heuristic")
def _heuristic(config: "OptimizeConfig", task: "Task") -> "Proposer":
    """Triton kernels from templates, no LLM."""
    from agent.proposers.base import ProposerError

    try:
        from agent.proposers.heuristic import HeuristicProposer
    except ImportError as exc:
        raise ProposerError(
            f"the built-in heuristic proposer cannot be loaded ({exc}); configure an LLM instead: "
            "set OPENAI_API_KEY (OpenAI), or OPENAI_BASE_URL / --base-url for any OpenAI-compatible "
            "endpoint (vLLM, SGLang, Ollama), and --model") from exc
    return HeuristicProposer(task)


def make_proposer(config: "OptimizeConfig", task: "Task") -> "Proposer":
    """The proposer the config selects; a ProposerError says what to configure when it cannot be built."""
    return PROPOSERS.make(config.proposer_name(), config=config, task=task)
