"""The op audit: what did the candidate's forward ask of torch, and who wrote its output?

    with OpAudit() as audit:
        out = model_new(*inputs)          # kernel launches report to audit.note_launch (verifier.launches)
    audit.compute_ops                     # e.g. ["aten.softmax.default"]: torch did the work
    audit.host_reads                      # e.g. ["Tensor.numpy"]: values went to the host to be computed there
    audit.unwritten(out)                  # outputs not every element of which a kernel of the candidate's stored
    audit.provenance(out)                 # the same, as a readable reason (None when every byte is a kernel's)

The candidate's kernels must do the computing. Through torch it may only
allocate, view, reshape, copy and cast (ALLOWED_OPS). Everything else is
"torch did the work" and rejects the kernel, naming the op. The Triton
interpreter itself issues set_/empty/new_empty/copy_ when it launches a
kernel on the CPU; those are in the allowed list too.

Three records come out of one forward:
- every aten op dispatched (a TorchDispatchMode);
- every read of tensor values into host memory: `.numpy()`, `.tolist()`,
  `__array__`, `apply_`/`map_`/`map2_` (a Python function per element, in C++
  loops the dispatcher never sees), and a tensor's values as text (`print`, an
  f-string: `__repr__`, `__format__`) (a TorchFunctionMode): numpy or Python
  arithmetic is not a kernel, and text of the values read back is a host copy;
- provenance by bytes: which bytes of which storages a kernel of the
  candidate's stored. On the CPU the launch counter (verifier.launches) sees
  every store the interpreter makes and reports the bytes; on a GPU a launch
  marks its tensor arguments whole. Every element of every output must have
  been stored by a kernel, and no torch op may write into it afterwards: a
  fill, a copy, any in-place op clears what it writes. One exception, so that
  an honest `out.to(x.dtype)` or `buf[:, :n].contiguous()` stays honest: a
  copy or cast by torch carries provenance when its whole source was stored by
  kernels and it keeps the source's element order (same shape, same order of
  dimensions in memory, nothing broadcast). A reordering copy never does: for a
  data-movement task (transpose) the movement is the work, so torch's
  `permute(...).contiguous()` of kernel-written data is torch's output, as is
  one of the input. Views share their storage's bytes. Where the reference's
  own output is an allocation (a constant such as zeros), nothing here allows
  torch's fill: no task in the suite has one.

The dispatch mode can be switched off by code that reaches torch's internals
(the static checks reject the ways to do so); the launch counter's profiler
(verifier.launches) records aten ops independently of it.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from verifier.correctness import memory_order

# Base names (the part after "aten." and before the overload) a candidate may issue.
ALLOWED_OPS = frozenset({
    # allocation
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
    "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "zero_", "fill_",
    "scalar_tensor", "lift_fresh", "lift_fresh_copy", "resize_", "set_", "arange",
    # views and reshapes
    "view", "_unsafe_view", "reshape", "_reshape_alias", "view_as", "expand", "expand_as", "permute",
    "transpose", "t", "squeeze", "unsqueeze", "flatten", "unflatten", "as_strided", "slice", "select",
    "split", "split_with_sizes", "chunk", "unbind", "narrow", "detach", "detach_", "alias", "movedim",
    "view_as_real", "view_as_complex", "diagonal", "unfold", "broadcast_to", "broadcast_tensors",
    # copies and dtype casts
    "copy_", "clone", "contiguous", "_to_copy", "to", "type_as", "_copy_from", "_copy_from_and_resize",
    "resolve_conj", "resolve_neg",
    # queries that compute nothing
    "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "is_contiguous", "stride", "size",
    "dim", "numel", "is_same_size", "_has_compatible_shallow_copy_type", "record_stream",
})
# Ops that overwrite their first argument with data that is not a kernel's.
OVERWRITE_OPS = frozenset({"fill_", "zero_"})
# Copies and casts: their output holds the source's values element for element (provenance by bytes may carry).
COPY_OPS = frozenset({"clone", "contiguous", "_to_copy", "to", "type_as", "lift_fresh_copy", "_copy_from",
                      "_copy_from_and_resize"})
# In-place ops that change a tensor's metadata, not its data (the interpreter's own set_ among them).
METADATA_OPS = frozenset({"set_", "resize_", "as_strided_", "squeeze_", "unsqueeze_", "transpose_", "t_",
                          "detach_", "requires_grad_", "record_stream", "resize_as_"})
# Tensor methods that hand tensor values to host code (__dlpack__: numpy's from_dlpack, on a host tensor).
HOST_READS = frozenset({"numpy", "tolist", "__array__", "__dlpack__",
                        # a Python callable run on every element, by C++ loops that never reach the dispatcher
                        "apply_", "map_", "map2_",
                        # a tensor's values as text (print, f-strings): torch's formatter reads them on the host
                        "__repr__", "__format__"})


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
        # NOTE: a CUDA tensor's __dlpack__ is how honest CuPy code shares device memory; a host tensor's is numpy's
        if name in HOST_READS and not (name == "__dlpack__" and args and getattr(args[0], "is_cuda", False)):
            self.sink.append(f"Tensor.{name}")
        return func(*args, **(kwargs or {}))


def _view_elements(t: torch.Tensor) -> np.ndarray:
    """Storage element offsets of every element of the view t, in its logical order (numpy only)."""
    offs = np.full((1,) * t.dim(), t.storage_offset(), dtype=np.int64)
    for d, (size, stride) in enumerate(zip(t.shape, t.stride())):
        shape = [1] * t.dim()
        shape[d] = size
        offs = offs + (np.arange(size, dtype=np.int64) * stride).reshape(shape)
    return np.broadcast_to(offs, tuple(t.shape)).reshape(-1)


def _view_bytes(t: torch.Tensor) -> np.ndarray:
    """[element, byte] offsets into the storage of every byte of every element of the view t."""
    size = t.element_size()
    return _view_elements(t)[:, None] * size + np.arange(size, dtype=np.int64)[None, :]


def _memory_order(t: torch.Tensor) -> tuple:
    """The dimensions of size > 1 from the outermost in memory to the innermost (verifier.correctness)."""
    return tuple(memory_order(t))


def _same_view(a, b) -> bool:
    return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and _key(a) == _key(b) and _key(a) != 0
            and a.storage_offset() == b.storage_offset() and a.shape == b.shape and a.stride() == b.stride()
            and a.dtype == b.dtype)


class _Stored:
    """Which bytes of one storage a kernel of the candidate's stored (bits None: all of them)."""

    def __init__(self, tensor: torch.Tensor, bits: np.ndarray | None):
        self.tensor = tensor   # held so that the memory cannot be reused while we look
        self.bits = bits


class OpAudit(TorchDispatchMode):
    """Records every aten op dispatched while active, host reads, and kernel-written storages."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []
        self.host_reads: list[str] = []
        # storage pointer -> the bytes of it kernels stored
        self._stored: dict[int, _Stored] = {}
        # storage pointer -> the last torch op that wrote into it after a kernel had (for the reason)
        self._torch_wrote: dict[int, str] = {}
        self._by_bytes = False   # True once a launch reported its stored bytes (the CPU interpreter)
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
        """A kernel of the candidate's ran with these arguments; kwargs["stored_bytes"], where given
        ({storage pointer: bool per byte}, verifier.launches on the CPU), says which bytes it stored.
        Without it (a GPU) every byte of each argument's storage counts as stored."""
        stored = (kwargs or {}).get("stored_bytes")
        if stored is not None:
            self._by_bytes = True
        for t in _tensors(list(args)):
            key = _key(t)
            if not key:
                continue
            entry = self._stored.get(key)
            bits = stored.get(key) if stored is not None else None
            if bits is None:
                self._stored[key] = _Stored(t, None)
            elif entry is None:
                self._stored[key] = _Stored(t, np.array(bits, dtype=bool))
            elif entry.bits is not None:
                if entry.bits.size != bits.size:   # the storage was resized between launches
                    grown = np.zeros(max(entry.bits.size, bits.size), dtype=bool)
                    grown[:entry.bits.size] = entry.bits
                    entry.bits = grown
                entry.bits[:bits.size] |= bits
            self._torch_wrote.pop(key, None)

    def _element_stored(self, t: torch.Tensor) -> np.ndarray:
        """One bool per element of the view t: every byte of it stored by a kernel (and not overwritten)."""
        entry = self._stored.get(_key(t))
        if entry is None:
            return np.zeros(t.numel(), dtype=bool)
        if entry.bits is None:
            return np.ones(t.numel(), dtype=bool)
        where = _view_bytes(t)
        inside = where < entry.bits.size
        return (entry.bits[np.where(inside, where, 0)] & inside).all(axis=1)

    def _is_written(self, t) -> bool:
        if not isinstance(t, torch.Tensor):
            return False
        entry = self._stored.get(_key(t))
        if entry is None or entry.bits is None:   # NOTE: no per-element array for a whole storage (GB on a GPU)
            return entry is not None
        return bool(self._element_stored(t).all())

    def _set_view(self, t: torch.Tensor, stored: bool, by: str) -> None:
        """The bytes of the view t were just written by torch: a kernel's (a carrying copy) or not."""
        key = _key(t)
        if not key:
            return
        entry = self._stored.get(key)
        if not self._by_bytes:   # whole storages only (a GPU)
            if stored:
                self._stored[key] = _Stored(t, None)
            elif entry is not None:
                del self._stored[key]
                self._torch_wrote[key] = by
            return
        if entry is None:
            if not stored:
                return
            entry = self._stored[key] = _Stored(t, np.zeros(t.untyped_storage().nbytes(), dtype=bool))
        elif entry.bits is None:
            entry.bits = np.ones(t.untyped_storage().nbytes(), dtype=bool)
        where = _view_bytes(t).reshape(-1)
        entry.bits[where[where < entry.bits.size]] = stored
        if not stored:
            self._torch_wrote[key] = by

    def _carries(self, src, dst: torch.Tensor) -> bool:
        """A torch copy from src into dst keeps a kernel's provenance: see the module docstring."""
        if not isinstance(src, torch.Tensor) or tuple(src.shape) != tuple(dst.shape):
            return False
        if any(st == 0 and n > 1 for st, n in zip(src.stride(), src.shape)):
            return False   # a broadcast: torch replicated a value
        return _memory_order(src) == _memory_order(dst) and self._is_written(src)

    def _note_device_to_host(self, name: str, args, out, op: str) -> None:
        """A copy from device memory into host memory: the values are on their way to host code."""
        if name == "copy_":
            dst, src = (args + (None, None))[:2]
        elif name.startswith("_copy_from"):
            src, dst = (args + (None, None))[:2]
        else:
            src, dst = (args[0] if args else None), next(iter(_tensors(out)), None)
        if isinstance(src, torch.Tensor) and isinstance(dst, torch.Tensor) and src.is_cuda \
                and dst.device.type == "cpu":
            self.host_reads.append(f"{op} (device to host)")

    def unwritten(self, outputs: list) -> list[int]:
        """Indices of tensor outputs some element of which no kernel of the candidate's stored."""
        return [i for i, o in enumerate(outputs)
                if isinstance(o, torch.Tensor) and o.numel() > 0 and not self._is_written(o)]

    def provenance(self, outputs: list) -> str | None:
        """Why an output's bytes are not all a kernel's, as one line; None when every byte is."""
        for i, o in enumerate(outputs):
            if not isinstance(o, torch.Tensor) or o.numel() == 0 or self._is_written(o):
                continue
            ok = self._element_stored(o)
            if ok.all():
                continue
            label = "its output" if len(outputs) == 1 else f"output {i}"
            missing = int((~ok).sum())
            first = [int(v) for v in np.unravel_index(int(np.argmin(ok)), tuple(o.shape))] if o.dim() else []
            how = self._torch_wrote.get(_key(o))
            if missing == o.numel():
                what = f"{label} was not written by any kernel of the candidate's (no element of it is a kernel's store)"
            else:
                what = (f"{label} was not written by any kernel of the candidate's in full: {missing} of {o.numel()} "
                        f"elements are not a kernel's store (first at {first})")
            if how:
                what += f"; torch's {how} wrote into it after the kernels"
            return what + ": every element of an output must be stored by the candidate's kernels, not by torch"
        return None

    # -- the dispatch hook -------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.ops.append(str(func))
        out = func(*args, **kwargs)
        name = base_name(str(func))
        if name in ("copy_", "_to_copy", "_copy_from", "_copy_from_and_resize"):
            self._note_device_to_host(name, tuple(args), out, str(func))
        if name == "copy_" and len(args) >= 2 and isinstance(args[0], torch.Tensor):
            dst, src = args[0], args[1]
            if not _same_view(dst, src):   # NOTE: the interpreter copies each argument onto itself per launch
                self._set_view(dst, self._carries(src, dst), str(func))
        elif name in COPY_OPS:
            src = next(iter(_tensors(list(args))), None)
            for t in _tensors(out):
                if src is None or _key(t) != _key(src):
                    self._set_view(t, self._carries(src, t), str(func))
        elif name not in METADATA_OPS:
            schema = getattr(func, "_schema", None)
            for arg, value in zip(getattr(schema, "arguments", []), args):
                alias = getattr(arg, "alias_info", None)
                if alias is not None and alias.is_write and isinstance(value, torch.Tensor):
                    self._set_view(value, False, str(func))
            for arg in getattr(schema, "arguments", []):
                alias = getattr(arg, "alias_info", None)
                value = kwargs.get(arg.name)
                if alias is not None and alias.is_write and isinstance(value, torch.Tensor):
                    self._set_view(value, False, str(func))
        return out

    @property
    def compute_ops(self) -> list[str]:
        """The ops that did arithmetic through torch, in first-seen order, deduplicated."""
        return compute_ops(self.ops)

    @property
    def distinct_ops(self) -> list[str]:
        return list(dict.fromkeys(self.ops))
