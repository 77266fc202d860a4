"""Tests of the heuristic proposer: recognition, the emitted kernels, and the configuration walk.

    .venv/bin/python -m pytest tests/agent/test_heuristic.py -x -q

Kernels run on the CPU under the Triton interpreter, on each task's small inputs. TRITON_INTERPRET is
set with monkeypatch before a candidate is imported: Triton reads it when a @triton.jit decorator runs,
so it takes effect even where another test imported triton earlier, and is undone after the test.
"""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import pytest

from agent.analysis import Analysis
from profiler.records import Diagnosis
from agent.proposers.base import AttemptSummary, ProposeContext
from agent.proposers.heuristic import HeuristicProposer
from agent.proposers.heuristic.inductor import SeedUnavailable
from agent.proposers.heuristic import configs
from agent.proposers.heuristic.configs import MatmulConfig, PointwiseConfig, Problem, RowConfig
from agent.proposers.heuristic.program import MatmulProgram, Op, RowProgram, walk
from agent.proposers.heuristic.recognise import recognise

TASKS = Path(__file__).resolve().parents[2] / "tasks"

FAMILIES = {
    "gelu": "pointwise", "pointwise_chain": "pointwise", "swiglu": "pointwise", "transpose": "pointwise",
    "softmax": "rowwise", "log_softmax": "rowwise", "layernorm": "rowwise", "rmsnorm": "rowwise",
    "sum_dim": "rowwise", "mean_dim": "rowwise", "max_dim": "rowwise", "cross_entropy": "rowwise",
    "matmul": "matmul", "matmul_bf16": "matmul", "bmm": "matmul", "linear_bias_gelu": "matmul",
}

_RECOGNISED: dict = {}


def recognised(path: Path):
    """recognise(), once per task file for the whole module (torch.export is the slow part)."""
    if path not in _RECOGNISED:
        _RECOGNISED[path] = recognise(path)
    return _RECOGNISED[path]


def ctx(n: int = 1, gpu: bool = False, history=(), best_note: str = "", diagnosis=None, round_: int = 1):
    return ProposeContext(task_name="t", task_source="", backend="triton",
                          analysis=Analysis(gpu="NVIDIA H200" if gpu else ""), round=round_, n=n,
                          best_note=best_note, history=list(history), diagnosis=diagnosis)


def write_task(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n" + textwrap.dedent(body))
    return path


# ------------------------------------------------------------------------------------------------
# recognition


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_recognises_the_family_of_each_task(name):
    rec = recognised(TASKS / f"{name}.py")
    assert rec.supported, rec.reason
    assert rec.family == FAMILIES[name]


def test_rmsnorm_written_by_hand_keeps_its_bf16_cast_and_weight():
    rec = recognised(TASKS / "rmsnorm.py")
    prog = rec.program
    assert isinstance(prog, RowProgram) and prog.last_dims and prog.out_dtype == "bfloat16"
    casts = [n for n in walk(prog.out) if isinstance(n, Op) and n.name == "cast"]
    assert [c.attr for c in casts] == [("float32",), ("bfloat16",)]   # x.float(), then h.to(x.dtype)
    assert {op.expr for op in prog.operands} == {"x", "self.weight"}


def test_cross_entropy_is_a_row_program_finished_by_a_mean_over_targets():
    prog = recognised(TASKS / "cross_entropy.py").program
    assert prog.finish == "mean" and prog.operands[prog.target].per_row and prog.ignore_index == -100


def test_a_middle_dim_reduction_is_a_strided_row_program():
    rec = recognised(TASKS / "mean_dim.py")
    assert (rec.program.lo, rec.program.hi, rec.program.last_dims) == (1, 2, False)
    assert rec.problem.inner == 1024 and rec.problem.row_len == 4096


def test_linear_reads_the_weight_as_a_transposed_view_with_the_bias_in_the_epilogue():
    rec = recognised(TASKS / "linear_bias_gelu.py")
    prog = rec.program
    assert isinstance(prog, MatmulProgram)
    assert prog.operands[prog.b].expr == "self.linear.weight.t()"
    assert "self.linear.bias" in [op.expr for op in prog.operands]
    assert (rec.problem.m, rec.problem.n, rec.problem.k) == (16384, 3072, 768)   # benchmark sizes, not small ones
    assert rec.init_lines == ("self.linear = nn.Linear(in_features, out_features, bias=True)",)


@pytest.mark.parametrize("name,op", [("cumsum", "aten.cumsum"), ("sdpa", "aten.scaled_dot_product_attention")])
def test_a_task_without_template_is_unsupported_with_a_clear_reason(name, op):
    rec = recognised(TASKS / f"{name}.py")
    assert not rec.supported
    assert rec.reason == f"no template for {op}; configure an LLM with --model"


def test_unsupported_conv2d_gives_no_proposal_and_says_why(tmp_path):
    path = write_task(tmp_path, "conv", """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 4, 3)
            def forward(self, x):
                return self.conv(x)
        def get_inputs():
            return [torch.randn(1, 3, 9, 9)]
        def get_init_inputs():
            return []
    """)
    proposer = HeuristicProposer(path)
    assert proposer.propose(ctx()) == []
    reason = proposer.exhausted(ctx())
    # neither a template nor Inductor's kernels (it calls the convolution through torch, which the audit refuses)
    assert reason.startswith("no template for aten.conv2d; seed unavailable: inductor used extern convolution")
    assert reason.endswith("; configure an LLM with --model")


# ------------------------------------------------------------------------------------------------
# the emitted kernels, run under the interpreter

# Runs candidates in a fresh interpreter with TRITON_INTERPRET=1 set before triton is imported, as the
# verifier does: Triton decides at import whether its own library functions (tl.cdiv, tl.sum, ...) are
# interpreted, and torch.export (the recogniser) imports triton in this process without it.
CHECK_SCRIPT = """
import importlib.util, json, sys, traceback
import torch
from verifier.audit import OpAudit
from verifier.task import import_task_module

class Recorder:   # stands in for one of the candidate's @triton.jit kernels: notes the launch, then makes it
    def __init__(self, name, jit, launched):
        self.name, self.jit, self.launched = name, jit, launched
    def __getitem__(self, grid):
        self.launched.append(self.name)
        return self.jit[grid]

results = {}
for job in json.load(open(sys.argv[1])):
    try:
        spec = importlib.util.spec_from_file_location("cand_" + job["name"], job["candidate"])
        cand = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(cand)
        launched = []
        for attr in [a for a in vars(cand) if a.endswith("_kernel")]:
            setattr(cand, attr, Recorder(attr, getattr(cand, attr), launched))
        task = import_task_module(job["task"], "task_" + job["name"])
        torch.manual_seed(0)
        ref = task.Model(*task.get_init_inputs())
        torch.manual_seed(0)
        new = cand.ModelNew(*task.get_init_inputs())
        new.load_state_dict(ref.state_dict(), strict=True)
        torch.manual_seed(1)
        inputs = getattr(task, "get_small_inputs", task.get_inputs)()
        want = ref(*inputs)
        with OpAudit() as audit:
            got = new(*inputs)
        tol = 1e-2 if want.dtype in (torch.bfloat16, torch.float16) else 1e-4
        same = got.shape == want.shape and got.dtype == want.dtype
        close = same and torch.allclose(got.float(), want.float(), atol=tol, rtol=tol)
        err = (got.float() - want.float()).abs().max().item() if same else None
        results[job["name"]] = {"close": close, "err": err, "tol": tol, "compute_ops": audit.compute_ops,
                                "launched": launched}
    except Exception:
        results[job["name"]] = {"close": False, "error": traceback.format_exc()[-2000:]}
json.dump(results, open(sys.argv[2], "w"))
"""

MIXED_TASK = """
    class Model(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.bias = nn.Parameter(torch.randn(n))
        def forward(self, x, y):
            a = F.gelu(x, approximate="tanh") + torch.tanh(y) * 0.5
            b = torch.where(x > 0, torch.clamp(a, -1.0, 2.0), torch.maximum(a, y).pow(2))
            c = torch.sigmoid(b - self.bias).to(torch.bfloat16).float() / (1.0 + torch.exp(-x.abs()))
            return F.silu(c) - torch.log(torch.abs(y) + 1.0) + torch.rsqrt(x * x + 1.0)
    def get_inputs():
        return [torch.randn(5, 7, 33), torch.randn(7, 33)]
    def get_init_inputs():
        return [33]
"""

MLP_TASK = """
    class Model(nn.Module):
        def __init__(self, d_in, d_out):
            super().__init__()
            self.fc = nn.Linear(d_in, d_out)
        def forward(self, x):
            return torch.relu(self.fc(x)) * 0.5
    def get_inputs():
        return [torch.randn(2, 5, 24)]
    def get_init_inputs():
        return [24, 17]
"""


@pytest.fixture(scope="module")
def interpreted(tmp_path_factory):
    """{case: result} for every candidate below, all run in one fresh interpreter process."""
    import json
    import os
    import subprocess
    import sys

    from agent.proposers.heuristic.pointwise import emit as emit_pointwise
    from agent.proposers.heuristic.rowwise import emit as emit_rows
    from verifier.static import check_source

    tmp = tmp_path_factory.mktemp("heuristic")
    cases: dict[str, tuple[Path, str]] = {}
    for name in sorted(FAMILIES):
        path = TASKS / f"{name}.py"
        proposer = HeuristicProposer(path)
        proposer._recognition = recognised(path)
        cases[name] = (path, proposer.propose(ctx(n=1))[0].source)
    for name, body in (("mixed", MIXED_TASK), ("mlp", MLP_TASK)):
        path = write_task(tmp, name, body)
        cases[name] = (path, HeuristicProposer(path).propose(ctx())[0].source)
    # softmax rows of 781 run in one pass by default; 128-element steps force the looped kernel
    looped = emit_rows(recognised(TASKS / "softmax.py"), RowConfig(ONE_PASS_MAX=512, LOOP_BLOCK=128, TILE=256), "looped")
    assert "_looped_kernel[" in looped
    cases["softmax_looped"] = (TASKS / "softmax.py", looped)
    # the 1-D indexed kernel for broadcast and strided operands (a transposed operand keeps the tiles)
    for name in INDEXED_CASES:
        source = emit_pointwise(recognised(TASKS / f"{name}.py"), PointwiseConfig(BLOCK=256, TILE_C=64, INDEXED=1), "indexed")
        assert "_indexed_kernel[" in source         # launched where the layouts allow (gelu: the flat pass)
        cases[f"{name}_indexed"] = (TASKS / f"{name}.py", source)
    mixed = recognise(write_task(tmp, "mixed_indexed", MIXED_TASK))
    cases["mixed_indexed"] = (tmp / "mixed_indexed.py", emit_pointwise(mixed, PointwiseConfig(INDEXED=1), "indexed"))

    jobs, static = [], {}
    for name, (task, source) in cases.items():
        cand = tmp / f"cand_{name}.py"
        cand.write_text(source)
        static[name] = check_source(source)
        jobs.append({"name": name, "task": str(task), "candidate": str(cand)})
    (tmp / "jobs.json").write_text(json.dumps(jobs))
    (tmp / "check.py").write_text(CHECK_SCRIPT)
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(TASKS.parent))
    proc = subprocess.run([sys.executable, str(tmp / "check.py"), str(tmp / "jobs.json"), str(tmp / "out.json")],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((tmp / "out.json").read_text())
    for name in results:
        results[name]["static"] = static[name]
    return results


def assert_correct(result: dict, name: str) -> None:
    assert "error" not in result, result.get("error")
    assert result["close"], f"{name}: max abs error {result['err']} over tolerance {result['tol']}"


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_first_proposal_is_correct_on_the_small_inputs(interpreted, name):
    assert_correct(interpreted[name], name)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_first_proposal_leaves_the_work_to_its_kernels(interpreted, name):
    assert interpreted[name]["static"] is None                # the verifier's static checks pass
    assert interpreted[name].get("compute_ops") == []         # forward issued no torch compute op


INDEXED_CASES = ("pointwise_chain", "swiglu", "transpose", "gelu")


@pytest.mark.parametrize("name, kernel", [("pointwise_chain", "indexed"), ("swiglu", "indexed"), ("mixed", "indexed"),
                                          ("transpose", "tiled"), ("gelu", "flat")])
def test_the_indexed_pointwise_kernel_runs_where_the_layouts_allow_and_is_correct(interpreted, name, kernel):
    # pointwise_chain: a bias row broadcast over 67 x 3000; swiglu: two chunks of one tensor (strided rows);
    # mixed: a 3-d output with a 2-d operand broadcast over the first dim; transpose: a transposed operand
    # keeps the tiles; gelu: a whole contiguous operand keeps the flat pass
    result = interpreted[f"{name}_indexed"]
    assert_correct(result, name)
    assert result["static"] is None and result["compute_ops"] == []     # the verifier's checks would pass
    assert [k.rsplit("_", 2)[-2] for k in result["launched"]] == [kernel]


def test_pointwise_vocabulary_with_broadcasting_scalars_and_casts(interpreted, tmp_path):
    rec = recognise(write_task(tmp_path, "mixed", MIXED_TASK))
    assert rec.family == "pointwise"
    assert rec.init_lines == ("self.bias = nn.Parameter(torch.empty((n,)))",)
    assert_correct(interpreted["mixed"], "mixed")             # the bf16 round trip rounds as torch does


def test_linear_on_3d_input_with_scaled_relu_epilogue(interpreted):
    assert_correct(interpreted["mlp"], "mlp")
    assert interpreted["mlp"]["compute_ops"] == []


def test_looped_rows_give_the_one_pass_result(interpreted):
    assert_correct(interpreted["softmax_looped"], "softmax_looped")


# ------------------------------------------------------------------------------------------------
# proposals


def test_proposal_carries_the_recognition_as_prompt_and_the_note_as_response():
    path = TASKS / "softmax.py"
    proposer = HeuristicProposer(path)
    proposer._recognition = recognised(path)
    [p] = proposer.propose(ctx(gpu=True))
    assert proposer.name == "heuristic"
    assert p.prompt.startswith("softmax: rowwise kernel for softmax") and "16384 rows x 8192" in p.prompt
    assert p.response == p.note and p.note.startswith("rowwise ONE_PASS_MAX=")
    assert configs.parse_note(p.note) is not None


def test_gpu_default_for_a_bf16_4096_cube_matmul():
    problem = Problem("matmul", "bfloat16", m=4096, n=4096, k=4096)
    [choice] = configs.first_round(problem, on_gpu=True, n=1, tried=set())
    assert choice.config == MatmulConfig(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3)


def test_gpu_default_for_an_fp32_matmul_is_three_tf32_passes():
    problem = Problem("matmul", "float32", m=1024, n=8192, k=8192)
    [choice] = configs.first_round(problem, on_gpu=True, n=1, tried=set())
    assert choice.config == MatmulConfig(BLOCK_M=128, BLOCK_N=64, BLOCK_K=32, GROUP_M=8, num_warps=4, num_stages=4,
                                         TF32X3=1)
    assert "tf32x3" in choice.why and configs.valid("matmul", choice.config, problem, on_gpu=True)
    assert configs.parse_note(choice.note) == ("matmul", choice.config)
    # a note written before the field existed reads back as exact products
    old = "matmul BLOCK_M=128 BLOCK_N=128 BLOCK_K=32 GROUP_M=8 num_warps=8 num_stages=3: default"
    assert configs.parse_note(old)[1].TF32X3 == 0
    # 16-bit products have no tf32x3 mode
    bf16 = Problem("matmul", "bfloat16", m=1024, n=8192, k=8192)
    assert configs.first_round(bf16, on_gpu=True, n=1, tried=set())[0].config.TF32X3 == 0
    assert not configs.valid("matmul", dataclasses.replace(BASE, TF32X3=1), bf16, on_gpu=True)


def test_the_precision_changes_what_is_launched_and_what_is_emitted():
    path = TASKS / "linear_bias_gelu.py"
    rec = recognised(path)
    problem = rec.problem
    fast = configs.first_round(problem, on_gpu=True, n=1, tried=set())[0].config
    exact = dataclasses.replace(fast, TF32X3=0)
    assert configs.launch_key("matmul", fast, problem) != configs.launch_key("matmul", exact, problem)
    from agent.proposers.heuristic.matmul import emit
    fast_src, exact_src = emit(rec, fast, "fast"), emit(rec, exact, "exact")
    assert 'input_precision="tf32x3"' in fast_src and 'input_precision="ieee"' not in fast_src
    assert 'input_precision="ieee"' in exact_src and "tf32x3" not in exact_src
    # the FMA path copies a K-major weight to N-major; the TF32 tensor cores want both factors K-major
    assert "b3 = b3.contiguous()" in exact_src and "b3 = b3.contiguous()" not in fast_src
    assert ".transpose(1, 2).contiguous().transpose(1, 2)" in fast_src and "transpose(1, 2)" not in exact_src


def test_nothing_passed_yet_tries_exact_products_first():
    problem = Problem("matmul", "float32", m=1024, n=8192, k=8192)
    default = configs.first_round(problem, on_gpu=True, n=1, tried=set())[0].config
    [choice] = configs.next_round(problem, None, None, on_gpu=True, n=1,
                                  tried={configs.launch_key("matmul", default, problem)})
    assert choice.config == dataclasses.replace(default, TF32X3=0) and "ieee" in choice.why


def test_round_returns_n_distinct_proposals():
    path = TASKS / "gelu.py"
    proposer = HeuristicProposer(path)
    proposer._recognition = recognised(path)
    proposer.seeds._seed = SeedUnavailable("not under test here")   # else Inductor's kernels would be next
    notes = [p.note for p in proposer.propose(ctx(n=3, gpu=True))]
    assert len(notes) == 3 and len(set(notes)) == 3


# ------------------------------------------------------------------------------------------------
# the configuration walk

MATMUL = Problem("matmul", "bfloat16", m=4096, n=4096, k=4096)
BASE = MatmulConfig(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3)


def diagnosis(**fields):
    """A diagnosis as the profiler hands it over."""
    from profiler.records import Diagnosis, Occupancy, Stall

    stalls = [Stall(reason, 0.0, share, "") for reason, share in fields.pop("stalls", [])]
    occupancy = Occupancy(**fields.pop("occupancy")) if "occupancy" in fields else None
    return Diagnosis(source="ncu", top_stalls=stalls, occupancy=occupancy, **fields)


def test_long_scoreboard_on_top_means_more_stages_next():
    diag = diagnosis(bound="memory", mem_sol_pct=60.0, stalls=[("long_scoreboard", 0.41), ("wait", 0.1)])
    [choice] = configs.next_round(MATMUL, BASE, diag, on_gpu=True, n=1, tried=set())
    assert choice.config.num_stages > BASE.num_stages
    assert "long_scoreboard 41% of stall cycles → deeper pipelining" in choice.note


def test_occupancy_limited_by_registers_means_smaller_tiles_or_fewer_warps():
    diag = diagnosis(bound="compute", sm_sol_pct=50.0, registers=255,
                     occupancy={"achieved_pct": 12.0, "theoretical_pct": 12.5, "limiter": "registers"})
    for choice in configs.next_round(MATMUL, BASE, diag, on_gpu=True, n=2, tried=set()):
        cfg = choice.config
        assert cfg.BLOCK_M * cfg.BLOCK_N < BASE.BLOCK_M * BASE.BLOCK_N or cfg.num_warps < BASE.num_warps
        assert "limited by registers" in choice.note


def test_a_tail_effect_picks_tiles_that_fill_the_sms():
    problem = Problem("matmul", "bfloat16", m=1536, n=2048, k=4096)     # 12 x 16 = 192 tiles: 1.45 waves on 132 SMs
    diag = diagnosis(bound="compute", sm_sol_pct=60.0, waves_per_sm=192 / 132)
    [choice] = configs.next_round(problem, BASE, diag, on_gpu=True, n=1, tried=set())
    tiles = math_tiles(choice.config, problem)
    assert tiles / 132 / -(-tiles // 132) > 0.8 and choice.note.split(": ", 1)[1].startswith("tail effect")


def math_tiles(cfg, p):
    return -(-p.m // cfg.BLOCK_M) * -(-p.n // cfg.BLOCK_N)


def test_barrier_stalls_and_register_limited_tiles_lead_to_the_indexed_pass():
    # the H200's diagnosis of round 1's tiled kernel for pointwise_chain (32768 x 3000, a bias row broadcast):
    # 74% of memory SOL, long_scoreboard 53%, barrier 13%, occupancy 49% limited by registers
    import json

    diag = Diagnosis.from_dict(json.loads((Path(__file__).parent / "fixtures" / "h200_pointwise_chain_tiled_diagnosis.json").read_text()))
    problem = Problem("pointwise", "float32", numel=32768 * 3000, flat=False)
    first = PointwiseConfig(BLOCK=4096, TILE_C=128, num_warps=8)
    [choice] = configs.next_round(problem, first, diag, on_gpu=True, n=1,
                                  tried={configs.launch_key("pointwise", first, problem)})
    assert choice.config == PointwiseConfig(BLOCK=1024, TILE_C=128, num_warps=4, INDEXED=1)
    assert "barrier 13% of stall cycles and occupancy 49% limited by registers in the 2-D tiles" in choice.note
    assert choice.note.endswith("in small programs")
    assert configs.parse_note(choice.note) == ("pointwise", choice.config)


def test_a_transposed_operand_keeps_the_tiles_so_the_indexed_pass_is_never_proposed():
    # transpose's launcher takes the tiles whatever INDEXED says: proposing it would time the same kernel again
    assert recognised(TASKS / "transpose.py").problem.indexable is False
    assert recognised(TASKS / "pointwise_chain.py").problem.indexable is True
    diag = _fixture_diagnosis("h200_pointwise_chain_tiled_diagnosis.json")     # the indexed pass's signs
    problem = Problem("pointwise", "float32", numel=1 << 27, flat=False, indexable=False)
    first = PointwiseConfig(BLOCK=4096, TILE_C=128, num_warps=8)
    indexed = dataclasses.replace(first, INDEXED=1)
    assert configs.launch_key("pointwise", first, problem) == configs.launch_key("pointwise", indexed, problem)
    chosen = configs.next_round(problem, first, diag, on_gpu=True, n=8, tried={configs.launch_key("pointwise", first, problem)})
    assert chosen and all(c.config.INDEXED == 0 for c in chosen)


def test_the_indexed_pass_is_not_proposed_for_flat_operands_or_without_its_signs():
    tiles = PointwiseConfig(BLOCK=4096, TILE_C=128, num_warps=8)
    transposed = diagnosis(bound="memory", mem_sol_pct=80.0, stalls=[("long_scoreboard", 0.40), ("mio_throttle", 0.23)],
                           occupancy={"achieved_pct": 96.0, "theoretical_pct": 100.0, "limiter": "warps"})
    strided = Problem("pointwise", "float32", numel=1 << 27, flat=False)
    assert all(c.config.INDEXED == 0 for c in configs.next_round(strided, tiles, transposed, on_gpu=True, n=2, tried=set()))
    flat = Problem("pointwise", "float32", numel=1 << 27, flat=True)
    barrier = diagnosis(bound="memory", mem_sol_pct=60.0, stalls=[("barrier", 0.3)])
    assert all(c.config.INDEXED == 0 for c in configs.next_round(flat, tiles, barrier, on_gpu=True, n=8, tried=set()))


def test_memory_bound_at_90_percent_of_sol_is_exhausted():
    path = TASKS / "softmax.py"
    proposer = HeuristicProposer(path)
    proposer._recognition = recognised(path)
    diag = diagnosis(bound="memory", mem_sol_pct=90.0, sm_sol_pct=20.0)
    best = proposer.propose(ctx(gpu=True))[0].note
    later = ctx(gpu=True, best_note=best, diagnosis=diag, round_=2)
    assert proposer.exhausted(later) == "memory-bound at 90% of SOL: nothing left to gain"
    assert proposer.propose(later) == []


def test_no_configuration_is_repeated_across_rounds():
    path = TASKS / "matmul_bf16.py"
    proposer = HeuristicProposer(path)
    proposer._recognition = recognised(path)
    diag = diagnosis(bound="compute", sm_sol_pct=60.0, stalls=[("long_scoreboard", 0.3)])
    history, best_note, keys = [], "", []
    for round_ in range(1, 5):
        proposals = proposer.propose(ctx(n=2, gpu=True, history=history, best_note=best_note,
                                         diagnosis=diag if best_note else None, round_=round_))
        assert proposals
        for p in proposals:
            family, cfg = configs.parse_note(p.note)
            keys.append(configs.launch_key(family, cfg, proposer.recognition.problem))
            # untimed: the walk follows the loop's best (ties inside the spread are re-timed on purpose, tested
            # in test_inductor_seed.py)
            history.append(AttemptSummary(len(history) + 1, "ok", "correct", None, None, note=p.note))
        best_note = proposals[0].note
    assert len(keys) == len(set(keys)) == 8


def test_without_a_diagnosis_the_cpu_walk_runs_out_and_says_so():
    path = TASKS / "gelu.py"
    proposer = HeuristicProposer(path)
    proposer._recognition = recognised(path)
    history = []
    for round_ in range(1, 20):
        proposals = proposer.propose(ctx(n=2, history=history, best_note=history[0].note if history else "",
                                         round_=round_))
        if not proposals:
            break
        history += [AttemptSummary(len(history) + 1, "ok", "correct", None, None, note=p.note) for p in proposals]
    assert 1 < len(history) < 12
    assert proposer.exhausted(ctx(history=history, best_note=history[0].note)).startswith("every configuration around")


def test_repeated_template_failures_stop_the_proposer():
    path = TASKS / "gelu.py"
    proposer = HeuristicProposer(path)
    proposer._recognition = recognised(path)
    proposer.seeds._seed = SeedUnavailable("not under test here")   # else Inductor's kernels would be next
    notes = [p.note for p in proposer.propose(ctx(n=3, gpu=True))]
    history = [AttemptSummary(i + 1, "mismatch", "max abs error 0.5", None, None, note=n) for i, n in enumerate(notes)]
    reason = proposer.exhausted(ctx(gpu=True, history=history))
    assert reason.startswith("the pointwise template failed on 3 configurations") and "--model" in reason


def test_notes_read_back_into_the_configuration_they_name():
    for cfg in (BASE, RowConfig(ONE_PASS_MAX=8192), PointwiseConfig(BLOCK=2048), PointwiseConfig(INDEXED=1)):
        family = {MatmulConfig: "matmul", RowConfig: "rowwise", PointwiseConfig: "pointwise"}[type(cfg)]
        note = configs.Choice(family, cfg, "because").note
        assert configs.parse_note(note) == (family, cfg)
    assert configs.parse_note("an LLM's own explanation: BLOCK=3") is None
    # a note written before INDEXED existed names the tiles it ran
    assert configs.parse_note("pointwise BLOCK=4096 TILE_C=128 num_warps=8: default") == (
        "pointwise", PointwiseConfig(BLOCK=4096, TILE_C=128, num_warps=8))
    assert "INDEXED" not in configs.Choice("pointwise", PointwiseConfig(), "why").note


def _fixture_diagnosis(name: str):
    import json

    return Diagnosis.from_dict(json.loads((Path(__file__).parent / "fixtures" / name).read_text()))


def test_busy_tensor_cores_with_waiting_warps_lead_to_a_wider_tile():
    # the H200's diagnosis of matmul_bf16 at 128x128x64 on 4 warps: compute-bound, tensor cores 78% active,
    # wait 27% and barrier 23% of stall cycles, 2 blocks an SM (registers and shared memory)
    diag = _fixture_diagnosis("h200_matmul_bf16_diagnosis.json")
    best = MatmulConfig(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=4, num_stages=3)
    first, second = configs.next_round(MATMUL, best, diag, on_gpu=True, n=2, tried={configs.launch_key("matmul", best, MATMUL)})
    # the wide tile first, with the 4 stages its 48 KiB a stage leave room for in the budget
    assert first.config == MatmulConfig(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=4)
    assert "tensor cores 78% active, wait 27% and barrier 23% of stall cycles → a wider tile on two warp groups " \
           "with 4 stages" in first.note
    assert configs.valid("matmul", first.config, MATMUL, on_gpu=True)
    assert configs._smem_bytes(first.config, MATMUL) <= configs.SMEM_BUDGET_BYTES \
        < configs._smem_bytes(dataclasses.replace(first.config, num_stages=5), MATMUL)
    assert second.config == MatmulConfig(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=4, num_stages=4)


def test_the_wider_tile_needs_tensor_cores_and_16_bit_operands():
    waiting = dict(bound="compute", sm_sol_pct=70.0, stalls=[("wait", 0.3), ("barrier", 0.2)])
    fp32 = Problem("matmul", "float32", m=4096, n=4096, k=4096)
    fp32_base = MatmulConfig(BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, GROUP_M=8, num_warps=8, num_stages=3)
    for problem, cfg, diag in ((MATMUL, BASE, diagnosis(tensor_core_pct=5.0, **waiting)),
                               (fp32, fp32_base, diagnosis(tensor_core_pct=80.0, **waiting))):
        assert all("wider tile" not in c.note for c in configs.next_round(problem, cfg, diag, on_gpu=True, n=8, tried=set()))


def test_looped_rows_waiting_on_memory_at_64_bytes_a_thread_keep_their_warps():
    # the H200's diagnosis of log_softmax (4096 rows x 50257, looped over the row): long_scoreboard 75%,
    # occupancy 48% limited by registers. 4096-element fp32 steps on 8 warps are 64 B a thread: more warps
    # measured no faster there (35% slower for cross_entropy), so wider steps come first
    diag = _fixture_diagnosis("h200_log_softmax_looped_diagnosis.json")
    problem = Problem("rowwise", "float32", rows=4096, row_len=50257)
    best = RowConfig(ONE_PASS_MAX=16384, LOOP_BLOCK=4096, TILE=4096, num_warps=8)
    first, second, third = configs.next_round(problem, best, diag, on_gpu=True, n=3,
                                              tried={configs.launch_key("rowwise", best, problem)})
    assert first.config == RowConfig(ONE_PASS_MAX=16384, LOOP_BLOCK=8192, TILE=4096, num_warps=8)
    assert first.note.endswith("long_scoreboard 75% of stall cycles → wider steps along the row, more loads in flight")
    assert second.config.LOOP_BLOCK == 2048 and "limited by registers" in second.note
    assert third.config.num_warps == 16 and "limited by registers" in third.note


@pytest.mark.parametrize("problem, warps, why", [
    # softmax: 8192 fp32 on 8 warps is 128 B a thread; rmsnorm: 4096 bf16 on 8 warps is 32 B a thread
    (Problem("rowwise", "float32", rows=16384, row_len=8192), 16, "128 B a thread → more warps, 64 B each"),
    (Problem("rowwise", "bfloat16", rows=32768, row_len=4096), 4, "32 B a thread → fewer warps, 64 B each"),
])
def test_one_pass_rows_waiting_on_memory_move_towards_64_bytes_a_thread(problem, warps, why):
    diag = diagnosis(bound="memory", mem_sol_pct=79.0, stalls=[("long_scoreboard", 0.34)])
    best = RowConfig(ONE_PASS_MAX=16384, LOOP_BLOCK=4096, TILE=4096, num_warps=8)
    first, second = configs.next_round(problem, best, diag, on_gpu=True, n=2,
                                       tried={configs.launch_key("rowwise", best, problem)})
    assert first.config == dataclasses.replace(best, num_warps=warps)
    assert first.note.endswith(f"long_scoreboard 34% of stall cycles, {why}" + (
        ": more loads in flight per thread" if warps < 8 else ""))
    assert "more rows per program" in second.note or second.note.startswith("rowwise") and "neighbour" in second.note
