"""Comparing a candidate's outputs with the reference's, and saying how they differ.

    problem = compare_outputs(candidate_out, reference_out, atol=None, rtol=None)
    # None when they match; else a Mismatch with a one-line reason and capped feedback

Tolerances by dtype unless the task sets ATOL/RTOL: fp32 1e-4, bf16/fp16 1e-2,
exact for integers and bools. NaN or Inf in the candidate's output never
passes where the reference is finite.

The absolute tolerance is for values of unit size: an output whose reference is larger on the whole (a
product over K = 4096, root-mean-square 64) has rounding errors as large as its terms' sizes, not its own
element's, and an honest fp32 GEMM that sums in another order (3xTF32, split-K) lands about 1e-3 off where
an element happens to lie near zero. So atol is applied times the reference's root-mean-square value where
that exceeds 1 (atol_scale); rtol stays relative to each element.

The elementwise test alone is absolute where values are small: at 8192
softmax columns every output of a negative input is below fp32's atol 1e-4,
so an output with half its elements zeroed passed it. Every floating output
must therefore also meet a norm-relative bound, ||y - ref|| / ||ref|| (in
float64, over the whole output) at most NORM_RTOL for its dtype: a constant
or half-zeroed output fails it whenever the reference is not constant to
within that bound. Feedback is written for a person and an
LLM alike: max abs and rel error, how many elements differ, and the first few
mismatching indices with both values.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

DEFAULT_TOL = {
    torch.float64: 1e-6,
    torch.float32: 1e-4,
    torch.float16: 1e-2,
    torch.bfloat16: 1e-2,
}
# Norm-relative bound ||y - ref||_2 / ||ref||_2 per output dtype. Measured (2026-12-01, CPU
# interpreter, small inputs, two seeds) on every kernel in tests/verifier/candidates/good and the
# heuristic proposer's first kernels (tests/agent/test_heuristic_verified.py): fp32 kernels land at
# 0..4.2e-7 (cumsum worst: summation order), bf16 ones at 0..3.0e-3 (swiglu worst: one bf16 rounding
# of the output, 2^-9 relative, on values the reference rounds differently). The bounds leave >200x
# (fp32) and ~7x (bf16/fp16) over the worst honest kernel, and sit far below what a skipped part
# costs: zeroing a fraction f of the elements costs ~sqrt(f) (a tenth: ~0.3), a constant output ~1.
NORM_RTOL = {
    torch.float64: 1e-7,
    torch.float32: 1e-4,   # typical fp32 error is 1e-7..1e-5; a TF32 product (10-bit mantissa) is ~3e-4
    torch.float16: 2e-2,   # fp16 rounds to 2^-11; kept at bf16's bound, inputs as rough as bf16's may come
    torch.bfloat16: 2e-2,  # bf16 rounds to 2^-8: honest kernels measured up to 3.0e-3
}
MAX_SHOWN = 8            # mismatching indices listed in the feedback
MAX_FEEDBACK_CHARS = 2000


@dataclass(frozen=True)
class Mismatch:
    reason: str     # one line
    feedback: str   # capped, multi-line


def tolerance(dtype: torch.dtype, atol: float | None, rtol: float | None) -> tuple[float, float]:
    default = DEFAULT_TOL.get(dtype, 0.0)
    return (default if atol is None else atol), (default if rtol is None else rtol)


def _is_sequence(out) -> bool:
    # NOTE: exact types only (and torch's own structseqs such as torch.return_types.max): iterating a
    # subclass of tuple would run the candidate's __iter__ inside the harness.
    kind = type(out)
    return kind in (tuple, list) or (kind.__module__ == "torch.return_types" and kind.__iter__ is tuple.__iter__
                                     and kind.__getitem__ is tuple.__getitem__)


def flatten_outputs(out) -> list:
    """A forward may return a tensor or a (nested) tuple/list of them."""
    if _is_sequence(out):
        items = []
        for o in out:
            items.extend(flatten_outputs(o))
        return items
    return [out]


def not_plain(outputs: list) -> str | None:
    """The type of the first output that is not a plain tensor or Python value, if any.

    A tensor subclass or any other object could compute its values when the
    harness first reads them, after the kernel "finished" and outside the op audit.
    """
    for o in outputs:
        if type(o) is torch.Tensor or type(o) in (int, float, bool, type(None)):
            continue
        return type(o).__qualname__
    return None


def compare_outputs(cand, ref, atol: float | None = None, rtol: float | None = None) -> Mismatch | None:
    cands, refs = flatten_outputs(cand), flatten_outputs(ref)
    if len(cands) != len(refs):
        return Mismatch(f"returned {len(cands)} output(s), the reference returns {len(refs)}", "")
    for i, (c, r) in enumerate(zip(cands, refs)):
        label = "output" if len(refs) == 1 else f"output {i}"
        if not isinstance(r, torch.Tensor):
            if c != r:
                return Mismatch(f"{label}: got {c!r}, expected {r!r}", "")
            continue
        if type(c) is not torch.Tensor:
            kind = type(c).__name__
            return Mismatch(f"{label}: returned a {kind}, expected a plain torch.Tensor", "")
        problem = _compare_tensor(label, c, r, atol, rtol)
        if problem:
            return problem
    return None


def atol_scale(ref: torch.Tensor) -> float:
    """What atol is multiplied by for this reference: its root-mean-square value over its finite elements, at
    least 1 (module docstring); 1 for exact dtypes and empty tensors."""
    if ref.numel() == 0 or not (ref.is_floating_point() or ref.is_complex()):
        return 1.0
    flat = ref.detach().reshape(-1)
    squares, count = 0.0, 0
    step = 1 << 22   # NOTE: in slices: a float64 copy of a multi-GB output would not fit beside it
    for start in range(0, flat.numel(), step):
        part = flat[start:start + step].to(torch.complex128 if flat.is_complex() else torch.float64)
        part = part[torch.isfinite(part)]
        squares += float((part.abs() ** 2).sum())
        count += part.numel()
    return max(1.0, (squares / count) ** 0.5) if count else 1.0


def _compare_tensor(label: str, c: torch.Tensor, r: torch.Tensor, atol, rtol) -> Mismatch | None:
    if tuple(c.shape) != tuple(r.shape):
        return Mismatch(f"{label}: shape {tuple(c.shape)}, expected {tuple(r.shape)}", "")
    if c.dtype != r.dtype:
        return Mismatch(f"{label}: dtype {c.dtype}, expected {r.dtype}", "")
    if c.device != r.device:
        return Mismatch(f"{label}: on {c.device}, expected {r.device}", "")
    a_tol, r_tol = tolerance(r.dtype, atol, rtol)
    cf, rf = c.detach().double(), r.detach().double()
    abs_err = (cf - rf).abs()
    scale = atol_scale(r)
    allowed = a_tol * scale + r_tol * rf.abs()
    bad = ~(abs_err <= allowed)            # NaN in either side counts as bad
    both_same_inf = torch.isinf(cf) & torch.isinf(rf) & (cf == rf)
    bad &= ~both_same_inf
    nonfinite = ~torch.isfinite(cf) & torch.isfinite(rf)
    bad |= nonfinite
    n_bad = int(bad.sum())
    if n_bad == 0:
        return _compare_norm(label, cf, rf, r.dtype, atol, rtol)
    finite = torch.isfinite(abs_err)
    max_abs = float(abs_err[finite].max()) if bool(finite.any()) else float("nan")
    rel = abs_err / rf.abs().clamp_min(1e-12)
    max_rel = float(rel[finite].max()) if bool(finite.any()) else float("nan")
    n_nonfinite = int(nonfinite.sum())
    total = r.numel()
    reason = (f"{label}: {n_bad} of {total} elements differ ({100.0 * n_bad / max(total, 1):.2f}%), "
              f"max abs err {max_abs:.3g}, max rel err {max_rel:.3g} (atol {a_tol:g}"
              f"{f' x {scale:.3g}, the reference RMS' if scale > 1 else ''}, rtol {r_tol:g})")
    if n_nonfinite:
        reason += f"; {n_nonfinite} NaN/Inf where the reference is finite"
    lines = [reason, f"first mismatching indices ({label}, shape {tuple(r.shape)}):"]
    idx = bad.nonzero()[:MAX_SHOWN]
    for row in idx.tolist():
        pos = tuple(row)
        lines.append(f"  {list(pos)}: got {float(cf[pos]):.6g}, expected {float(rf[pos]):.6g}")
    if n_bad > MAX_SHOWN:
        lines.append(f"  ... and {n_bad - MAX_SHOWN} more")
    pattern = _pattern_hint(bad)
    if pattern:
        lines.append(pattern)
    feedback = "\n".join(lines)
    if len(feedback) > MAX_FEEDBACK_CHARS:
        feedback = feedback[: MAX_FEEDBACK_CHARS - 20] + "\n  ... (truncated)"
    return Mismatch(reason, feedback)


# However loose a task's own ATOL makes the norm bound, it stays below what skipping a part costs.
MAX_NORM_RTOL_FROM_ATOL = 0.05


def norm_bound(dtype: torch.dtype, atol: float | None, rtol: float | None, ref_rms: float) -> float | None:
    """The norm-relative bound for an output of this dtype (None for exact dtypes: integers, bools).

    A task that sets its own tolerance loosens the bound as far (never tightens it): its RTOL as it is,
    its ATOL relative to the reference's root-mean-square value, capped at MAX_NORM_RTOL_FROM_ATOL."""
    bound = NORM_RTOL.get(dtype)
    if bound is None:
        return None
    if rtol is not None:
        bound = max(bound, rtol)
    if atol is not None and ref_rms > 0:
        bound = max(bound, min(atol / ref_rms, MAX_NORM_RTOL_FROM_ATOL))
    return bound


def _compare_norm(label: str, cf: torch.Tensor, rf: torch.Tensor, dtype: torch.dtype, atol, rtol) -> Mismatch | None:
    """||c - r|| / ||r|| within norm_bound, or a Mismatch saying how far off and where the error sits."""
    if cf.numel() == 0:
        return None
    ref_norm = float(torch.linalg.vector_norm(rf))
    if ref_norm == 0.0 or ref_norm != ref_norm or ref_norm == float("inf"):
        return None   # an all-zero (or overflowing) reference: the elementwise test is the whole story
    bound = norm_bound(dtype, atol, rtol, ref_norm / rf.numel() ** 0.5)
    if bound is None:
        return None
    diff = cf - rf
    rel = float(torch.linalg.vector_norm(diff)) / ref_norm
    if rel <= bound:
        return None
    zeroed = int(((cf == 0) & (rf != 0)).sum())
    total = rf.numel()
    reason = (f"{label}: every element is within the elementwise tolerance, but ||out - ref|| / ||ref|| = "
              f"{rel:.3g} exceeds {bound:g} (the norm-relative bound for {str(dtype).replace('torch.', '')})")
    lines = [reason]
    if zeroed:
        lines.append(f"{zeroed} of {total} elements ({100.0 * zeroed / total:.1f}%) are 0 where the reference "
                     f"is not: small values were skipped or left unwritten")
    if bool((cf == cf.flatten()[0]).all()):
        lines.append(f"the output is constant ({float(cf.flatten()[0]):.6g}) where the reference varies from "
                     f"{float(rf.min()):.6g} to {float(rf.max()):.6g}")
    err = diff.abs()
    worst = err.flatten().argmax().item()
    pos = list(torch.unravel_index(torch.tensor(worst), tuple(rf.shape))) if rf.dim() else []
    pos = [int(p) for p in pos]
    lines.append(f"largest error at {pos}: got {float(cf.flatten()[worst]):.6g}, "
                 f"expected {float(rf.flatten()[worst]):.6g}")
    if rf.dim() >= 2:
        per_row = (diff.reshape(-1, rf.shape[-1]) ** 2).sum(dim=1)
        share = per_row / per_row.sum().clamp_min(1e-300)
        rows_off = int((share > 1.0 / per_row.numel()).sum())
        lines.append(f"{rows_off} of {per_row.numel()} rows carry more than their share of the error")
    return Mismatch(reason, "\n".join(lines)[:MAX_FEEDBACK_CHARS])


def _pattern_hint(bad: torch.Tensor) -> str:
    """A short hint where the errors sit, e.g. only the last columns (a masking bug)."""
    if bad.dim() < 2:
        return ""
    cols = bad.reshape(-1, bad.shape[-1]).any(dim=0).nonzero().flatten()
    rows = bad.reshape(-1, bad.shape[-1]).any(dim=1).nonzero().flatten()
    n_cols, n_rows = bad.shape[-1], bad.numel() // bad.shape[-1]
    parts = []
    if 0 < len(cols) < n_cols:
        parts.append(f"columns {int(cols.min())}..{int(cols.max())} of {n_cols} affected")
    if 0 < len(rows) < n_rows:
        parts.append(f"rows {int(rows.min())}..{int(rows.max())} of {n_rows} affected")
    return ("where: " + "; ".join(parts)) if parts else ""


def aliases(out_tensors: list, inputs: list) -> str | None:
    """The name of an input the output shares memory with, if any."""
    for o in out_tensors:
        if not isinstance(o, torch.Tensor):
            continue
        o_storage = o.untyped_storage().data_ptr()
        for j, x in enumerate(inputs):
            if isinstance(x, torch.Tensor) and x.untyped_storage().data_ptr() == o_storage and o.numel() > 0:
                return f"input {j}"
    return None
