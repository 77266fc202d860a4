"""Counting the kernels a candidate's forward launches, what they wrote, and what torch ran meanwhile.

    with LaunchCounter("cpu", on_launch=audit.note_launch, inputs=xs) as launches:
        model_new(*xs)
    launches.count        # kernels launched
    launches.aten_ops     # every aten op the profiler saw, e.g. ["aten::empty", "aten::_softmax"]

On the CPU (Triton interpreter) every launch goes through
`InterpretedFunction.run`, and every store a kernel makes through the
interpreter's `create_masked_store` / atomics: the counter wraps them for the
duration and reports, per launch, the tensor arguments whose memory the kernel
actually stored to, and which bytes of each storage it stored (`stored_bytes`,
one bool per byte: provenance by bytes, verifier.audit). On a GPU the counter asks the torch profiler (CUPTI) for
the kernels that ran, which sees Triton, CuPy and load_inline kernels alike;
Triton launches are also seen at `JITFunction.run`, and their tensor arguments
other than forward's own inputs are reported as written (a GPU kernel's stores
are not visible from the host).

The profiler also records every aten op, below any Python dispatch mode: a
candidate that switches the op audit off still shows up here.
"""

from __future__ import annotations


def _tensor_args(args, kwargs):
    import torch

    out = []

    def walk(obj):
        if isinstance(obj, torch.Tensor):
            out.append(obj)
        elif isinstance(obj, (list, tuple)):
            for item in obj:
                walk(item)
        elif isinstance(getattr(obj, "base", None), torch.Tensor):  # Triton's TensorDescriptor
            out.append(obj.base)

    for a in list(args) + list(kwargs.values()):
        walk(a)
    return out


class LaunchCounter:
    def __init__(self, device: str, on_launch=None, inputs=()):
        self.device = device
        self.count = 0
        self.triton_launches = 0   # of them, through Triton's launcher (whose tensor arguments are known)
        self.names: list[str] = []
        self.aten_ops: list[str] = []
        self._on_launch = on_launch        # called with (written tensors, {}) after each launch
        self._input_keys = {_storage_key(t) for t in _tensor_args(inputs, {})}
        self._restores: list = []
        self._prof = None
        self._stores: list[tuple[int, int]] = []   # [lowest, highest] byte address of each store, CPU
        self._store_addrs: list[tuple[object, int]] = []   # (addresses stored to, bytes per element), CPU

    def __enter__(self) -> "LaunchCounter":
        import torch

        if self.device == "cpu":
            self._wrap_interpreter()
            self._prof = torch.autograd.profiler.profile(use_kineto=False)
        else:
            self._wrap_jit()
            self._prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                            torch.profiler.ProfilerActivity.CUDA])
        self._prof.__enter__()
        return self

    # -- CPU: the interpreter ------------------------------------------------------------------
    def _wrap_interpreter(self) -> None:
        import numpy as np
        from triton.runtime.interpreter import InterpretedFunction, InterpreterBuilder

        counter = self
        run, masked_store = InterpretedFunction.run, InterpreterBuilder.create_masked_store
        atomic_rmw, atomic_cas = InterpreterBuilder.create_atomic_rmw, InterpreterBuilder.create_atomic_cas

        def note_store(ptrs, mask) -> None:
            addrs = np.asarray(ptrs.data)
            if mask is not None:
                addrs = addrs[np.broadcast_to(np.asarray(mask.data), addrs.shape)]
            if addrs.size:
                counter._stores.append((int(addrs.min()), int(addrs.max())))
                try:
                    width = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
                except AttributeError:  # not a pointer handle: count the first byte only
                    width = 1
                counter._store_addrs.append((addrs.reshape(-1).astype(np.int64), width))

        def counted_store(b, ptrs, value, mask, *rest):
            note_store(ptrs, mask)
            return masked_store(b, ptrs, value, mask, *rest)

        def counted_rmw(b, op, ptr, val, mask, *rest):
            note_store(ptr, mask)
            return atomic_rmw(b, op, ptr, val, mask, *rest)

        def counted_cas(b, ptr, *rest):
            note_store(ptr, None)
            return atomic_cas(b, ptr, *rest)

        def counted_run(fn_self, *args, **kwargs):
            counter._stores = []
            counter._store_addrs = []
            out = run(fn_self, *args, **kwargs)
            counter.count += 1
            counter.triton_launches += 1
            counter.names.append(getattr(fn_self.fn, "__name__", "kernel"))
            if counter._on_launch:
                written = [t for t in _tensor_args(args, kwargs) if counter._stored_to(t)]
                counter._on_launch(written, {"stored_bytes": counter.stored_bytes(written)})
            return out

        InterpretedFunction.run = counted_run
        InterpreterBuilder.create_masked_store = counted_store
        InterpreterBuilder.create_atomic_rmw = counted_rmw
        InterpreterBuilder.create_atomic_cas = counted_cas
        self._restores.append(lambda: setattr(InterpretedFunction, "run", run))
        self._restores.append(lambda: setattr(InterpreterBuilder, "create_masked_store", masked_store))
        self._restores.append(lambda: setattr(InterpreterBuilder, "create_atomic_rmw", atomic_rmw))
        self._restores.append(lambda: setattr(InterpreterBuilder, "create_atomic_cas", atomic_cas))

    def stored_bytes(self, tensors) -> dict:
        """{storage data_ptr: bool array, one per byte of the storage}: which bytes this launch stored."""
        import numpy as np

        out: dict = {}
        for t in tensors:
            storage = t.untyped_storage()
            lo, n = storage.data_ptr(), storage.nbytes()
            if lo in out or n == 0:
                continue
            hit = np.zeros(n, dtype=bool)
            for addrs, width in self._store_addrs:
                rel = addrs - lo
                rel = rel[(rel >= 0) & (rel < n)]
                for k in range(width):
                    hit[np.minimum(rel + k, n - 1)] = True
            out[lo] = hit
        return out

    def _stored_to(self, t) -> bool:
        storage = t.untyped_storage()
        lo, hi = storage.data_ptr(), storage.data_ptr() + storage.nbytes()
        return any(a < hi and b >= lo for a, b in self._stores)

    # -- GPU: Triton's launcher ------------------------------------------------------------------
    def _wrap_jit(self) -> None:
        try:
            from triton.runtime.jit import JITFunction
        except ImportError:  # a CUDA-only candidate on a machine without Triton
            return
        counter = self
        run = JITFunction.run

        def noted_run(fn_self, *args, **kwargs):
            out = run(fn_self, *args, **kwargs)
            if not kwargs.get("warmup"):
                counter.triton_launches += 1
            if counter._on_launch and not kwargs.get("warmup"):
                written = [t for t in _tensor_args(args, kwargs) if _storage_key(t) not in counter._input_keys]
                counter._on_launch(written, {})
            return out

        JITFunction.run = noted_run
        self._restores.append(lambda: setattr(JITFunction, "run", run))

    def __exit__(self, *exc) -> None:
        import torch

        for restore in reversed(self._restores):
            restore()
        self._restores = []
        if self.device != "cpu":
            torch.cuda.synchronize()
        self._prof.__exit__(*exc)
        if exc[0] is not None:
            return
        if self.device == "cpu":
            events = self._prof.function_events
            self.aten_ops = [e.name for e in events if e.name.startswith("aten::")]
            return
        events = list(self._prof.events())
        self.aten_ops = [e.name for e in events if e.name.startswith("aten::")
                         and e.device_type == torch.autograd.DeviceType.CPU]
        kernels = [e.name for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
        # NOTE: torch's own copy/fill kernels (from .contiguous(), zeros) are not the candidate's work.
        self.names = [k for k in kernels if not _is_torch_kernel(k)]
        self.count = len(self.names)


def _storage_key(t) -> int:
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return 0


def _is_torch_kernel(name: str) -> bool:
    return "at::native" in name or "at::cuda" in name or name.startswith(("Memcpy", "Memset", "[memcpy", "[memset"))
