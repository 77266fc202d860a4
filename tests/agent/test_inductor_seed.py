"""Inductor-seeded candidates: captured from torch.compile on the CPU (its Triton backend), verified like any other.

Each seeded candidate goes through `verify()` as `kgen optimize` sends it (sandbox, static checks, op
audit, five trials on the small inputs under the Triton interpreter). Capturing a seed runs Inductor
(10-30 s a task here), so each task is captured once per session.
"""

import ast
from pathlib import Path

import pytest

from agent.analysis import Analysis
from agent.proposers.base import AttemptSummary, ProposeContext
from agent.proposers.heuristic import HeuristicProposer
from agent.proposers.heuristic.inductor import Seed, SeedUnavailable, capture, read_wrapper
from agent.proposers.heuristic.inductor_emit import (
    KernelChoice, SeedConfig, emit_candidate, launch_key, parse_seed_note, seed_first_round, seed_next_round,
)
from agent.proposers.heuristic.retime import branch_point, timings_by_config
from verifier.records import VerifyConfig
from verifier.task import load_task
from verifier.verify import verify

TASKS = Path(__file__).resolve().parents[2] / "tasks"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "inductor"
# one per family the templates cover, and the two they do not (cumsum, F.normalize's expand_as)
SEEDED = ["gelu", "pointwise_chain", "softmax", "layernorm", "rmsnorm", "max_dim", "cross_entropy", "transpose",
          "cumsum", "l2_normalize"]

_SEEDS: dict = {}


def seed_of(name: str):
    if name not in _SEEDS:
        _SEEDS[name] = capture(TASKS / f"{name}.py")
    return _SEEDS[name]


@pytest.mark.parametrize("name", SEEDED)
def test_seeded_candidate_passes_verification(name):
    seed = seed_of(name)
    assert isinstance(seed, Seed), seed
    task = load_task(TASKS / f"{name}.py")
    result = verify(task, emit_candidate(seed, SeedConfig()), VerifyConfig(device="cpu", timeout_s=240))
    assert result.status == "ok", (result.status, result.reason, result.feedback[-800:])
    assert result.trials == 5


def test_seeded_candidate_imports_only_torch_and_triton():
    source = emit_candidate(seed_of("layernorm"), SeedConfig())
    modules = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            modules |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            modules.add(node.module)
    assert modules <= {"torch", "torch.nn", "triton", "triton.language", "triton.language.extra"}, modules
    names = {n.attr for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Attribute)}
    assert "_inductor" not in names and "compile" not in names


def test_seeded_candidate_keeps_the_reference_parameter_names():
    source = emit_candidate(seed_of("layernorm"), SeedConfig())
    assert "self.get_parameter('ln.weight')" in source and "self.get_parameter('ln.bias')" in source


def test_seed_has_a_plan_for_the_small_and_the_benchmark_shapes():
    seed = seed_of("layernorm")
    assert [p.shapes for p in seed.plans] == [((67, 5120),), ((32768, 5120),)]


def test_an_extern_matmul_cannot_be_seeded_and_says_so():
    seed = capture(TASKS / "matmul.py")
    assert isinstance(seed, SeedUnavailable)
    assert str(seed).startswith("seed unavailable: inductor used extern mm"), seed


def test_a_wrapper_with_a_cpp_kernel_is_refused_with_a_reason():
    wrapper = (FIXTURES / "layernorm_small.py").read_text().replace("async_compile.triton(", "async_compile.cpp(", 1)
    plan = read_wrapper(wrapper, ((67, 5120),))
    assert isinstance(plan, SeedUnavailable) and "not Triton" in plan.reason, plan


def test_a_task_that_fails_to_build_is_a_reason_not_a_crash(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
                    "def get_inputs():\n    raise RuntimeError('no inputs today')\ndef get_init_inputs():\n    return []\n")
    seed = capture(path)
    assert isinstance(seed, SeedUnavailable) and "no inputs today" in seed.reason


def test_recorded_inductor_output_reads_into_a_plan():
    # Inductor's wrapper for tasks/layernorm.py's small inputs, recorded with torch 2.13 (CPU, triton backend)
    plan = read_wrapper((FIXTURES / "layernorm_small.py").read_text(), ((67, 5120),))
    assert not isinstance(plan, SeedUnavailable), plan
    [kernel] = plan.kernels
    assert kernel.grid_type == "Grid1D" and kernel.configs and "XBLOCK" in kernel.constexprs
    assert "ih_" in kernel.source or "tl.sum" in kernel.source
    assert plan.graph_inputs == ("arg0_1", "arg1_1", "arg2_1")


def test_recorded_cumsum_scan_becomes_tl_cumsum():
    plan = read_wrapper((FIXTURES / "cumsum_small.py").read_text(), ((127, 781),))
    assert not isinstance(plan, SeedUnavailable), plan
    assert "tl.cumsum(" in plan.kernels[0].source and "associative_scan" not in plan.kernels[0].source


# -- notes and the walk --------------------------------------------------------------------------------------

def test_seed_notes_read_back_into_their_configuration():
    cfg = SeedConfig((KernelChoice(1), KernelChoice(0, num_warps=8, num_stages=3)))
    assert parse_seed_note(f"inductor {cfg.describe()}: because") == cfg
    assert parse_seed_note("rowwise ONE_PASS_MAX=2048 LOOP_BLOCK=1024 TILE=4096 num_warps=4: x") is None


def test_seed_walk_answers_long_scoreboard_stalls_with_deeper_pipelining():
    seed = seed_of("layernorm")
    from profiler.records import Diagnosis, Stall

    diagnosis = Diagnosis(bound="memory", source="ncu", mem_sol_pct=50.0,
                          top_stalls=[Stall(reason="stall_long_scoreboard", ratio=1.2, share=0.6, fix="")])
    [move] = seed_next_round(seed, SeedConfig(), diagnosis, n=1, tried=set())
    assert move.config.choice(0).num_stages == seed.benchmark.kernels[0].configs[0].num_stages + 1
    assert "long-scoreboard" in move.note


def test_seed_walk_never_proposes_a_configuration_twice():
    seed = seed_of("layernorm")
    first = seed_first_round(seed, on_gpu=True, n=4, tried=set())
    from agent.proposers.heuristic.inductor_emit import launch_key
    keys = [launch_key(seed, c.config) for c in first]
    assert len(keys) == len(set(keys))
    again = seed_first_round(seed, on_gpu=True, n=4, tried=set(keys))
    assert again == []


# -- re-timing before branching ------------------------------------------------------------------------------

def test_two_best_within_the_spread_with_one_timing_each_are_timed_again():
    decision = branch_point({"a": [0.50], "b": [0.52], "c": [0.80]})
    assert decision.branch is None and decision.retime == ("a", "b")


def test_only_the_configuration_short_of_timings_is_timed_again():
    decision = branch_point({"a": [0.50, 0.51], "b": [0.52]})
    assert decision.retime == ("b",)


def test_a_gap_beyond_the_spread_branches_at_once():
    decision = branch_point({"a": [0.50], "b": [0.60]})
    assert decision.branch == "a" and decision.retime == ()


def test_after_re_timing_the_lower_median_wins():
    # a's first timing was lucky; b is faster on the median of its two
    decision = branch_point({"a": [0.48, 0.56, 0.55], "b": [0.52, 0.51]})
    assert decision.branch == "b"


def test_timings_group_by_configuration_and_skip_failures():
    history = [AttemptSummary(1, "ok", "", 0.5, 1.0, note="rowwise X=1: first"),
               AttemptSummary(2, "ok", "", 0.6, 1.0, note="rowwise X=1: re-timed: close"),
               AttemptSummary(3, "mismatch", "", None, None, note="rowwise X=2: next"),
               AttemptSummary(4, "ok", "", 0.4, 1.0, note="inductor k0=c0: seed")]
    assert timings_by_config(history, ("rowwise ",)) == {"rowwise X=1": [0.5, 0.6]}


# -- the proposer ----------------------------------------------------------------------------------------------

def ctx(gpu=False, n=1, history=(), best_note="", round_=1):
    return ProposeContext(task_name="t", task_source="", backend="triton", analysis=Analysis(gpu="NVIDIA H200") if gpu
                          else Analysis(), round=round_, n=n, history=list(history), best_note=best_note)


def test_on_the_cpu_the_template_comes_first_where_one_exists():
    proposer = HeuristicProposer(TASKS / "layernorm.py")
    [proposal] = proposer.propose(ctx())
    assert proposal.note.startswith("rowwise ")


@pytest.mark.parametrize("name", ["cumsum", "l2_normalize"])
def test_on_the_cpu_the_seed_comes_first_where_no_template_exists(name):
    proposer = HeuristicProposer(TASKS / f"{name}.py")
    assert not proposer.recognition.supported       # aten.cumsum; F.normalize's aten.expand_as
    proposer.seeds._seed = seed_of(name)
    [proposal] = proposer.propose(ctx())
    assert proposal.note.startswith("inductor k0=c0: ") and "class ModelNew" in proposal.source


def test_on_a_gpu_round_one_holds_both_the_template_and_the_seed():
    proposer = HeuristicProposer(TASKS / "layernorm.py")
    proposer.seeds._seed = seed_of("layernorm")
    notes = [p.note for p in proposer.propose(ctx(gpu=True, n=2))]
    assert notes[0].startswith("rowwise ") and notes[1].startswith("inductor ")


def test_on_a_gpu_the_two_best_are_re_timed_when_close():
    proposer = HeuristicProposer(TASKS / "layernorm.py")
    proposer.seeds._seed = seed_of("layernorm")
    first = proposer.propose(ctx(gpu=True, n=2))
    history = [AttemptSummary(1, "ok", "", 0.50, 1.0, note=first[0].note),
               AttemptSummary(2, "ok", "", 0.52, 1.0, note=first[1].note)]
    notes = [p.note for p in proposer.propose(ctx(gpu=True, n=2, history=history, best_note=first[0].note,
                                                  round_=2))]
    assert len(notes) == 2 and all("re-timed" in n for n in notes)


def test_a_task_neither_covers_names_both_reasons():
    seed = SeedUnavailable("inductor used extern convolution (aten.convolution through torch)")
    proposer = HeuristicProposer(TASKS / "sdpa.py")
    proposer.seeds._seed = seed
    reason = proposer.exhausted(ctx())
    assert reason.startswith("no template for aten.scaled_dot_product_attention; seed unavailable: inductor used")
    assert reason.endswith("configure an LLM with --model")


# -- the LLM prompt's seed section -----------------------------------------------------------------------------

def test_prompt_section_shows_inductors_kernels_to_beat():
    from agent.proposers.heuristic.inductor_emit import prompt_section

    text = prompt_section((TASKS / "cumsum.py").read_text())
    assert text.startswith("## What torch.compile generates for this op")
    assert "tl.cumsum(" in text and "_launch_p1" in text and "must beat this" in text


def test_prompt_section_is_left_out_unless_asked_for(monkeypatch):
    from agent.proposers.openai.prompting import _inductor_seed_section

    monkeypatch.delenv("KGEN_INDUCTOR_SEED_PROMPT", raising=False)
    context = ProposeContext(task_name="cumsum", task_source=(TASKS / "cumsum.py").read_text(), backend="triton",
                             analysis=Analysis(), round=1, n=1)
    assert _inductor_seed_section(context, 20000) == ""


def test_a_template_launch_passes_its_fixed_grid(tmp_path):
    # Triton matmul templates (max-autotune on a GPU) launch with a FixedGrid; no CPU run of Inductor makes
    # one, so the wrapper is a hand-written one of that shape (see the fixture's header)
    from agent.proposers.heuristic.inductor import Seed as SeedRecord

    plan = read_wrapper((FIXTURES / "fixed_grid_handwritten.py").read_text(), ((5, 7),))
    assert not isinstance(plan, SeedUnavailable), plan
    seed = SeedRecord(task_name="double", inputs=(("input", "x"),), forward_args=("x",), single_output=True,
                      init_signature="", init_lines=(), plans=[plan])
    source = emit_candidate(seed, SeedConfig())
    assert "triton_tem_fused_mul_0_p0[1, 1, 1](arg0_1, buf0, num_warps=4, num_stages=2)" in source
    task_path = tmp_path / "double.py"
    task_path.write_text("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
                         "        return x * 2.0\ndef get_inputs():\n    return [torch.randn(5, 7)]\n"
                         "def get_init_inputs():\n    return []\n")
    result = verify(load_task(task_path), source, VerifyConfig(device="cpu", timeout_s=120))
    assert result.status == "ok", (result.status, result.reason, result.feedback[-800:])


MM_TASK = ("import torch\nclass Model(torch.nn.Module):\n    def forward(self, a, b):\n        return a @ b\n"
           "def get_inputs():\n    return [torch.randn(128, 64), torch.randn(64, 128)]\n"
           "def get_init_inputs():\n    return []\n")


BATCHNORM_TASK = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bn = nn.BatchNorm2d(features)
        self.bn.running_mean.fill_(3.0)     # statistics a batch's are far from: the two modes differ everywhere
        self.bn.running_var.fill_(9.0){eval}

    def forward(self, x):
        return self.bn(x)


def get_inputs():
    return [torch.randn(4, 6, 5, 7)]


def get_init_inputs():
    return [6]
"""


@pytest.mark.parametrize("mode", ["training", "eval"])
def test_the_seed_is_captured_in_the_mode_the_reference_runs_in(tmp_path, mode):
    # KernelBench's BatchNorm problems are built in training mode (nn.Module's default): the batch's statistics,
    # the running ones updated on the side. A seed captured in eval() mode was wrong on every element.
    path = tmp_path / f"bn_{mode}.py"
    path.write_text(BATCHNORM_TASK.format(eval="\n        self.eval()" if mode == "eval" else ""))
    seed = capture(path, "cpu")
    assert isinstance(seed, Seed), seed
    source = emit_candidate(seed, SeedConfig())
    result = verify(load_task(path), source, VerifyConfig(device="cpu", timeout_s=120))
    assert result.status == "ok", (result.status, result.reason, result.feedback[-800:])
    if mode == "training":
        # the running statistics' updates are not forward's result: no kernel computes them
        assert "running" not in seed.kernel_summary() and len(seed.benchmark.kernels) <= 2


def _mm_seed(float32: bool = True, wrapper: str | None = None):
    from agent.proposers.heuristic.inductor import Seed as SeedRecord

    wrapper = wrapper or (FIXTURES / "fixed_grid_mm_handwritten.py").read_text()
    plan = read_wrapper(wrapper, ((128, 64), (64, 128)))
    assert not isinstance(plan, SeedUnavailable), plan
    return SeedRecord(task_name="mm", inputs=(("input", "a"), ("input", "b")), forward_args=("a", "b"),
                      single_output=True, init_signature="", init_lines=(), plans=[plan], float32=float32)


def test_fp32_template_products_can_run_as_three_tf32_passes_and_still_pass(tmp_path):
    seed = _mm_seed()
    assert seed.fp32_dots
    # on a GPU the split comes first (at Inductor's tile after the retiled one), Inductor's exact products
    # after it; the CPU keeps Inductor's
    _, first, second = seed_first_round(seed, on_gpu=True, n=3, tried=set())
    assert first.config.tf32x3 and "tf32x3" in first.note and not second.config.tf32x3
    assert first.config.choice(0).tile == 0 and second.config.choice(0).tile == 0
    assert not any(c.config.tf32x3 for c in seed_first_round(seed, on_gpu=False, n=4, tried=set()))
    assert parse_seed_note(first.note) == first.config.normalised(1)
    assert launch_key(seed, first.config) != launch_key(seed, second.config)
    # the walk keeps the precision of the best, and offers the other one last
    moves = seed_next_round(seed, first.config, None, n=20, tried={launch_key(seed, first.config)})
    assert all(m.config.tf32x3 for m in moves[:-1]) and not moves[-1].config.tf32x3

    exact, split = emit_candidate(seed, second.config), emit_candidate(seed, first.config)
    assert "allow_tf32=ALLOW_TF32" in exact and "tf32x3" not in exact.split('"""', 2)[2]
    assert "input_precision='tf32x3'" in split and "allow_tf32" not in split.split('"""', 2)[2]
    task_path = tmp_path / "mm.py"
    task_path.write_text(MM_TASK)
    # the interpreter computes tf32x3 as the tensor cores do (verifier/interpreter_fixes.py)
    result = verify(load_task(task_path), split, VerifyConfig(device="cpu", timeout_s=120))
    assert result.status == "ok", (result.status, result.reason, result.feedback[-800:])


def test_a_matmul_template_is_retiled_and_its_grid_follows(tmp_path):
    from agent.proposers.heuristic.inductor_emit import TEMPLATE_TILES, template_geometry

    seed = _mm_seed()
    [kernel] = seed.benchmark.kernels
    geometry = template_geometry(kernel)
    assert (geometry.m, geometry.n, geometry.k, geometry.block, geometry.even_k) == (128, 128, 64, (16, 16, 16), True)
    # on a GPU round one starts with the tile measured fastest for fp32, its products split
    [tiled] = seed_first_round(seed, on_gpu=True, n=1, tried=set())
    assert tiled.config.tf32x3 and tiled.config.choice(0).tile == 1 and "128x64x32 on 4 warps" in tiled.note
    assert parse_seed_note(tiled.note) == tiled.config
    source = emit_candidate(seed, tiled.config, tiled.note)
    body = source.split('"""', 2)[2]
    assert "BLOCK_M: tl.constexpr = 128" in body and "BLOCK_N: tl.constexpr = 64" in body \
        and "BLOCK_K: tl.constexpr = 32" in body
    # 128/128 x 128/64 programs, at the tile's warps and stages
    assert "triton_tem_fused_mm_0_p0[2, 1, 1](arg0_1, arg1_1, buf0, num_warps=4, num_stages=4)" in body
    task_path = tmp_path / "mm.py"
    task_path.write_text(MM_TASK)
    result = verify(load_task(task_path), source, VerifyConfig(device="cpu", timeout_s=120))
    assert result.status == "ok", (result.status, result.reason, result.feedback[-800:])
    # the walk offers the other tiles that divide the sizes, never one that leaves K unmasked and undivided
    moves = seed_next_round(seed, tiled.config, None, n=50, tried={launch_key(seed, tiled.config)})
    tiles = {m.config.choice(0).tile for m in moves if "the matmul template at" in m.note}
    assert tiles == {0, 2, 3, 4, 5} and len(TEMPLATE_TILES) == 5
    assert not geometry.takes((32, 32, 48, 4, 2)) and not geometry.takes((256, 64, 32, 8, 3))


def test_a_template_that_cannot_take_the_first_tile_is_not_said_to_run_at_it():
    # M = 96 is no multiple of 128: the first tile does not divide it, so round one has no retiled proposal
    wrapper = (FIXTURES / "fixed_grid_mm_handwritten.py").read_text().replace("    M = 128\n", "    M = 96\n")
    seed = _mm_seed(wrapper=wrapper)
    first = seed_first_round(seed, on_gpu=True, n=3, tried=set())
    assert "at 128x64x32" not in first[0].note and first[0].config.tf32x3
    assert all(c.config.choice(0).tile == 0 for c in first)


def test_a_template_whose_grid_is_not_the_matmul_grid_keeps_its_tile():
    from agent.proposers.heuristic.seeded import _seed_proposal

    wrapper = (FIXTURES / "fixed_grid_mm_handwritten.py").read_text().replace("buf0, 64, 1, 1,", "buf0, 63, 1, 1,")
    seed = _mm_seed(wrapper=wrapper)
    [tiled] = seed_first_round(seed, on_gpu=True, n=1, tried=set())
    proposal = _seed_proposal(seed, tiled)
    assert proposal.source is None and "its tile cannot change" in proposal.repair
    assert "[63, 1, 1]" in emit_candidate(seed, SeedConfig(tf32x3=True))    # Inductor's own tile still writes


@pytest.mark.parametrize("fixture, shapes, inputs, grid", [
    # x @ W.T (1024 x 8192 @ 8192 x 8192), then a row sum: Inductor's 128x128 tiles, 512 programs
    ("h200_gemm_divide_sum_scaling", ((1024, 8192),), (("param", "weight"), ("input", "x")), (512, 1024)),
    # addmm (128 x 32768 @ 32768 x 32768 + bias), then sigmoid and a two-step sum
    ("h200_matmul_sigmoid_sum", ((128, 32768),),
     (("param", "linear.weight"), ("param", "linear.bias"), ("input", "x")), (256, 512)),
])
def test_recorded_h200_templates_are_retiled_with_their_grid(fixture, shapes, inputs, grid):
    # the templates as Inductor wrote them on the GPU machine: what the hand-written fixture stands for
    from agent.proposers.heuristic.inductor import Seed as SeedRecord
    from agent.proposers.heuristic.inductor_emit import template_geometry

    plan = read_wrapper((FIXTURES / f"{fixture}.py").read_text(), shapes, "cuda")
    assert not isinstance(plan, SeedUnavailable), plan
    seed = SeedRecord(task_name=fixture, inputs=inputs, forward_args=("x",), single_output=True, init_signature="",
                      init_lines=(), plans=[plan], device="cuda", float32=True)
    template = plan.kernels[0]
    geometry = template_geometry(template)
    assert geometry is not None and geometry.block == (128, 128, 32) and geometry.even_k
    assert [template_geometry(k) for k in plan.kernels[1:]] == [None] * (len(plan.kernels) - 1)
    assert geometry.programs(128, 128) == grid[0]
    tiled, split, inductor = seed_first_round(seed, on_gpu=True, n=3, tried=set())
    assert tiled.config.tf32x3 and tiled.config.choice(0).tile == 1 and split.config.tf32x3 \
        and not inductor.config.tf32x3
    body = emit_candidate(seed, tiled.config, tiled.note).split('"""', 2)[2]
    assert f"{template.name}_p0[{grid[1]}, 1, 1](" in body and "BLOCK_N: tl.constexpr = 64" in body
    assert "input_precision='tf32x3'" in body and "allow_tf32" not in body
    exact = emit_candidate(seed, inductor.config).split('"""', 2)[2]
    assert f"{template.name}_p0[{grid[0]}, 1, 1](" in exact and "allow_tf32=ALLOW_TF32" in exact
    ast.parse(body)


def test_no_tf32x3_for_a_seed_whose_products_are_not_fp32():
    seed = _mm_seed(float32=False)
    assert not seed.fp32_dots
    assert not any(c.config.tf32x3 for c in seed_first_round(seed, on_gpu=True, n=4, tried=set()))
    best = seed_first_round(seed, on_gpu=True, n=1, tried=set())[0].config
    assert not any(m.config.tf32x3 for m in seed_next_round(seed, best, None, n=20, tried=set()))
    # a tf32x3 note for such a seed launches what the exact one does, and writes no split
    assert launch_key(seed, SeedConfig(tf32x3=True)) == launch_key(seed, SeedConfig())
    assert "tf32x3" not in emit_candidate(seed, SeedConfig(tf32x3=True)).split('"""', 2)[2]


# -- on a GPU: Inductor compiled for CUDA, the candidate verified on the task's own inputs ------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("name", ["layernorm", "cumsum", "l2_normalize", "softmax", "matmul"])
def test_gpu_seeded_candidate_passes_verification_on_the_benchmark_inputs(name):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    seed = capture(TASKS / f"{name}.py")
    assert isinstance(seed, Seed) and seed.device == "cuda", seed
    result = verify(load_task(TASKS / f"{name}.py"), emit_candidate(seed, SeedConfig()),
                    VerifyConfig(device="cuda", timeout_s=600))
    assert result.status == "ok", (result.status, result.reason, result.feedback[-800:])


@pytest.mark.gpu
def test_gpu_seeded_matmul_with_three_tf32_passes_passes_verification():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    seed = capture(TASKS / "matmul.py")
    assert isinstance(seed, Seed) and seed.fp32_dots, seed
    [choice] = seed_first_round(seed, on_gpu=True, n=1, tried=set())
    assert choice.config.tf32x3
    source = emit_candidate(seed, choice.config, choice.note)
    assert "input_precision='tf32x3'" in source
    result = verify(load_task(TASKS / "matmul.py"), source, VerifyConfig(device="cuda", timeout_s=600))
    assert result.status == "ok", (result.status, result.reason, result.feedback[-800:])


def test_configurations_are_read_from_a_torch_whose_cached_autotune_takes_no_autotuner_class(monkeypatch):
    from torch._inductor.runtime import triton_heuristics

    def older_cached_autotune(size_hints, configs, triton_meta, heuristic_type, filename=None, inductor_meta=None,
                              custom_kernel=False):
        raise AssertionError("never called: the seed reads the list before it")

    monkeypatch.setattr(triton_heuristics, "cached_autotune", older_cached_autotune)
    plan = read_wrapper((FIXTURES / "layernorm_small.py").read_text(), ((67, 5120),))
    assert not isinstance(plan, SeedUnavailable), plan
    assert plan.kernels[0].configs and all(c.num_warps > 0 for c in plan.kernels[0].configs)
