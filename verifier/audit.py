"""The op audit: what did the candidate's forward ask of torch, and who wrote its output?

    with OpAudit() as audit:
        out = model_new(*inputs)          # kernel launches report to audit.note_launch (verifier.launches)
    audit.compute_ops                     # e.g. ["aten.softmax.default"]: torch did the work
    audit.host_reads                      # e.g. ["Tensor.numpy"]: values went to the host to be computed there
    audit.unwritten(out)                  # outputs no kernel of the candidate's wrote

The candidate's kernels must do the computing. Through torch it may only
allocate, view, reshape, copy and cast (ALLOWED_OPS). Everything else is
"torch did the work" and rejects the kernel, naming the op. The Triton
interpreter itself issues set_/empty/new_empty/copy_ when it launches a
kernel on the CPU; those are in the allowed list too.

Three records come out of one forward:
- every aten op dispatched (a TorchDispatchMode);
- every read of tensor values into host memory: `.numpy()`, `.tolist()`,
  `__array__` (a TorchFunctionMode): numpy or Python arithmetic is not a kernel;
- which storages hold data a kernel of the candidate's wrote: each launch marks
  its tensor arguments; copies, casts and views of a marked tensor are marked;
  a fill or a copy from unmarked data unmarks its destination. An output that
  is not marked was not computed by the candidate's kernels (it was launched
  on a dummy tensor, or the result was computed elsewhere and returned).

The dispatch mode can be switched off by code that reaches torch's internals
(the static checks reject the ways to do so); the launch counter's profiler
(verifier.launches) records aten ops independently of it.
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode
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
    "view_as_real", "view_as_complex", "diagonal", "unfold", "broadcast_to", "broadcast_tensors",
    # copies and dtype casts
    "copy_", "clone", "contiguous", "_to_copy", "to", "type_as", "_copy_from", "_copy_from_and_resize",
    "resolve_conj", "resolve_neg",
    # queries that compute nothing
    "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "is_contiguous", "stride", "size",
    "dim", "numel", "is_same_size", "_has_compatible_shallow_copy_type", "record_stream",
})
# Ops whose output carries its input's data: a kernel-written input makes a kernel-written output.
CARRY_OPS = frozenset({
    "view", "_unsafe_view", "reshape", "_reshape_alias", "view_as", "expand", "expand_as", "permute",
    "transpose", "t", "squeeze", "unsqueeze", "flatten", "unflatten", "as_strided", "slice", "select",
    "split", "split_with_sizes", "chunk", "unbind", "narrow", "detach", "alias", "movedim",
    "view_as_real", "view_as_complex", "diagonal", "unfold", "broadcast_to", "broadcast_tensors",
    "clone", "contiguous", "_to_copy", "to", "type_as", "lift_fresh", "lift_fresh_copy",
    "resolve_conj", "resolve_neg",
})
# Ops that overwrite their first argument with data that is not a kernel's.
OVERWRITE_OPS = frozenset({"fill_", "zero_"})
# Tensor methods that hand tensor values to host code.
HOST_READS = frozenset({"numpy", "tolist", "__array__"})


def base_name(op_name: str) -> str:
    """'aten.softmax.default' -> 'softmax'; 'aten::add.Tensor' -> 'add'."""
    name = op_name.replace("::", ".")
    parts = name.split(".")
    return parts[1] if parts[0] == "aten" and len(parts) > 1 else parts[0]


def compute_ops(op_names) -> list[str]:
    """The ops among `op_names` that did arithmetic through torch, first-seen order, deduplicated."""
    seen: dict[str, None] = {}
    for op in op_names:
        if base_name(op) not in ALLOWED_OPS:
            seen.setdefault(op, None)
    return list(seen)


def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from _tensors(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from _tensors(item)
    elif isinstance(getattr(obj, "base", None), torch.Tensor):  # Triton's TensorDescriptor
        yield obj.base


def _key(t: torch.Tensor) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # tensors without storage (meta, some subclasses)
        return 0


class _HostReads(TorchFunctionMode):
    def __init__(self, sink: list[str]):
        super().__init__()
        self.sink = sink

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in HOST_READS:
            self.sink.append(f"Tensor.{name}")
        return func(*args, **(kwargs or {}))


class OpAudit(TorchDispatchMode):
    """Records every aten op dispatched while active, host reads, and kernel-written storages."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []
        self.host_reads: list[str] = []
        # storage pointer -> one tensor on it, held so that the memory cannot be reused while we look
        self._written: dict[int, torch.Tensor] = {}
        self._host = _HostReads(self.host_reads)

    def __enter__(self):
        self._host.__enter__()
        try:
            return super().__enter__()
        except BaseException:
            self._host.__exit__(None, None, None)
            raise

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            self._host.__exit__(*exc)

    # -- provenance --------------------------------------------------------------------------
    def note_launch(self, args, kwargs) -> None:
        """A kernel of the candidate's ran with these arguments: their storages now hold its data."""
        for t in _tensors(list(args) + list((kwargs or {}).values())):
            self._mark(t)

    def _mark(self, t: torch.Tensor) -> None:
        key = _key(t)
        if key:
            self._written[key] = t

    def _is_written(self, t) -> bool:
        return isinstance(t, torch.Tensor) and _key(t) in self._written

    def unwritten(self, outputs: list) -> list[int]:
        """Indices of tensor outputs whose memory no kernel of the candidate's wrote."""
        return [i for i, o in enumerate(outputs)
                if isinstance(o, torch.Tensor) and o.numel() > 0 and not self._is_written(o)]

    # -- the dispatch hook -------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.ops.append(str(func))
        out = func(*args, **kwargs)
        name = base_name(str(func))
        if name == "copy_" and len(args) >= 2:
            dst, src = args[0], args[1]
            if self._is_written(src):
                self._mark(dst)
            elif isinstance(dst, torch.Tensor):
                self._written.pop(_key(dst), None)
        elif name in OVERWRITE_OPS and args and isinstance(args[0], torch.Tensor):
            self._written.pop(_key(args[0]), None)
        elif name in CARRY_OPS and any(self._is_written(t) for t in _tensors(list(args) + list(kwargs.values()))):
            for t in _tensors(out):
                self._mark(t)
        return out

    @property
    def compute_ops(self) -> list[str]:
        """The ops that did arithmetic through torch, in first-seen order, deduplicated."""
        return compute_ops(self.ops)

    @property
    def distinct_ops(self) -> list[str]:
        return list(dict.fromkeys(self.ops))
