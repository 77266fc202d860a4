"""Comparing a candidate's outputs with the reference's, and saying how they differ.

    problem = compare_outputs(candidate_out, reference_out, atol=None, rtol=None)
    # None when they match; else a Mismatch with a one-line reason and capped feedback

Tolerances by dtype unless the task sets ATOL/RTOL: fp32 1e-4, bf16/fp16 1e-2,
exact for integers and bools. NaN or Inf in the candidate's output never
passes where the reference is finite.

The absolute tolerance is for values of unit size. A row of an output whose reference is larger on the whole
(a product over K = 4096, root-mean-square 64) has rounding errors as large as its terms' sizes, not its own
element's: an honest fp32 GEMM that sums in another order (3xTF32, split-K) lands about 1e-3 off where an
element happens to lie near zero. So atol is applied times the root-mean-square value of the element's row
(the last dimension longer than 1; the whole output for fewer than two dimensions without trailing size-1 ones)
where that exceeds 1 (atol_scales). A keepdim reduction's (1024, 1) output is one row of 1024 values, not 1024
rows of one: a sum over 8192 GEMM outputs that cancels to near zero is off by the terms' rounding, not its own.
Per row, not per output, so that small rows beside large ones (a concatenation) keep their own atol. rtol
stays relative to each element.

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

import math
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


def memory_order(t: torch.Tensor) -> list[int]:
    """The dimensions of size > 1 from the outermost in memory to the innermost (ties by position): [0, 1, 2]
    for a row-major tensor, however padded; a permuted view lists them permuted, an expanded one puts its
    stride-0 dimensions last."""
    dims = [d for d in range(t.dim()) if t.shape[d] > 1]
    return sorted(dims, key=lambda d: (-t.stride(d), d))


def layout_problem(cand: list, ref: list, layouts: list | None) -> str | None:
    """Why an output's layout is not the reference's, from the candidate process's account of its outputs'
    memory orders (`layouts`, one per flattened output, None for a value), or None.

    Values alone cannot tell a transpose from a copy returned as a permuted view: the view's reader (kgen's own
    tensor file, a user's next op) does the reordering, and the copy's time is what was measured. So each output
    must lie in memory as the reference's does (padding aside), or in its shape's own order: a row-major output
    is never refused, whatever view the reference returns."""
    if layouts is None:
        return None
    for j, (r, order) in enumerate(zip(ref, layouts)):
        if type(r) is not torch.Tensor or order is None:
            continue
        want = memory_order(r)
        if list(order) != want and list(order) != sorted(order):
            return (f"output {j} lies in memory with its dimensions in the order {list(order)} (outermost first), "
                    f"the reference's in {want}: a view that reorders (or expands) dimensions leaves that work to "
                    f"whoever reads it; write the output in the reference's layout")
    return None


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


# Elements compared at a time: each float64 temporary of a slice is 128 MiB, whatever the output's size. Whole,
# a 6 GiB fp32 output (KernelBench's ReLU) took nine times that in temporaries beside it, and the judge ran the
# GPU out of memory comparing an honest kernel's output.
COMPARE_STEP = 1 << 24


def _row_length(shape: tuple) -> int:
    """The length of a row for the per-row sums: the last dimension longer than 1 (trailing size-1 dims, as a
    keepdim reduction leaves them, are not rows of one element), the whole tensor where fewer than two
    dimensions remain without them."""
    while len(shape) > 1 and shape[-1] == 1:
        shape = shape[:-1]
    return shape[-1] if len(shape) >= 2 else max(math.prod(shape), 1)


def _spans(numel: int, cols: int):
    """(start, end, first row, rows) of the flat slices compared at a time, row-major: whole rows (rows >= 1) where
    a row fits in COMPARE_STEP, else pieces of one row (rows 0: the piece lies in `first row`)."""
    if cols <= 0:
        return
    if cols <= COMPARE_STEP:
        step = (COMPARE_STEP // cols) * cols
        for start in range(0, numel, step):
            end = min(start + step, numel)
            yield start, end, start // cols, (end - start) // cols
        return
    for row_start in range(0, numel, cols):
        for start in range(row_start, row_start + cols, COMPARE_STEP):
            yield start, min(start + COMPARE_STEP, row_start + cols), row_start // cols, 0


def _per_row(values: torch.Tensor, first: int, rows: int, cols: int, into: torch.Tensor) -> None:
    """Add the slice's per-row sums of values (a span of _spans) into `into`, one entry a row."""
    if rows:
        into[first:first + rows] += values.view(rows, cols).sum(dim=1)
    else:
        into[first] += values.sum()


def atol_scales(ref: torch.Tensor) -> torch.Tensor:
    """What atol is multiplied by, per row of ref (its last dimension; one value for fewer than two dimensions):
    the root-mean-square of the row's finite elements, at least 1 (module docstring). float64, on ref's device;
    all ones for exact dtypes."""
    cols = _row_length(tuple(ref.shape))
    rows = max(ref.numel() // cols, 1) if cols else 1
    ones = torch.ones(rows, dtype=torch.float64, device=ref.device)
    if ref.numel() == 0 or not (ref.is_floating_point() or ref.is_complex()):
        return ones
    squares = torch.zeros(rows, dtype=torch.float64, device=ref.device)
    counts = torch.zeros(rows, dtype=torch.float64, device=ref.device)
    flat = ref.detach().reshape(-1)
    for start, end, first, n_rows in _spans(flat.numel(), cols):
        part = flat[start:end]
        part = part.abs().double() if part.is_complex() else part.double()
        finite = torch.isfinite(part)
        _per_row(torch.where(finite, part * part, 0.0), first, n_rows, cols, squares)
        _per_row(finite.double(), first, n_rows, cols, counts)
    return torch.maximum(ones, (squares / counts.clamp_min(1.0)).sqrt())


def atol_scale(ref: torch.Tensor) -> float:
    """The largest of atol_scales(ref): how far atol may stretch anywhere in the output."""
    return float(atol_scales(ref).max())


def _slices(c: torch.Tensor, r: torch.Tensor):
    """(start, candidate slice, reference slice, first row, rows) in float64 over the flattened tensors, the
    spans of _spans."""
    cflat, rflat = c.detach().reshape(-1), r.detach().reshape(-1)
    for start, end, first, rows in _spans(rflat.numel(), _row_length(tuple(r.shape))):
        yield start, cflat[start:end].double(), rflat[start:end].double(), first, rows


def _position(flat_index: int, shape: tuple) -> list[int]:
    return [int(p) for p in torch.unravel_index(torch.tensor(flat_index), shape)] if shape else []


def _compare_tensor(label: str, c: torch.Tensor, r: torch.Tensor, atol, rtol) -> Mismatch | None:
    if tuple(c.shape) != tuple(r.shape):
        return Mismatch(f"{label}: shape {tuple(c.shape)}, expected {tuple(r.shape)}", "")
    if c.dtype != r.dtype:
        return Mismatch(f"{label}: dtype {c.dtype}, expected {r.dtype}", "")
    if c.device != r.device:
        return Mismatch(f"{label}: on {c.device}, expected {r.device}", "")
    a_tol, r_tol = tolerance(r.dtype, atol, rtol)
    scales = atol_scales(r)
    scale = float(scales.max())
    shape, total = tuple(r.shape), r.numel()
    per_row = len(shape) >= 2 and scale > 1.0
    cols = shape[-1] if len(shape) >= 2 and shape[-1] > 0 else 0
    n_bad = n_nonfinite = 0
    max_abs = max_rel = float("nan")
    shown: list[tuple[list[int], float, float]] = []
    bad_cols = torch.zeros(cols, dtype=torch.bool, device=r.device) if cols else None
    bad_rows = torch.zeros(total // cols, dtype=torch.bool, device=r.device) if cols else None
    for start, cf, rf, first, rows in _slices(c, r):
        abs_err = (cf - rf).abs()
        if not per_row:
            stretch = scale
        elif rows:
            stretch = scales[first:first + rows].repeat_interleave(cols)
        else:
            stretch = float(scales[first])
        bad = ~(abs_err <= a_tol * stretch + r_tol * rf.abs())   # NaN in either side counts as bad
        bad &= ~(torch.isinf(cf) & torch.isinf(rf) & (cf == rf))
        nonfinite = ~torch.isfinite(cf) & torch.isfinite(rf)
        bad |= nonfinite
        count = int(bad.sum())
        if not count:
            continue
        n_bad += count
        n_nonfinite += int(nonfinite.sum())
        where = bad.nonzero().flatten()
        for i in where[:MAX_SHOWN - len(shown)].tolist():
            shown.append((_position(start + i, shape), float(cf[i]), float(rf[i])))
        if cols:
            flat = where + start
            bad_cols[flat % cols] = True
            bad_rows[flat // cols] = True
    if n_bad == 0:
        return _compare_norm(label, c, r, atol, rtol)
    for _, cf, rf, _, _ in _slices(c, r):   # the largest errors, over every element: only a mismatch needs them
        abs_err = (cf - rf).abs()
        finite = torch.isfinite(abs_err)
        if bool(finite.any()):
            part_abs = float(abs_err[finite].max())
            part_rel = float((abs_err / rf.abs().clamp_min(1e-12))[finite].max())
            max_abs = part_abs if not max_abs >= part_abs else max_abs
            max_rel = part_rel if not max_rel >= part_rel else max_rel
    reason = (f"{label}: {n_bad} of {total} elements differ ({100.0 * n_bad / max(total, 1):.2f}%), "
              f"max abs err {max_abs:.3g}, max rel err {max_rel:.3g} (atol {a_tol:g}"
              f"{f' x the reference RMS of {scale:.3g}' if scale > 1 and not per_row else ''}"
              f"{f' x the row RMS where above 1, at most {scale:.3g}' if per_row else ''}, rtol {r_tol:g})")
    if n_nonfinite:
        reason += f"; {n_nonfinite} NaN/Inf where the reference is finite"
    lines = [reason, f"first mismatching indices ({label}, shape {shape}):"]
    for pos, got, expected in shown:
        lines.append(f"  {pos}: got {got:.6g}, expected {expected:.6g}")
    if n_bad > MAX_SHOWN:
        lines.append(f"  ... and {n_bad - MAX_SHOWN} more")
    pattern = _pattern_hint(bad_cols, bad_rows)
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


def _compare_norm(label: str, c: torch.Tensor, r: torch.Tensor, atol, rtol) -> Mismatch | None:
    """||c - r|| / ||r|| within norm_bound, or a Mismatch saying how far off and where the error sits."""
    if r.numel() == 0:
        return None
    ref_sq = diff_sq = 0.0
    for _, cf, rf, _, _ in _slices(c, r):
        ref_sq += float((rf * rf).sum())
        diff_sq += float(((cf - rf) ** 2).sum())
    ref_norm = ref_sq ** 0.5
    if ref_norm == 0.0 or ref_norm != ref_norm or ref_norm == float("inf"):
        return None   # an all-zero (or overflowing) reference: the elementwise test is the whole story
    bound = norm_bound(r.dtype, atol, rtol, ref_norm / r.numel() ** 0.5)
    if bound is None:
        return None
    rel = diff_sq ** 0.5 / ref_norm
    if rel <= bound:
        return None
    shape, total = tuple(r.shape), r.numel()
    first = float(c.detach().reshape(-1)[0].double())
    zeroed, constant = 0, True
    r_min, r_max = float("inf"), float("-inf")
    worst, worst_err, worst_got, worst_expected = 0, -1.0, 0.0, 0.0
    rows = total // shape[-1] if len(shape) >= 2 and shape[-1] > 0 else 0
    per_row = torch.zeros(rows, dtype=torch.float64, device=r.device) if rows else None
    for start, cf, rf, first_row, n_rows in _slices(c, r):
        zeroed += int(((cf == 0) & (rf != 0)).sum())
        constant = constant and bool((cf == first).all())
        r_min, r_max = min(r_min, float(rf.min())), max(r_max, float(rf.max()))
        diff = cf - rf
        err = diff.abs()
        i = int(err.argmax())
        if float(err[i]) > worst_err:
            worst, worst_err, worst_got, worst_expected = start + i, float(err[i]), float(cf[i]), float(rf[i])
        if rows:
            _per_row(diff * diff, first_row, n_rows, shape[-1], per_row)
    reason = (f"{label}: every element is within the elementwise tolerance, but ||out - ref|| / ||ref|| = "
              f"{rel:.3g} exceeds {bound:g} (the norm-relative bound for {str(r.dtype).replace('torch.', '')})")
    lines = [reason]
    if zeroed:
        lines.append(f"{zeroed} of {total} elements ({100.0 * zeroed / total:.1f}%) are 0 where the reference "
                     f"is not: small values were skipped or left unwritten")
    if constant:
        lines.append(f"the output is constant ({first:.6g}) where the reference varies from "
                     f"{r_min:.6g} to {r_max:.6g}")
    pos = _position(worst, shape) if shape else []
    lines.append(f"largest error at {pos}: got {worst_got:.6g}, expected {worst_expected:.6g}")
    if rows:
        share = per_row / per_row.sum().clamp_min(1e-300)
        rows_off = int((share > 1.0 / rows).sum())
        lines.append(f"{rows_off} of {rows} rows carry more than their share of the error")
    return Mismatch(reason, "\n".join(lines)[:MAX_FEEDBACK_CHARS])


def _pattern_hint(bad_cols: torch.Tensor | None, bad_rows: torch.Tensor | None) -> str:
    """A short hint where the errors sit, e.g. only the last columns (a masking bug): from which columns and
    which rows (of the last dimension) hold a mismatch."""
    if bad_cols is None or bad_rows is None:
        return ""
    cols, rows = bad_cols.nonzero().flatten(), bad_rows.nonzero().flatten()
    parts = []
    if 0 < len(cols) < bad_cols.numel():
        parts.append(f"columns {int(cols.min())}..{int(cols.max())} of {bad_cols.numel()} affected")
    if 0 < len(rows) < bad_rows.numel():
        parts.append(f"rows {int(rows.min())}..{int(rows.max())} of {bad_rows.numel()} affected")
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
