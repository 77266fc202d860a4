"""Counting the kernels a candidate's forward launches.

    with LaunchCounter("cpu") as launches:
        model_new(*inputs)
    launches.count

On the CPU (Triton interpreter) every launch goes through
`InterpretedFunction.run`; the counter wraps it for the duration. On a GPU the
counter asks the torch profiler (CUPTI) for the kernels that ran, which sees
Triton, CuPy and load_inline kernels alike. A forward that launches nothing of
its own did not compute its output.
"""

from __future__ import annotations


class LaunchCounter:
    def __init__(self, device: str):
        self.device = device
        self.count = 0
        self.names: list[str] = []
        self._restore = None
        self._prof = None

    def __enter__(self) -> "LaunchCounter":
        if self.device == "cpu":
            from triton.runtime.interpreter import InterpretedFunction

            original = InterpretedFunction.run
            counter = self

            def counted_run(fn_self, *args, **kwargs):
                counter.count += 1
                counter.names.append(getattr(fn_self.fn, "__name__", "kernel"))
                return original(fn_self, *args, **kwargs)

            InterpretedFunction.run = counted_run
            self._restore = lambda: setattr(InterpretedFunction, "run", original)
        else:
            import torch

            self._prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA])
            self._prof.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._restore:
            self._restore()
        if self._prof is not None:
            import torch

            torch.cuda.synchronize()
            self._prof.__exit__(*exc)
            if exc[0] is None:
                kernels = [e.name for e in self._prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
                # NOTE: torch's own copy/fill kernels (from .contiguous(), zeros) are not the candidate's work.
                self.names = [k for k in kernels if not _is_torch_kernel(k)]
                self.count = len(self.names)


def _is_torch_kernel(name: str) -> bool:
    return "at::native" in name or "at::cuda" in name or name.startswith(("Memcpy", "Memset", "[memcpy", "[memset"))
