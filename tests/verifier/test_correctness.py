"""Comparing outputs: tolerance by dtype, NaN never passes, readable capped feedback."""

import torch

from verifier.correctness import MAX_FEEDBACK_CHARS, aliases, atol_scale, atol_scales, compare_outputs


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


# -- the norm-relative bound -----------------------------------------------------------------------

def _wide_softmax(seed: int = 0) -> torch.Tensor:
    torch.manual_seed(seed)
    return torch.softmax(torch.randn(64, 8192), dim=-1)


def test_half_zeroed_wide_softmax_passes_elementwise_but_fails_the_norm_bound():
    # At 8192 columns every probability of a negative input is below fp32's atol 1e-4.
    torch.manual_seed(0)
    x = torch.randn(64, 8192)
    ref = torch.softmax(x, dim=-1)
    cheat = torch.where(x < 0, torch.zeros_like(ref), ref)
    assert bool(((cheat - ref).abs() <= 1e-4 + 1e-4 * ref.abs()).all())   # the elementwise test alone passes
    problem = compare_outputs(cheat, ref)
    assert problem is not None and "norm-relative" in problem.reason, problem
    assert "are 0 where the reference is not" in problem.feedback


def test_constant_output_fails_when_the_reference_is_not_constant():
    torch.manual_seed(0)
    ref = torch.softmax(0.1 * torch.randn(64, 8192), dim=-1)   # every element within atol of 1/8192
    problem = compare_outputs(torch.full_like(ref, 1.0 / 8192), ref)
    assert problem is not None and "norm-relative" in problem.reason, problem
    assert "the output is constant" in problem.feedback


def test_constant_output_passes_when_the_reference_is_that_constant():
    ref = torch.full((17, 33), 0.25)
    assert compare_outputs(ref.clone(), ref) is None


def test_fp32_rounding_noise_passes_the_norm_bound():
    ref = _wide_softmax()
    torch.manual_seed(1)
    noisy = ref * (1 + 1e-6 * torch.randn_like(ref))     # ~10 ulps of fp32, far more than honest kernels show
    assert compare_outputs(noisy, ref) is None


def test_one_bf16_rounding_of_an_output_passes_the_bf16_bound():
    torch.manual_seed(0)
    exact = torch.randn(67, 391, dtype=torch.float64)
    ref = exact.to(torch.bfloat16)
    # what an honest kernel does differently: rounds a value the reference rounded from another order
    other = (exact * (1 + 2.0 ** -9 * torch.randn_like(exact))).to(torch.bfloat16)
    assert compare_outputs(other, ref) is None


def test_tf32_sized_error_fails_the_fp32_bound():
    torch.manual_seed(0)
    ref = torch.randn(67, 45) * 0.05   # small values: 3e-4 relative is below the 1e-4 atol everywhere
    tf32_like = ref * (1 + 3e-4 * torch.randn_like(ref))
    problem = compare_outputs(tf32_like, ref)
    assert problem is not None and "norm-relative" in problem.reason, problem


def test_an_all_zero_reference_is_left_to_the_elementwise_test():
    ref = torch.zeros(5, 7)
    assert compare_outputs(ref + 1e-6, ref) is None


def test_a_task_atol_loosens_the_norm_bound_but_never_past_its_cap():
    ref = torch.ones(10)
    assert compare_outputs(ref + 5e-3, ref, atol=1e-2, rtol=0.0) is None
    half = ref.clone()
    half[:5] = 0
    assert compare_outputs(half, ref, atol=2.0, rtol=0.0) is not None   # 0.7 relative: past the 0.05 cap


def test_a_long_products_rounding_near_zero_elements_passes_as_the_reference_scale_allows():
    # an fp32 GEMM over K = 4096 (RMS ~64) that sums in another order: 1e-3 off where an element lies near 0,
    # as a 3xTF32 kernel measured on an H200 (2160 of 16.8M elements past an unscaled atol of 1e-4)
    torch.manual_seed(0)
    ref = torch.randn(256, 256) * 64
    near_zero = ref.abs() < 0.5
    cand = ref + torch.where(near_zero, torch.full_like(ref, 1e-3), 1e-6 * ref)
    assert int(near_zero.sum()) > 100 and 50 < atol_scale(ref) < 80
    assert compare_outputs(cand, ref) is None
    wrong = ref.clone()
    wrong[7, 9] = 0.0   # one element dropped: far past 1e-4 x 64
    problem = compare_outputs(wrong, ref)
    assert problem is not None and "1 of 65536" in problem.reason and "the row RMS" in problem.reason


def test_small_outputs_keep_the_plain_atol():
    ref = torch.softmax(torch.randn(16, 8192), dim=1)   # values ~1e-4: RMS below 1, atol as it is
    assert atol_scale(ref) == 1.0
    assert atol_scale(torch.tensor([3, 4], dtype=torch.int64)) == 1.0
    assert atol_scale(torch.tensor([float("inf"), 3.0, -3.0])) == 3.0   # over the finite elements
    assert atol_scales(torch.tensor([[3.0, -3.0], [0.1, 0.2]])).tolist() == [3.0, 1.0]   # per row, at least 1
    assert compare_outputs(torch.ones(10) + 5e-3, torch.ones(10)) is not None


def test_the_comparison_in_slices_says_what_the_whole_comparison_says(monkeypatch):
    # a 6 GiB output is compared 2^24 elements at a time (float64 temporaries of 128 MiB, not nine times the
    # output): slices of 7 elements, across rows, must give the same verdicts, counts, indices and hints
    from verifier import correctness

    torch.manual_seed(0)
    ref = torch.randn(37, 53)
    masked = ref.clone()
    masked[:, 50:] = 0.0                                  # a masking bug: the last columns left at zero
    drift = ref * (1 + 3e-4 * torch.randn_like(ref))      # elementwise fine, the norm bound not
    nan = ref.clone()
    nan[5, 7] = float("nan")
    big = torch.randn(16, 1024) * 64
    cases = [(masked, ref), (drift * 0.05, ref * 0.05), (nan, ref), (ref.clone(), ref), (big + 1e-3, big),
             (torch.zeros(3, 5), torch.ones(3, 5)), (torch.tensor(2.0), torch.tensor(1.0))]
    whole = [compare_outputs(c, r) for c, r in cases]
    scales = atol_scales(big)
    # 7: pieces of one row; 106: two rows of 53 at a time; 2048: whole rows of 1024, the rest in one slice
    for step in (7, 106, 2048):
        monkeypatch.setattr(correctness, "COMPARE_STEP", step)
        assert [compare_outputs(c, r) for c, r in cases] == whole, step
        assert torch.allclose(atol_scales(big), scales, rtol=1e-12, atol=0)
    assert whole[0] is not None and "columns 50..52 of 53 affected" in whole[0].feedback
    assert whole[1] is not None and "norm-relative" in whole[1].reason and "rows carry" in whole[1].feedback
    assert whole[2] is not None and "1 NaN/Inf" in whole[2].reason and "[5, 7]" in whole[2].feedback
    assert whole[3] is None and whole[4] is None
    assert whole[5] is not None and whole[6] is not None


def test_small_rows_beside_large_ones_keep_their_own_atol():
    # a concatenation of a large block and a softmax: the large rows' RMS must not excuse the small rows
    torch.manual_seed(0)
    large = torch.randn(8, 512) * 1e4
    small = torch.softmax(torch.randn(8, 512), dim=1)
    ref = torch.cat([large, small])
    lazy = ref.clone()
    lazy[8:] = 0.0   # the softmax rows skipped
    problem = compare_outputs(lazy, ref)
    # (softmax values below the plain atol 1e-4 pass elementwise as they always did; the rest fail)
    assert problem is not None and "rows 8..15 of 16 affected" in problem.feedback, problem
    assert int(problem.reason.split(" of ")[0].split()[-1]) > 4000, problem.reason
    honest = ref.clone()
    honest[:8] += 0.5   # rounding of the large rows' size, past an unscaled atol
    assert compare_outputs(honest, ref) is None


def test_a_keepdim_reductions_output_is_one_row_not_rows_of_one():
    # level2/14 of KernelBench: sum(x @ W.T / 2, dim=1, keepdim=True) * 1.5 at 1024 x 8192 x 8192, outputs of
    # size ~4700. An honest kernel (a GEMM in another order, then the sum) was 0.021 off where the sum
    # cancelled to near zero: rows of one element made that a relative bound of 2e-4 on a value of ~9
    torch.manual_seed(0)
    ref = torch.randn(1024, 1, dtype=torch.float64) * 4700
    ref[17, 0] = 9.0
    honest = ref + torch.randn_like(ref) * 0.01            # rounding of the terms' size (~5e-6 of the output)
    for shape in ((1024, 1), (1024, 1, 1), (1024,)):
        r, c = ref.float().reshape(shape), honest.float().reshape(shape)
        assert compare_outputs(c, r) is None, shape
        assert atol_scale(r) > 4000, shape
    # (B, C, 1, 1), a global pool: rows of C, each with its own scale
    pooled = torch.cat([torch.full((1, 8, 1, 1), 1e4), torch.full((1, 8, 1, 1), 0.5)])
    assert atol_scales(pooled).tolist() == [1e4, 1.0]
    # the wider atol excuses nothing larger: a zeroed half, an element off by 1e-3 of the output's size
    lazy = ref.float().clone()
    lazy[512:] = 0.0
    assert compare_outputs(lazy, ref.float()) is not None
    off = ref.float().clone()
    off[17, 0] += 5.0
    problem = compare_outputs(off, ref.float())
    assert problem is not None and "1 of 1024" in problem.reason, problem


def test_a_permuted_or_expanded_output_is_not_the_row_major_references_layout():
    from verifier.correctness import layout_problem, memory_order

    x = torch.randn(4, 5, 6)
    assert memory_order(x) == [0, 1, 2] and memory_order(torch.randn(4, 8)[:, :5]) == [0, 1]   # padding is no order
    assert memory_order(x.permute(0, 2, 1)) == [0, 2, 1] and memory_order(torch.randn(5).expand(4, 5)) == [1, 0]
    problem = layout_problem([x], [x], [memory_order(x.permute(0, 2, 1))])
    assert problem and "order [0, 2, 1]" in problem and "the reference's in [0, 1, 2]" in problem
    assert layout_problem([x], [x], [[1, 0]]) is not None
    # a row-major output is never refused, and one laid out as the reference's own view is the reference's
    assert layout_problem([x], [x.permute(0, 2, 1)], [[0, 1, 2]]) is None
    assert layout_problem([x], [torch.randn(4, 6, 5).permute(0, 2, 1)], [[0, 2, 1]]) is None
    assert layout_problem([x, 3], [x, 3], [[0, 1, 2], None]) is None and layout_problem([x], [x], None) is None
