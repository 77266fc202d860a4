"""Shapes a CPU check can afford: a task's own small inputs, its full inputs when they fit, or derived ones.

On a machine without a GPU, candidates run under the Triton interpreter,
which is slow (a 1024^3 matmul took 29 s) and holds every tensor in host
memory. KernelBench task files have no `get_small_inputs()`, and their
inputs run to gigabytes (ReLU: 4096 x 393216 fp32). `plan_cpu_check` decides,
before any candidate runs, what the CPU check uses:

1. `--small-shapes batch_size=7,dim=129` (manual overrides), when given;
2. the task's `get_small_inputs()` (with `get_small_init_inputs()` where the
   sizes are also in the constructor's arguments);
3. `get_inputs()` as it is, when its footprint (inputs + outputs +
   parameters, counted once on the meta device by verifier.physics) fits
   `CpuBudget`;
4. else derived small shapes: the file's module-level integer constants
   (`batch_size = 4096`, `dim = 393216`, `normalized_shape = (64, 256)`) that
   feed both `get_inputs()` and `get_init_inputs()` are rewritten to small,
   mostly odd values before the file runs (verifier.task.import_task_module
   with overrides), keeping equal constants equal; constants of 16 or less
   (kernel sizes, strides, groups, a reduced dim's index) are left alone;
   where the reference rejects free values (GroupNorm's channels must divide
   by its groups, a view into heads), divisibility between the constants is
   kept as well. Each try runs the reference on the meta device first, then the
   chosen one for real on the CPU. The largest shapes under the budget's
   target win.

When none of that works, a `TaskError` names what to add, within
`SEARCH_DEADLINE_S` seconds.

    python -m verifier.shapes TASK.py [NAME=VALUE,...]   # what a CPU check of TASK would use

Derived shapes prove the kernel right at those shapes only: docs/kernelbench.md
says what they do not show.
"""

from __future__ import annotations

import ast
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from verifier.task import TaskError, import_task_module, size_constants

KEEP_AT_MOST = 16          # constants this small stay: kernel sizes, strides, groups, heads, a dim's index
EXPONENTS = (0.7, 0.65, 0.6, 0.55, 0.5, 0.45, 0.4, 0.35, 0.3, 0.25, 0.2, 0.15)   # new ~ old ** exponent
SMALLEST = 3               # no derived size goes below this (1 and 2 hide indexing bugs)
SEARCH_DEADLINE_S = 4.0    # the search gives up after this long: a task error must come fast


@dataclass(frozen=True)
class CpuBudget:
    """What one CPU check may move and compute: the Triton interpreter's pace and host memory set it."""

    max_bytes: int = 8 * 2**20         # full-size inputs + outputs + parameters a check may use as they are
    max_flops: float = 1e8             # full-size matmul/conv FLOPs the same (1024^3 fp32: 2.1e9 FLOP, 29 s)
    target_bytes: int = 2 * 2**20      # derived shapes aim at most this (512K fp32 elements, in and out together)
    target_flops: float = 2e7          # and at most this


CPU_BUDGET = CpuBudget()


@dataclass(frozen=True)
class Footprint:
    """What one call of the reference moves and computes, counted on the meta device (no memory, no work)."""

    bytes: int                          # inputs + outputs + parameters and buffers, each once
    flops: int                          # matmul/conv/attention FLOPs; pointwise ops and reductions count 0
    input_shapes: tuple                 # shapes of the tensor inputs, in order
    forward_ran: bool = True            # False: the reference does not run on meta; outputs and FLOPs not counted

    def fits(self, max_bytes: float, max_flops: float) -> bool:
        return self.bytes <= max_bytes and self.flops <= max_flops

    def describe(self) -> str:
        text = f"{self.bytes / 1e6:.4g} MB moved"
        if self.flops:
            text += f", {self.flops / 1e9:.3g} GFLOP"
        return text if self.forward_ran else text + " (inputs and parameters only: the reference does not run on meta)"


@dataclass(frozen=True)
class CpuPlan:
    """What a CPU check of one task runs on."""

    how: str                                            # "small_inputs", "fits", "derived" or "manual"
    overrides: dict = field(default_factory=dict)       # constant -> value, for import_task_module; {} for none
    note: str = ""                                      # for the verdict: "checked on derived shapes ..."
    footprint: Footprint | None = None                  # of the shapes the check uses, when measured


def shapes_text(shapes) -> str:
    return ", ".join(f"({', '.join(str(d) for d in s)})" if s else "()" for s in shapes) or "no tensors"


def measure(module) -> Footprint:
    """The footprint of the task as imported, on the meta device: `.cuda()` and explicit devices land there too."""
    import torch

    from verifier.devices import on_device
    from verifier.physics import count_work

    with torch.device("meta"), on_device("meta"):
        init = list(module.get_init_inputs())
        model = module.Model(*init)
        inputs = list(module.get_inputs())
        shapes = tuple(tuple(x.shape) for x in inputs if isinstance(x, torch.Tensor))
        try:
            work = count_work(model, inputs)
        except Exception:  # noqa: BLE001 - no meta kernel for some op: count what is known
            tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
            tensors += list(model.parameters()) + list(model.buffers()) if isinstance(model, torch.nn.Module) else []
            return Footprint(bytes=sum(t.numel() * t.element_size() for t in tensors), flops=0,
                             input_shapes=shapes, forward_ran=False)
    return Footprint(bytes=work.bytes, flops=work.flops, input_shapes=shapes)


def run_for_real(path: Path, overrides: dict) -> Footprint:
    """Build the reference and call it once on the CPU, as a CPU check would; its footprint, counted on real tensors."""
    import torch

    from verifier.physics import count_work

    module = _import(path, overrides, device="cpu")
    with torch.random.fork_rng(devices=[]), torch.no_grad():   # leaves the caller's RNG as it was
        torch.manual_seed(0)
        model = module.Model(*module.get_init_inputs())
        inputs = list(module.get_inputs())
        work = count_work(model, inputs)
        outputs = model(*inputs)
    # NOTE: an empty output would make every comparison vacuous: a kernel that computes nothing would pass
    if any(t.numel() == 0 for t in _tensors(outputs)):
        raise ValueError("the reference's output is empty at these sizes")
    return Footprint(bytes=work.bytes, flops=work.flops,
                     input_shapes=tuple(tuple(x.shape) for x in inputs if isinstance(x, torch.Tensor)))


def _tensors(obj):
    import torch

    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from _tensors(item)


def _import(path: Path, overrides: dict, device: str | None = None):
    name = f"kgen_shapes_{path.stem}"
    try:
        return import_task_module(path, name, overrides=overrides or None, device=device)
    finally:
        sys.modules.pop(name, None)


def plan_cpu_check(path: str | Path, small_shapes: dict | None = None,
                   budget: CpuBudget = CPU_BUDGET) -> CpuPlan:
    """What the CPU check of the task at `path` runs on; TaskError with what to add when nothing fits."""
    path = Path(path).resolve()
    module = _import(path, {})
    has_small = callable(getattr(module, "get_small_inputs", None))
    if callable(getattr(module, "get_small_init_inputs", None)) and not has_small:
        raise TaskError(f"{path.name}: defines get_small_init_inputs() but no get_small_inputs(): the CPU check "
                        f"needs both (the small model and the small inputs must match)")
    if small_shapes:
        return _manual(path, dict(small_shapes), budget)
    if has_small:
        return CpuPlan(how="small_inputs")
    try:
        full = measure(module)
    except Exception:  # noqa: BLE001 - the inputs need real data (.item(), numpy): their size is unknown here
        return CpuPlan(how="fits", note="sizes not measured: get_inputs() or Model does not run on the meta device")
    if full.fits(budget.max_bytes, budget.max_flops):
        return CpuPlan(how="fits", footprint=full)
    return _derive(path, full, budget)


def _manual(path: Path, overrides: dict, budget: CpuBudget) -> CpuPlan:
    given = ",".join(f"{k}={_value_text(v)}" for k, v in overrides.items())
    try:
        before = measure(_import(path, {}))
    except Exception:  # noqa: BLE001
        before = None
    try:
        after = measure(_import(path, overrides))   # NOTE: on meta first: sizes still too large must not allocate
        if after.fits(budget.max_bytes, budget.max_flops):
            after = run_for_real(path, overrides)
    except TaskError:
        raise
    except Exception as exc:  # the user's sizes break the reference: theirs to change
        raise TaskError(f"{path.name}: --small-shapes {given}: the reference raised {_one_line(exc)}") from exc
    if not after.fits(budget.max_bytes, budget.max_flops):
        raise TaskError(f"{path.name}: --small-shapes {given} still needs {after.describe()}, more than the CPU check's "
                        f"{budget.max_bytes / 1e6:.3g} MB and {budget.max_flops / 1e9:.3g} GFLOP: give smaller "
                        f"values (its constants: {_constants_text(path)})")
    was = f" instead of {shapes_text(before.input_shapes)}" if before else ""
    return CpuPlan(how="manual", overrides=overrides, footprint=after,
                   note=f"checked on the shapes --small-shapes {given} gives, {shapes_text(after.input_shapes)}{was}")


def _derive(path: Path, full: Footprint, budget: CpuBudget) -> CpuPlan:
    started = time.perf_counter()
    constants = size_constants(ast.parse(path.read_text(encoding="utf-8")))
    values = sorted({v for c in constants.values() for v in (c if isinstance(c, tuple) else (c,))})
    large = [v for v in values if v > KEEP_AT_MOST]
    if not large:
        raise _no_derivation(path, full, budget, "it has no module-level integer size constants above "
                                                 f"{KEEP_AT_MOST} (sizes written into get_inputs() or Model itself)")
    tried: set = set()
    last_problem, smallest = "", None
    over_target: list[tuple[dict, Footprint]] = []   # ran on meta, over the target but within the budget
    for keep_divisibility in (False, True):
        for exponent in EXPONENTS:
            if time.perf_counter() - started > SEARCH_DEADLINE_S:
                raise _no_derivation(path, full, budget, f"no derived shapes were found within {SEARCH_DEADLINE_S:g} s"
                                     + (f"; the last try: {last_problem}" if last_problem else ""))
            mapping = shrink(values, exponent, keep_divisibility)
            overrides = {name: _mapped(v, mapping) for name, v in constants.items() if _mapped(v, mapping) != v}
            key = tuple(sorted(overrides.items()))
            if key in tried:
                continue
            tried.add(key)
            try:
                small = measure(_import(path, overrides))
            except Exception as exc:  # noqa: BLE001 - these sizes break the reference: try others
                last_problem = f"{_overrides_text(overrides)}: {_one_line(exc)}"
                continue
            if not small.fits(budget.target_bytes, budget.target_flops):
                smallest = small if smallest is None or small.bytes < smallest.bytes else smallest
                if small.fits(budget.max_bytes, budget.max_flops):
                    over_target.append((overrides, small))
                continue   # still too large: a smaller exponent next
            plan, problem = _confirm(path, overrides, constants, full, budget)
            if plan is not None:
                return plan
            last_problem = problem
    # NOTE: nothing under the target (sizes the file does not let shrink, such as a conv's fixed channels):
    # the smallest that still fits the budget, though the check will be slower
    for overrides, _ in sorted(over_target, key=lambda pair: (pair[1].flops, pair[1].bytes)):
        plan, problem = _confirm(path, overrides, constants, full, budget)
        if plan is not None:
            return plan
        last_problem = problem
    reasons = []
    if smallest is not None:
        reasons.append(f"the smallest derived shapes need {smallest.describe()}")
    if last_problem:
        reasons.append(f"the reference rejected the others ({last_problem})" if smallest else
                       f"the reference rejected the derived sizes ({last_problem})")
    raise _no_derivation(path, full, budget, "; ".join(reasons) or "no sizes to try")


def _confirm(path: Path, overrides: dict, constants: dict, full: Footprint,
             budget: CpuBudget) -> tuple[CpuPlan | None, str]:
    """The plan for these overrides once the reference ran on them for real; else (None, why not)."""
    try:
        real = run_for_real(path, overrides)
    except Exception as exc:  # noqa: BLE001 - it ran on meta but not for real (data-dependent code)
        return None, f"{_overrides_text(overrides)}: on the CPU: {_one_line(exc)}"
    if not real.fits(budget.max_bytes, budget.max_flops):
        return None, f"{_overrides_text(overrides)}: {real.describe()} on the CPU"
    changes = ", ".join(f"{n} {_value_text(constants[n])}->{_value_text(v)}" for n, v in overrides.items())
    note = (f"checked on derived shapes {shapes_text(real.input_shapes)} instead of "
            f"{shapes_text(full.input_shapes)} ({changes}): no get_small_inputs(), and the full inputs need "
            f"{full.describe()}")
    return CpuPlan(how="derived", overrides=overrides, note=note, footprint=real), ""


def shrink(values, exponent: float, keep_divisibility: bool = False) -> dict[int, int]:
    """Each value's small stand-in: ~value ** exponent, odd where it can be, equal values equal.

    Values of KEEP_AT_MOST or less stay. With `keep_divisibility`, a value that the original values
    divided (1024 by 8, 8192 by 256) is a multiple of their stand-ins, so `dim % heads == 0` still holds.
    """
    new: dict[int, int] = {}
    for v in sorted(set(values)):
        if v <= KEEP_AT_MOST:
            new[v] = v
            continue
        step = 1
        if keep_divisibility:
            for u in new:
                if u > 1 and v % u == 0:
                    step = math.lcm(step, new[u])
        new[v] = _near(max(float(SMALLEST), v ** exponent), step, v)
    return new


def _near(raw: float, step: int, cap: int) -> int:
    """A multiple of `step` near `raw`, odd when `step` is, at most `cap`, at least SMALLEST where it can be."""
    k = max(1, round(raw / step))
    if step % 2 and k % 2 == 0:
        # NOTE: odd on purpose: a size no power of two divides leaves a partial block, where masking bugs show
        k = k - 1 if k > 1 and abs((k - 1) * step - raw) <= abs((k + 1) * step - raw) else k + 1
    value = k * step
    if value > cap:
        value = max(step, cap // step * step) if cap >= step else cap
    return value


def _mapped(value, mapping: dict[int, int]):
    if isinstance(value, tuple):
        return tuple(mapping[v] for v in value)
    return mapping[value]


def _no_derivation(path: Path, full: Footprint, budget: CpuBudget, why: str) -> TaskError:
    return TaskError(
        f"{path.name}: its inputs are too large for a CPU check ({full.describe()}; the Triton interpreter's budget is "
        f"{budget.max_bytes / 1e6:.3g} MB and {budget.max_flops / 1e9:.3g} GFLOP) and no small shapes could be derived: "
        f"{why}. Add get_small_inputs() to the task (and get_small_init_inputs() where get_init_inputs() sets sizes), "
        f"or pass --small-shapes NAME=VALUE,... (its constants: {_constants_text(path)})")


def _constants_text(path: Path) -> str:
    constants = size_constants(ast.parse(path.read_text(encoding="utf-8")))
    return ", ".join(f"{n}={_value_text(v)}" for n, v in constants.items()) or "none"


def _overrides_text(overrides: dict) -> str:
    return ",".join(f"{k}={_value_text(v)}" for k, v in overrides.items())


def _value_text(value) -> str:
    if isinstance(value, (tuple, list)):
        return "(" + ",".join(str(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    return str(value)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


def parse_small_shapes(text: str) -> dict[str, int | tuple[int, ...]]:
    """`batch_size=7,dim=129,shape=(3,5)` -> {"batch_size": 7, "dim": 129, "shape": (3, 5)}; ValueError if malformed."""
    out: dict[str, int | tuple[int, ...]] = {}
    rest = text.strip()
    while rest:
        name, eq, rest = rest.partition("=")
        name = name.strip()
        if not eq or not name.isidentifier():
            raise ValueError(f"expected NAME=VALUE,... (e.g. batch_size=7,dim=129), got {text!r}")
        rest = rest.strip()
        if rest.startswith("("):
            inner, close, rest = rest[1:].partition(")")
            if not close:
                raise ValueError(f"{name}: an unclosed tuple in {text!r}")
            parts = [p.strip() for p in inner.split(",") if p.strip()]
            value = tuple(_positive(name, p) for p in parts)
            rest = rest.strip().removeprefix(",")
        else:
            item, _, rest = rest.partition(",")
            value = _positive(name, item.strip())
        out[name] = value
        rest = rest.strip()
    if not out:
        raise ValueError("expected NAME=VALUE,... (e.g. batch_size=7,dim=129), got nothing")
    return out


def _positive(name: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name}: {text!r} is not an integer") from None
    if value < 1:
        raise ValueError(f"{name}: must be at least 1, got {value}")
    return value


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 2
    try:
        plan = plan_cpu_check(argv[0], parse_small_shapes(argv[1]) if len(argv) > 1 else None)
    except (TaskError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"{plan.how}: {plan.note or 'the task as written'}")
    if plan.overrides:
        print("overrides: " + _overrides_text(plan.overrides))
    if plan.footprint:
        print(f"footprint: {plan.footprint.describe()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
