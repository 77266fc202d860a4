"""What the loop knows about a task before the first proposal: the `Analysis`, and the machine it runs on.

    from agent.analysis import analyze_task, device_and_gpu
    device, gpu = device_and_gpu("auto")                 # ("cuda", "NVIDIA H200") or ("cpu", "")
    analysis = analyze_task(task, device, gpu)           # shapes, dtypes, work, roofline, baselines
    print(analysis_line(analysis))

The device is resolved by the verifier (verifier.verify.resolve_device), the
one place that decides where candidates run; this module adds the GPU's name
and turns the verifier's error into the CLI's message. An Analysis is JSON
only at the edges (the LangGraph state, a proposer's prompt): `to_dict` keeps
the keys and their order as the prompt shows them, `from_dict` takes them back.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from verifier.records import Task, VerifyConfig

NO_CUDA = "--device cuda: torch sees no CUDA device here (use --device cpu or auto)"


def device_and_gpu(requested: str) -> tuple[str, str]:
    """("cuda" or "cpu", the GPU's name or "") for --device auto|cpu|cuda; ValueError when CUDA is missing."""
    from verifier.verify import resolve_device

    try:
        device = resolve_device(requested)
    except RuntimeError:
        raise ValueError(NO_CUDA) from None
    if device != "cuda":
        return "cpu", ""
    import torch

    return "cuda", torch.cuda.get_device_name()


@dataclass
class Peaks:
    """The peak rates the roofline used."""

    name: str                   # the peaks table's row, e.g. "H200"
    mem_gbps: float             # DRAM bandwidth, GB/s
    compute_tflops: float       # the compute roof for the task's dtype, TFLOP/s


@dataclass
class Analysis:
    """What a proposer should know about a task before writing a kernel. A field is None when not known."""

    gpu: str = ""                                   # the GPU's name, "" without one
    shapes: list[list[int] | None] | None = None    # each benchmark input's shape; None for a non-tensor
    dtypes: list[str] | None = None                 # each input's dtype ("float32"), or a non-tensor's text
    bytes: int | None = None                        # bytes the task must move at least (inputs, params, outputs)
    flops: int | None = None                        # FLOPs of matmul/conv/attention; None when none are counted
    flops_by_op: dict[str, int] | None = None       # the same FLOPs by aten op
    checked_on: str = ""                            # CPU: the small inputs correctness is checked on
    sol_ms: float | None = None                     # speed-of-light time on this GPU, ms
    floor_ms: float | None = None                   # the physics check's floor (a faster time is rejected), ms
    peaks: Peaks | None = None                      # the peak rates behind sol_ms and floor_ms
    baselines_ms: dict[str, float] = field(default_factory=dict)   # baseline name -> median time, ms
    note: str = ""                                  # what was not measured, and why

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: only what is known, in field order; baselines as {name: {"median_ms"}}."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None or value == "" or (f.name == "baselines_ms" and not value):
                continue
            if f.name == "peaks":
                value = dataclasses.asdict(value)
            if f.name == "baselines_ms":
                out["baselines"] = {k: {"median_ms": v} for k, v in value.items()}
                continue
            out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Analysis":
        """An Analysis from to_dict()'s form; an unknown key raises TypeError (a misspelt field fails loudly)."""
        data = dict(data)
        if "peaks" in data:
            data["peaks"] = Peaks(**data["peaks"])
        if "baselines" in data:
            data["baselines_ms"] = {k: v["median_ms"] for k, v in data.pop("baselines").items()}
        return cls(**data)

    def with_baselines(self, baselines_ms: dict[str, float]) -> "Analysis":
        """A copy with baselines added (those already known keep their times)."""
        return dataclasses.replace(self, baselines_ms={**baselines_ms, **self.baselines_ms})


def _describe_inputs(inputs) -> tuple[list, list]:
    import torch

    shapes, dtypes = [], []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            shapes.append(list(x.shape))
            dtypes.append(str(x.dtype).removeprefix("torch."))
        else:
            shapes.append(None)
            dtypes.append(f"{type(x).__name__} {x!r}"[:40])
    return shapes, dtypes


def analyze_task(task: Task, device: str, gpu: str, verify_config: VerifyConfig | None = None,
                 backend: str = "triton") -> Analysis:
    """What a proposer should know about a task before writing a kernel (see Analysis).

    Without a GPU, the work is counted for the benchmark inputs on torch's meta
    device (no memory, no compute), else for the small inputs; `checked_on`
    gives the small shapes the CPU checks use. Baselines are torch.compile's on
    a GPU, from the verifier's cache; eager joins with the first timed attempt.
    """
    import torch

    from verifier import physics
    from verifier.task import import_task_module

    module = import_task_module(task.path.resolve(), f"kgen_analysis_{task.name}")
    analysis = Analysis(gpu=gpu)
    notes: list[str] = []

    def count(on: str, make_inputs):
        torch.manual_seed(0)
        with torch.device(on):
            model = module.Model(*module.get_init_inputs())
            inputs = [x.to(on) if isinstance(x, torch.Tensor) else x for x in make_inputs()]
        work = physics.count_work(model.to(on).eval(), inputs)
        return inputs, work

    ways = [("cuda", "benchmark", module.get_inputs)] if device == "cuda" else \
        [("meta", "benchmark", module.get_inputs)] + \
        ([("cpu", "small", module.get_small_inputs)] if task.has_small_inputs else [])
    work = None
    failures = []
    for on, label, make_inputs in ways:
        try:
            inputs, work = count(on, make_inputs)
        except Exception as exc:   # the reference may not run on meta: the next way is tried
            first_line = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
            failures.append(f"{label} inputs on {on}: {type(exc).__name__}: {first_line}")
            continue
        analysis.shapes, analysis.dtypes = _describe_inputs(inputs)
        if label == "small":
            notes.append("shapes and work are the small inputs' (the reference does not run on the meta device)")
        analysis.bytes = work.bytes
        if work.flops:
            # NOTE: FlopCounterMode counts matmul, convolution and attention only; a pointwise or
            # reduction task has no FLOP figure rather than a false 0
            analysis.flops = work.flops
            analysis.flops_by_op = dict(work.flops_by_op)
        del inputs
        break
    else:
        notes.append("work not counted (" + "; ".join(failures) + ")")
    if device == "cuda":
        torch.cuda.empty_cache()

    if device != "cuda":
        if task.has_small_inputs:
            try:
                with torch.device("meta"):
                    small = module.get_small_inputs()
                analysis.checked_on = "small inputs " + ", ".join(
                    f"{s}:{d}" if s is not None else d for s, d in zip(*_describe_inputs(small)))
            except Exception:   # shapes for the prompt only; the verifier reports real failures
                pass
        notes.append("no GPU: kernels are checked for correctness under the Triton interpreter; nothing is timed"
                     if backend == "triton" else
                     "no GPU: CUDA kernels are only compiled (nvcc); nothing is run, checked or timed")
    elif work is not None:
        peaks = physics.peaks_for(gpu)
        if peaks is None:
            notes.append(physics.peaks_note(gpu))
        else:
            analysis.sol_ms = physics.sol_ms(work, peaks)
            analysis.floor_ms = physics.floor_ms(work, peaks)
            analysis.peaks = Peaks(name=peaks.name, mem_gbps=peaks.mem_gbps,
                                   compute_tflops=peaks.compute_tflops(work.dtype))
    if device == "cuda" and verify_config is not None and verify_config.baselines:
        # torch.compile is timed once per (GPU, task, torch) and cached by the verifier; eager is timed
        # with every candidate, and the first timed attempt adds it
        from verifier.verify import BaselineError, cached_baselines

        try:
            baselines = cached_baselines(task, verify_config)
        except BaselineError as exc:
            baselines = {}
            notes.append(str(exc))
        if baselines:
            analysis.baselines_ms = {k: t.median_ms for k, t in baselines.items()}
    analysis.note = "; ".join(notes)
    return analysis


def analysis_line(analysis: Analysis) -> str:
    """One line for a person: shapes, work, speed-of-light, or why nothing is timed."""
    parts = []
    if analysis.shapes is not None:
        parts.append(" ".join(f"{s}:{d}" if s is not None else d
                              for s, d in zip(analysis.shapes, analysis.dtypes or [])))
    if analysis.flops:
        parts.append(f"{analysis.flops / 1e9:.3g} GFLOP")
    if analysis.bytes is not None:
        parts.append(f"{analysis.bytes / 1e6:.4g} MB moved at least")
    if analysis.sol_ms is not None:
        parts.append(f"speed-of-light {analysis.sol_ms:.4g} ms on {analysis.gpu}")
    if analysis.baselines_ms:
        parts.append("baselines " + ", ".join(f"{k} {v:.4g} ms" for k, v in analysis.baselines_ms.items()))
    if analysis.note:
        parts.append(analysis.note)
    return "; ".join(parts)
