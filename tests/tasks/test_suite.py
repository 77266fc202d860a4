"""Tests of the task suite in tasks/: every file keeps the task contract and is usable on a CPU.

Run: .venv/bin/python -m pytest tests/tasks/test_suite.py -q

Benchmark shapes are checked on the meta device (shapes and dtypes without memory), so the
whole file runs in seconds; only two cheap tasks build their real benchmark inputs.
"""

import ast
import importlib.util
from pathlib import Path

import pytest
import torch
import torch.nn as nn
from torch.utils.flop_counter import FlopCounterMode

TASKS_DIR = Path(__file__).resolve().parents[2] / "tasks"
TASK_FILES = sorted(TASKS_DIR.glob("*.py"))
SMALL_SUITE = TASKS_DIR / "suite-small.txt"

REQUIRED_TASKS = {
    "matmul", "matmul_bf16", "linear_bias_gelu", "bmm", "softmax", "log_softmax", "layernorm",
    "rmsnorm", "gelu", "swiglu", "pointwise_chain", "sum_dim", "mean_dim", "max_dim",
    "cross_entropy", "sdpa", "transpose", "cumsum",
}
CONTRACT = ("get_inputs", "get_init_inputs", "get_small_inputs")

# H200 rates a benchmark-shape estimate uses (DESIGN.md's measured facts).
HBM_BYTES_PER_S = 4.0e12
MATMUL_FLOPS_PER_S = {torch.float32: 51e12, torch.bfloat16: 700e12}
MIN_BENCHMARK_MS = 0.1   # below this, launch overhead and timer noise dominate
MAX_BENCHMARK_MS = 5.0   # above this, a leaderboard run over the suite gets slow
MAX_SMALL_ELEMENTS = 1 << 20  # the Triton interpreter runs ~1 s per million elements touched


def load_task(path: Path):
    spec = importlib.util.spec_from_file_location(f"kgen_task_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def tensors(values) -> list[torch.Tensor]:
    return [v for v in values if isinstance(v, torch.Tensor)]


def run_small(module, seed: int):
    torch.manual_seed(seed)
    model = module.Model(*module.get_init_inputs())
    inputs = module.get_small_inputs()
    with torch.no_grad():
        return inputs, model(*inputs)


task_params = pytest.mark.parametrize("path", TASK_FILES, ids=[p.stem for p in TASK_FILES])


def test_suite_holds_every_required_task():
    assert REQUIRED_TASKS <= {p.stem for p in TASK_FILES}


def test_small_suite_lists_four_existing_tasks():
    names = [line.strip() for line in SMALL_SUITE.read_text().splitlines() if line.strip()]
    assert len(names) == 4
    for name in names:
        assert (SMALL_SUITE.parent / name).is_file(), name


@task_params
def test_task_defines_the_contract(path):
    module = load_task(path)
    assert isinstance(module.Model, type) and issubclass(module.Model, nn.Module)
    for name in CONTRACT:
        assert callable(getattr(module, name, None)), f"{path.name} lacks {name}()"


@task_params
def test_task_opens_with_a_docstring(path):
    doc = ast.get_docstring(ast.parse(path.read_text()))
    assert doc and "Benchmark shape" in doc, f"{path.name}: docstring must state the benchmark shape"


@task_params
def test_tolerance_overrides_are_explained(path):
    # A looser tolerance hides wrong kernels: each override must be small and argued for in the
    # docstring (the measured error of the reference itself, say).
    module = load_task(path)
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    for name in ("ATOL", "RTOL"):
        if hasattr(module, name):
            value = getattr(module, name)
            assert isinstance(value, float) and 0 < value <= 1e-2, f"{name} = {value!r}"
            assert name in doc, f"{path.name} sets {name} without saying why in its docstring"


@task_params
def test_inputs_take_the_default_device(path):
    # The harness picks the device with torch.set_default_device; a task must not pin one.
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            assert all(k.arg != "device" for k in node.keywords), f"{path.name}:{node.lineno} passes device="
    module = load_task(path)
    with torch.device("meta"):
        inputs = tensors(module.get_inputs()) + tensors(module.get_small_inputs())
    assert inputs and all(t.device.type == "meta" for t in inputs)


@task_params
def test_small_inputs_run_on_cpu_with_finite_output(path):
    inputs, out = run_small(load_task(path), seed=0)
    assert all(t.device.type == "cpu" for t in tensors(inputs))
    assert isinstance(out, torch.Tensor)
    assert torch.isfinite(out.float()).all()


@task_params
def test_small_inputs_have_an_odd_dimension(path):
    shapes = [t.shape for t in tensors(load_task(path).get_small_inputs())]
    assert any(d % 2 == 1 for shape in shapes for d in shape), shapes


@task_params
def test_small_inputs_are_small(path):
    total = sum(t.numel() for t in tensors(load_task(path).get_small_inputs()))
    assert total <= MAX_SMALL_ELEMENTS


@task_params
def test_task_is_deterministic_under_a_seed(path):
    module = load_task(path)
    inputs_a, out_a = run_small(module, seed=3)
    inputs_b, out_b = run_small(module, seed=3)
    assert all(torch.equal(a, b) for a, b in zip(tensors(inputs_a), tensors(inputs_b)))
    assert torch.equal(out_a, out_b)


@task_params
def test_benchmark_shape_runs_long_enough_to_time(path):
    # Estimate on the meta device: bytes of inputs and output at HBM speed, or matmul FLOPs at
    # the inputs' dtype rate, whichever is slower; no memory is allocated.
    module = load_task(path)
    with torch.device("meta"):
        model = module.Model(*module.get_init_inputs())
        inputs = module.get_inputs()
        with FlopCounterMode(display=False) as flops:
            out = model(*inputs)
    floating = [t for t in tensors(inputs) if t.is_floating_point()]
    rate = MATMUL_FLOPS_PER_S[floating[0].dtype]
    moved = sum(t.nbytes for t in tensors(inputs)) + out.nbytes
    estimate_ms = max(moved / HBM_BYTES_PER_S, flops.get_total_flops() / rate) * 1e3
    assert MIN_BENCHMARK_MS <= estimate_ms <= MAX_BENCHMARK_MS, f"{estimate_ms:.3f} ms"


@pytest.mark.parametrize("name", ["matmul", "bmm"])
def test_cheap_benchmark_inputs_build_on_cpu(name):
    module = load_task(TASKS_DIR / f"{name}.py")
    with torch.device("meta"):
        expected = [(t.shape, t.dtype) for t in module.get_inputs()]
    torch.manual_seed(0)
    inputs = module.get_inputs()
    assert [(t.shape, t.dtype) for t in inputs] == expected
    assert all(t.device.type == "cpu" and torch.isfinite(t).all() for t in inputs)
