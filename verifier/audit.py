"""The op audit: which aten ops did the candidate's forward issue through torch?

    with OpAudit() as audit:
        out = model_new(*inputs)
    audit.compute_ops   # e.g. ["aten.softmax.default"]: torch did the work

The candidate's kernels must do the computing. Through torch it may only
allocate, view, reshape, copy and cast (the list below). Everything else is
"torch did the work" and rejects the kernel, naming the op. The Triton
interpreter itself issues set_/empty/new_empty/copy_ when it launches a
kernel on the CPU; those are in the allowed list too.
"""

from __future__ import annotations

from torch.utils._python_dispatch import TorchDispatchMode

# Base names (the part after "aten." and before the overload) a candidate may issue.
ALLOWED_OPS = frozenset({
    # allocation
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
    "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "zero_", "fill_",
    "scalar_tensor", "lift_fresh", "lift_fresh_copy", "resize_", "set_", "arange",
    # views and reshapes
    "view", "_unsafe_view", "reshape", "_reshape_alias", "view_as", "expand", "expand_as", "permute",
    "transpose", "t", "squeeze", "unsqueeze", "flatten", "unflatten", "as_strided", "slice", "select",
    "split", "split_with_sizes", "chunk", "unbind", "narrow", "detach", "alias", "movedim",
    "view_as_real", "view_as_complex", "diagonal", "unfold",
    # copies and dtype casts
    "copy_", "clone", "contiguous", "_to_copy", "to", "_copy_from", "_copy_from_and_resize",
    # queries that compute nothing
    "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "is_contiguous", "stride", "size",
    "dim", "numel", "is_same_size", "_has_compatible_shallow_copy_type", "record_stream",
})


def base_name(op_name: str) -> str:
    """'aten.softmax.default' -> 'softmax'; 'aten::add.Tensor' -> 'add'."""
    name = op_name.replace("::", ".")
    parts = name.split(".")
    return parts[1] if parts[0] == "aten" and len(parts) > 1 else parts[0]


class OpAudit(TorchDispatchMode):
    """Records every aten op dispatched while active."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))

    @property
    def compute_ops(self) -> list[str]:
        """The ops that did arithmetic through torch, in first-seen order, deduplicated."""
        seen: dict[str, None] = {}
        for op in self.ops:
            if base_name(op) not in ALLOWED_OPS:
                seen.setdefault(op, None)
        return list(seen)

    @property
    def distinct_ops(self) -> list[str]:
        return list(dict.fromkeys(self.ops))
