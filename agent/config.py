"""How `kgen optimize` runs: one frozen dataclass, one field per command-line flag.

    from agent.config import OptimizeConfig
    config = OptimizeConfig(max_iters=5, target=1.2)
    config.proposer_name()      # "openai" when an endpoint is configured, else "heuristic"

Defaults are what a user would choose: Triton, one candidate per round, ten
rounds, stop once the kernel beats the faster of eager and torch.compile.
Environment variables: `KGEN_RESULTS` (where results go), `KGEN_MODEL` (the
model, when --model is not given), and the OpenAI client's own
`OPENAI_API_KEY`/`OPENAI_BASE_URL`. The API key is never a field here: it stays
in the environment and never reaches the results.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from agent.proposers import PROPOSERS as PROPOSER_CHOICES
from verifier.records import TIMING_METHODS, VerifyConfig

BACKENDS = ("triton", "cuda")
PROPOSERS = ("auto", *PROPOSER_CHOICES.names)   # "auto": openai when an endpoint is configured, else heuristic
DEVICES = ("auto", "cpu", "cuda")
# What a config stored before a setting existed was run with (a run or board resumed keeps it).
STORED_BEFORE = {"timing": "events"}


def _results_default() -> str:
    return os.environ.get("KGEN_RESULTS") or "results"


@dataclass(frozen=True)
class OptimizeConfig:
    """Everything one optimize run needs to know besides the task."""

    backend: str = "triton"             # --backend: the kernel language asked of the proposer
    proposer: str = "auto"              # --proposer: "auto" picks openai when an endpoint is configured
    model: str | None = None            # --model: None means $KGEN_MODEL, else the proposer's default
    base_url: str | None = None         # --base-url: an OpenAI-compatible endpoint; None means $OPENAI_BASE_URL
    temperature: float | None = None    # --temperature: None means the proposer's default
    candidates: int = 1                 # --candidates: proposals per round
    max_iters: int = 10                 # --max-iters: rounds at most
    target: float = 1.0                 # --target: stop at this speedup over the faster of eager and torch.compile
    sol: float | None = None            # --sol: also stop at this % of speed-of-light (SOL time / kernel time)
    patience: int = 4                   # --patience: stop after this many rounds without a better kernel
    budget_usd: float | None = None     # --budget-usd: stop once the proposer has cost this much
    budget_tokens: int | None = None    # --budget-tokens: stop once this many tokens were used
    timeout_s: float | None = None      # --timeout: stop after this many seconds of wall-clock time
    device: str = "auto"                # --device: "auto" uses CUDA when present
    keep_going: bool = False            # --keep-going: do not stop when the goal is met; spend the limits
    verify_timeout_s: float = 180.0     # --verify-timeout: wall-clock limit for one candidate's verification
    timing: str = "graph"               # --timing: "graph" (the device's time), "events" (the host's cost included) or "kernelbench"
    results_dir: str = field(default_factory=_results_default)   # --results: root of the results store
    small_shapes: dict[str, Any] | None = field(default=None, hash=False)   # --small-shapes: size constants for a CPU check
    memory_budget_gib: float | None = None  # --memory-budget: GiB one verification may hold at once (None: what is free)

    def __post_init__(self) -> None:
        # NOTE: these are kgen's own misuse, so they raise; the message names the flag.
        if self.backend not in BACKENDS:
            raise ValueError(f"--backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}")
        if self.proposer not in PROPOSERS:
            raise ValueError(f"--proposer must be one of {', '.join(PROPOSERS)}, got {self.proposer!r}")
        if self.device not in DEVICES:
            raise ValueError(f"--device must be one of {', '.join(DEVICES)}, got {self.device!r}")
        if self.timing not in TIMING_METHODS:
            raise ValueError(f"--timing must be one of {', '.join(TIMING_METHODS)}, got {self.timing!r}")
        for flag, value in (("--candidates", self.candidates), ("--max-iters", self.max_iters),
                            ("--patience", self.patience)):
            if value < 1:
                raise ValueError(f"{flag} must be at least 1, got {value}")
        if self.target <= 0:
            raise ValueError(f"--target must be a positive speedup, got {self.target}")
        if self.sol is not None and not 0 < self.sol <= 100:
            raise ValueError(f"--sol must be a percentage in (0, 100], got {self.sol}")
        for flag, value in (("--budget-usd", self.budget_usd), ("--budget-tokens", self.budget_tokens),
                            ("--timeout", self.timeout_s), ("--verify-timeout", self.verify_timeout_s)):
            if value is not None and value <= 0:
                raise ValueError(f"{flag} must be positive, got {value}")

    @property
    def results_path(self) -> Path:
        return Path(self.results_dir)

    def verify_config(self, device: str, results_root: str | Path | None = None) -> VerifyConfig:
        """How the verifier checks this run's candidates on `device` ("cuda" or "cpu"); the baselines are
        cached under `results_root` (default: results_dir), the store the run lives in."""
        root = Path(self.results_dir if results_root is None else results_root)
        budget = None if self.memory_budget_gib is None else int(self.memory_budget_gib * 2**30)
        return VerifyConfig(device=device, timeout_s=self.verify_timeout_s, cache_dir=root / "baselines",
                            timing=self.timing, memory_budget_bytes=budget)

    def proposer_name(self, env: Mapping[str, str] | None = None) -> str:
        """The proposer this config selects: "auto" is openai when an endpoint or key is configured."""
        if self.proposer != "auto":
            return self.proposer
        env = os.environ if env is None else env
        if self.base_url or env.get("OPENAI_API_KEY") or env.get("OPENAI_BASE_URL"):
            return "openai"
        return "heuristic"

    def proposer_problems(self, env: Mapping[str, str] | None = None) -> tuple[list[str], list[str]]:
        """(errors, notes) for settings the chosen proposer cannot honour: an error stops the command before
        a run is stored, a note says what is ignored."""
        errors, notes = [], []
        if self.proposer_name(env) == "heuristic":
            if self.backend != "triton":
                errors.append(f"the heuristic proposer writes Triton kernels only; --backend {self.backend} "
                              "needs an LLM (--model, with OPENAI_API_KEY or --base-url)")
            if self.temperature is not None:
                notes.append("--temperature is ignored: the heuristic proposer samples nothing")
            if self.model:
                notes.append("--model is ignored: no LLM endpoint is configured (set OPENAI_API_KEY, "
                             "OPENAI_BASE_URL or --base-url), so the heuristic proposer runs")
        return errors, notes

    def model_name(self, env: Mapping[str, str] | None = None) -> str | None:
        env = os.environ if env is None else env
        return self.model or env.get("KGEN_MODEL") or None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "OptimizeConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in {**STORED_BEFORE, **data}.items() if k in known})

    def replace(self, **changes: Any) -> "OptimizeConfig":
        return dataclasses.replace(self, **changes)
