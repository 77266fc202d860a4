"""Comparing outputs: tolerance by dtype, NaN never passes, readable capped feedback."""

import torch

from verifier.correctness import MAX_FEEDBACK_CHARS, aliases, compare_outputs


def test_equal_outputs_pass():
    x = torch.randn(33, 17)
    assert compare_outputs(x.clone(), x) is None


def test_fp32_tolerance_is_1e4():
    ref = torch.ones(10)
    assert compare_outputs(ref + 5e-5, ref) is None
    assert compare_outputs(ref + 5e-3, ref) is not None


def test_bf16_tolerance_is_1e2():
    ref = torch.ones(10, dtype=torch.bfloat16)
    assert compare_outputs(ref * 1.0078125, ref) is None  # one bf16 ulp at 1.0


def test_task_tolerance_overrides():
    ref = torch.ones(10)
    assert compare_outputs(ref + 5e-3, ref, atol=1e-2, rtol=0.0) is None


def test_nan_never_passes_even_with_huge_tolerance():
    ref = torch.ones(10)
    cand = ref.clone()
    cand[3] = float("nan")
    problem = compare_outputs(cand, ref, atol=1e9, rtol=1e9)
    assert problem is not None and "NaN/Inf" in problem.reason


def test_shape_and_dtype_mismatch():
    assert "shape" in compare_outputs(torch.ones(3, 4), torch.ones(4, 3)).reason
    assert "dtype" in compare_outputs(torch.ones(3, dtype=torch.float64), torch.ones(3)).reason


def test_feedback_lists_indices_both_values_and_where():
    ref = torch.zeros(127, 781)
    cand = ref.clone()
    cand[:, 768:] = 1.0  # a masking bug in the last block
    problem = compare_outputs(cand, ref)
    assert "1651 of 99187" in problem.reason and "max abs err 1," in problem.reason
    assert "[0, 768]: got 1, expected 0" in problem.feedback
    assert "columns 768..780 of 781" in problem.feedback
    assert len(problem.feedback) <= MAX_FEEDBACK_CHARS


def test_tensor_subclass_output_is_not_accepted():
    class Lazy(torch.Tensor):
        pass

    ref = torch.ones(4)
    problem = compare_outputs(ref.clone().as_subclass(Lazy), ref)
    assert problem is not None and "plain torch.Tensor" in problem.reason


def test_alias_detection():
    x = torch.randn(4, 4)
    assert aliases([x.view(16)], [x]) == "input 0"
    assert aliases([x.clone()], [x]) is None
