"""The prompts: what the model is shown each round, and what goes first when the prompt is too long."""

import importlib.util

import pytest

from agent.analysis import Analysis
from agent.proposers.base import AttemptSummary, ProposeContext
from agent.proposers.openai.prompting import BACKENDS, render_messages, render_system
from agent.proposers.openai.replies import parse_reply

TASK_SOURCE = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(4096, 8191)]
'''

# An Analysis as the LangGraph state holds it (Analysis.to_dict()).
ANALYSIS = {
    "gpu": "NVIDIA H200",
    "shapes": [[4096, 8191]],
    "dtypes": ["float32"],
    "bytes": 2.68e8,
    "flops": 1.68e8,
    "sol_ms": 0.0624,
    "floor_ms": 0.0559,
    "peaks": {"name": "H200", "mem_gbps": 4300, "compute_tflops": 67},
    "baselines": {"eager": {"median_ms": 0.114}, "compile": {"median_ms": 0.0912}},
}


def context(**overrides) -> ProposeContext:
    fields = dict(task_name="softmax", task_source=TASK_SOURCE, backend="triton", analysis=ANALYSIS, round=3, n=1)
    fields.update(overrides)
    fields["analysis"] = Analysis.from_dict(fields["analysis"])
    return ProposeContext(**fields)


def failed(number: int, feedback: str = "", source: str | None = None) -> AttemptSummary:
    return AttemptSummary(number, "mismatch", f"reason-of-{number}", None, None, feedback=feedback, source=source)


def user_text(ctx: ProposeContext, budget: int = 24000) -> str:
    messages = render_messages(ctx, budget)
    assert [m["role"] for m in messages] == ["system", "user"]
    return messages[1]["content"]


def total_chars(ctx: ProposeContext, budget: int) -> int:
    return sum(len(m["content"]) for m in render_messages(ctx, budget))


def test_round_prompt_holds_the_task_source():
    assert TASK_SOURCE.strip() in user_text(context())


def test_round_prompt_shows_the_analysis_numbers_with_units():
    text = user_text(context())
    assert "GPU: NVIDIA H200" in text
    assert "inputs: [4096, 8191] float32" in text
    assert "4300 GB/s" in text and "67 TFLOP/s" in text
    assert "168 MFLOP" in text
    assert "268 MB" in text
    assert "0.0624 ms" in text
    assert "roofline floor (a time below it is rejected as impossible): 0.0559 ms" in text
    assert "eager 0.114 ms, compile 0.0912 ms" in text


def test_analysis_without_gpu_or_timings_says_so():
    text = user_text(context(analysis={"shapes": [[127, 781], None], "dtypes": ["float32", "int 3"]}))
    assert "GPU: none here" in text
    assert "baseline times: not measured" in text
    assert "inputs: [127, 781] float32; int 3" in text
    assert "roofline floor" not in text         # nothing said about a floor that is not known


def test_an_analysis_key_misspelt_in_the_state_fails_loudly():
    with pytest.raises(TypeError, match="sol_msec"):
        Analysis.from_dict({**ANALYSIS, "sol_msec": 0.06})


def test_the_analysis_round_trips_through_its_json_form():
    assert Analysis.from_dict(ANALYSIS).to_dict() == ANALYSIS


def test_feedback_of_the_last_failed_attempt_is_shown():
    history = [failed(1, "max abs err 3.2 at [0, 17]", "class ModelNew: pass  # attempt one")]
    text = user_text(context(history=history))
    assert "max abs err 3.2 at [0, 17]" in text
    assert "# attempt one" in text


def test_passing_attempts_get_no_repair_section():
    ok = AttemptSummary(1, "ok", "correct on 5 trials", 0.1, 1.1, feedback="OK-FEEDBACK", source="OK-SOURCE")
    text = user_text(context(history=[ok]))
    assert "OK-FEEDBACK" not in text
    assert "#1 ok (0.1 ms, 1.1× the faster baseline): correct on 5 trials" in text


def test_diagnosis_and_best_kernel_are_shown():
    ctx = context(best_source="class ModelNew: pass  # BEST", best_ms=0.08, best_speedup=1.14,
                  diagnosis_text="memory-bound, 61% of DRAM speed-of-light; top stall: long scoreboard")
    text = user_text(ctx)
    assert "61% of DRAM speed-of-light" in text
    assert "# BEST" in text
    assert "0.08 ms, 1.14× the faster baseline" in text


def test_budget_drops_the_oldest_feedback_first():
    history = [failed(i, f"FEEDBACK-{i} " + "x" * 3000, f"# SOURCE-{i}\n" + "y" * 3000) for i in (1, 2, 3)]
    ctx = context(history=history)
    full = total_chars(ctx, 10**6)
    text = user_text(ctx, full - 5000)   # room for all but about one attempt's code and feedback
    assert "# SOURCE-1" not in text
    assert "FEEDBACK-3" in text and "# SOURCE-3" in text
    assert all(f"reason-of-{i}" in text for i in (1, 2, 3))   # every attempt is still listed


def test_budget_drops_old_attempt_lines_before_the_best_kernel():
    history = [failed(i) for i in range(1, 31)]
    ctx = context(history=history, best_source="class ModelNew: pass  # BEST")
    without_lines = total_chars(ctx, 10**6) - sum(len(f"- #{i} mismatch: reason-of-{i}\n") for i in range(1, 31))
    text = user_text(ctx, without_lines + 200)
    assert "# BEST" in text
    assert "reason-of-1\n" not in text
    assert "reason-of-30" in text
    assert "earlier attempts not listed" in text


def test_prompt_fits_the_budget_when_detail_can_go():
    history = [failed(i, "z" * 2000, "w" * 2000) for i in range(1, 40)]
    ctx = context(history=history, best_source="b" * 5000, n=4)
    assert total_chars(ctx, 10**6) > 24000
    assert total_chars(ctx, 24000) <= 24000


def test_task_source_survives_any_budget():
    ctx = context(history=[failed(1, "f" * 1000, "s" * 1000)], best_source="class ModelNew: pass  # BEST")
    text = user_text(ctx, budget=100)
    assert TASK_SOURCE.strip() in text
    assert "# BEST" not in text


def test_system_prompt_states_the_contract_and_reply_format():
    system = render_system("triton")
    assert "class ModelNew(nn.Module)" in system
    assert "torch did the work" in system
    assert "```python" in system
    assert "@triton.jit" in system


def test_cuda_backend_prompt_teaches_cupy_not_triton():
    system = render_system("cuda")
    assert "cupy.RawModule" in system
    assert "load_inline" in system
    assert "@triton.jit" not in system


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="triton, cuda"):
        render_system("metal")


def example_model(backend: str, tmp_path):
    """The system prompt's example reply, parsed as any reply is and imported from a file as a candidate is."""
    source, repair = parse_reply(render_system(backend))
    assert repair == ""
    path = tmp_path / f"example_{backend}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ModelNew()


def test_triton_example_is_a_correct_candidate(monkeypatch, tmp_path):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    import torch

    x = torch.randn(1823, generator=torch.Generator().manual_seed(0))
    assert torch.equal(example_model("triton", tmp_path)(x), torch.relu(x))


@pytest.mark.gpu
@pytest.mark.parametrize("backend", BACKENDS)
def test_example_is_a_correct_candidate_on_the_gpu(backend, tmp_path):
    if backend == "cuda":
        pytest.importorskip("cupy")
    import torch

    x = torch.randn(1823, 781, device="cuda", generator=torch.Generator("cuda").manual_seed(0))
    out = example_model(backend, tmp_path)(x)
    torch.cuda.synchronize()
    assert torch.equal(out, torch.relu(x))


@pytest.mark.parametrize("status", ["not_run", "not_checkable"])
def test_a_kernel_not_checked_here_gets_no_repair_section(status):
    unchecked = AttemptSummary(1, status, "not checkable here: no nvcc here", None, None,
                               feedback="UNCHECKED-FEEDBACK", source="UNCHECKED-SOURCE")
    text = user_text(context(history=[unchecked]))
    assert "UNCHECKED-SOURCE" not in text and "UNCHECKED-FEEDBACK" not in text
    assert "not a fault of the kernel" in text
