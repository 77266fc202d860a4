"""Making Triton 3.6's CPU interpreter compute what the GPU computes.

    from verifier import interpreter_fixes
    interpreter_fixes.apply()     # in the sandboxed worker, on a CPU, before the candidate is imported

Three differences between `TRITON_INTERPRET=1` and a real GPU would otherwise
fail honest kernels on the CPU:
1. a runtime loop bound (`range(0, n_cols, BLOCK)`) is turned into an int with
   `int()` of a one-element array, which NumPy 2.4 refuses;
2. casting fp32 to bf16 truncates, where the GPU rounds to nearest even (an
   RMSNorm kernel then misses a 1e-2 tolerance the GPU meets with room);
3. `tl.dot` on bf16 operands multiplies their raw 16-bit patterns.
Each fix is NumPy-only, so the candidate's op audit sees no extra torch ops.
Only the worker applies them, and only where kernels run under the interpreter.
"""

from __future__ import annotations

import numpy as np

_applied = False


def _bf16_bits_to_f32(data: np.ndarray) -> np.ndarray:
    return (np.ascontiguousarray(data).astype(np.uint32) << 16).view(np.float32)


def _f32_to_bf16_bits_rtne(data: np.ndarray) -> np.ndarray:
    bits = np.ascontiguousarray(data, dtype=np.float32).view(np.uint32)
    rounded = ((bits + np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1))) >> 16).astype(np.uint16)
    return np.where(np.isnan(data), np.uint16(0x7FC0), rounded)


def apply() -> None:
    global _applied
    if _applied:
        return
    import triton.language as tl
    import triton.runtime.interpreter as interp

    original_patch = interp._patch_lang_tensor

    def patch_lang_tensor(tensor, scope):
        original_patch(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    interp._patch_lang_tensor = patch_lang_tensor

    original_cast = interp.InterpreterBuilder.cast_impl

    def cast_impl(self, src, dst_type):
        if src.dtype.scalar == tl.float32 and dst_type.scalar == tl.bfloat16:
            return interp.TensorHandle(_f32_to_bf16_bits_rtne(src.data), dst_type.scalar)
        return original_cast(self, src, dst_type)

    interp.InterpreterBuilder.cast_impl = cast_impl

    original_dot = interp.InterpreterBuilder.create_dot

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if a.dtype.scalar == tl.bfloat16 or b.dtype.scalar == tl.bfloat16:
            def widen(h):
                return _bf16_bits_to_f32(h.data) if h.dtype.scalar == tl.bfloat16 else h.data
            a = interp.TensorHandle(widen(a), tl.float32)
            b = interp.TensorHandle(widen(b), tl.float32)
        return original_dot(self, a, b, d, input_precision, max_num_imprecise_acc)

    interp.InterpreterBuilder.create_dot = create_dot
    _applied = True
