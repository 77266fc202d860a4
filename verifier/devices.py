"""Device-neutral tasks: a task written for CUDA, checked on another device; and whether CUDA sources can be.

KernelBench task files often put their tensors on the GPU themselves
(`torch.rand(...).cuda()`, `device="cuda"`, `.to("cuda")`, `Model().cuda()`).
On a machine checked on the CPU those calls fail before any kernel is seen.
`on_device("cpu")` is a context manager under which every such call lands on
the given device instead ("cpu" for a CPU check; "meta" to measure a task
without memory, where an explicit `device="cpu"` goes to meta as well):

    from verifier.devices import on_device
    with on_device("cpu"):
        inputs = module.get_inputs()        # .cuda() inside returns a CPU tensor

It is a TorchFunctionMode: it sees torch's functions and Tensor methods
(`Tensor.cuda`, `Tensor.to`, factories with `device=`), so `nn.Module.cuda()`
and `.to("cuda")` are covered too, since they move each parameter through
those. It is meant for the task's own code (the trusted reference), never
around a candidate.

`cuda_checkable_here(backend)` says whether a CUDA candidate can be compiled
here at all, on a machine where it cannot run: nvcc present, and for
`load_inline` torch built with its CUDA headers. Where it cannot, the verdict
is "not_checkable" (verifier.verify), decided before any sandbox starts: the
machine's shortcoming, never the kernel's compile error.

    python -m verifier.devices      # prints what this machine can check

`other_gpu_processes(uuid, mine)` lists the compute processes nvidia-smi sees on one GPU besides the pids
in `mine` (kgen and its sandboxes): kgen's timing checks assume a GPU of its own, and a verdict says who
else was there. None where that cannot be told: no nvidia-smi, or it does not list kgen's own pid (a
container whose PID namespace it does not see into), so that a pid of kgen's is never named as another's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


def _device_type(device) -> str | None:
    """"cuda" for "cuda", "cuda:1" or torch.device("cuda"); "cpu" likewise; None for anything else."""
    import torch

    if isinstance(device, torch.device):
        return device.type
    if isinstance(device, str) and device.split(":", 1)[0] in ("cuda", "cpu"):
        return device.split(":", 1)[0]
    return None


def _mode_class():
    """The TorchFunctionMode subclass, built on first use so that importing this module needs no torch."""
    global _MODE
    if _MODE is not None:
        return _MODE
    import torch
    from torch.overrides import TorchFunctionMode

    cuda_methods = {torch.Tensor.cuda}

    class DeviceRewrite(TorchFunctionMode):
        """Rewrites CUDA device arguments of torch calls to one target device."""

        def __init__(self, target: str):
            super().__init__()
            self.target = torch.device(target)
            # NOTE: measuring on meta must allocate nothing: an explicit device="cpu" moves there too
            self.moved = ("cuda", "cpu") if self.target.type == "meta" else ("cuda",)

        def _moves(self, device) -> bool:
            return _device_type(device) in self.moved

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if func in cuda_methods:
                # Tensor.cuda(device=None, non_blocking=False, memory_format=...): only the move matters
                return args[0].to(self.target)
            if "device" in kwargs and self._moves(kwargs["device"]):
                kwargs["device"] = self.target
            if func is not torch.device and any(self._moves(a) for a in args):
                # NOTE: positional devices are Tensor.to("cuda") and its relatives; torch.device("cuda") itself
                # is left alone, so code that only names the device still sees what it wrote
                args = tuple(self.target if self._moves(a) else a for a in args)
            return func(*args, **kwargs)

    _MODE = DeviceRewrite
    return _MODE


_MODE = None


def on_device(target: str):
    """A context manager under which CUDA device arguments in torch calls mean `target` ("cpu" or "meta")."""
    return _mode_class()(target)


def mentions_cuda(source: str) -> bool:
    """True when a task's source could put tensors on the GPU itself (the rewrite is only needed then)."""
    return "cuda" in source


def find_nvcc() -> str | None:
    """nvcc's path: on PATH, else under CUDA_HOME or CUDA_PATH; None when there is none."""
    nvcc = shutil.which("nvcc")
    if nvcc is not None:
        return nvcc
    for var in ("CUDA_HOME", "CUDA_PATH"):
        root = os.environ.get(var)
        if root and (Path(root) / "bin" / "nvcc").is_file():
            return str(Path(root) / "bin" / "nvcc")
    return None


def cuda_checkable_here(backend: str = "load_inline") -> tuple[bool, str]:
    """(True, "") when a CUDA candidate of `backend` ("load_inline" or "cupy") can be compiled here; else
    (False, why not).

    Both need nvcc (on PATH, or under CUDA_HOME / CUDA_PATH). load_inline needs torch's CUDA headers too:
    a CPU build of torch may ship without c10/cuda/CUDAStream.h, and then load_inline cannot compile a CUDA
    extension against it even where nvcc exists. A cupy source is plain CUDA C++: nvcc alone compiles it.
    """
    if find_nvcc() is None:
        return False, "no nvcc here (not on PATH, nor under CUDA_HOME or CUDA_PATH)"
    if backend != "load_inline":
        return True, ""
    try:
        import torch
        from torch.utils import cpp_extension

        # NOTE: the plain (CPU) include paths: asking for CUDA's raises where CUDA_HOME is unset; torch's own
        # include folder holds c10/cuda in every build made with CUDA
        dirs = cpp_extension.include_paths()
    except Exception as exc:  # noqa: BLE001 - a torch that cannot say where its headers are cannot build them
        return False, f"torch's C++ include paths are unknown here ({type(exc).__name__}: {exc})"
    if not any((Path(d) / "c10" / "cuda" / "CUDAStream.h").is_file() for d in dirs):
        return False, (f"torch {torch.__version__} here has no CUDA headers (c10/cuda/CUDAStream.h): "
                       f"a CPU build of torch cannot compile a load_inline CUDA extension")
    return True, ""


NVIDIA_SMI_TIMEOUT_S = 10


def other_gpu_processes(uuid: str, mine: set[int], own_pid: int | None = None) -> list[tuple[int, int]] | None:
    """(pid, MiB used) of every compute process on the GPU whose UUID is `uuid` that is not in `mine`, by
    nvidia-smi; None where that cannot be told (module docstring). own_pid: the process that must be listed
    for the pids to be believed (default: this one)."""
    exe = shutil.which("nvidia-smi")
    if not exe or not uuid:
        return None
    try:
        done = subprocess.run([exe, "--query-compute-apps=gpu_uuid,pid,used_memory", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    want = uuid.strip().lower().removeprefix("gpu-")
    listed: list[tuple[int, int]] = []
    for line in done.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 3 or parts[0].lower().removeprefix("gpu-") != want:
            continue
        try:
            pid = int(parts[1])
        except ValueError:
            continue
        try:
            mib = int(parts[2])
        except ValueError:   # "[N/A]" where the driver does not say
            mib = 0
        listed.append((pid, mib))
    if (os.getpid() if own_pid is None else own_pid) not in {pid for pid, _ in listed}:
        return None
    return [(pid, mib) for pid, mib in listed if pid not in mine]


def gpu_uuid(index: int) -> str:
    """The UUID of CUDA device `index` as nvidia-smi writes it ("GPU-..."), or "" where torch cannot say."""
    try:
        import torch

        uuid = str(torch.cuda.get_device_properties(index).uuid)
        return uuid if uuid.lower().startswith("gpu-") else f"GPU-{uuid}"
    except Exception:  # noqa: BLE001 - an old torch or no CUDA: nothing to compare
        return ""


if __name__ == "__main__":
    for name in ("load_inline", "cupy"):
        ok, why = cuda_checkable_here(name)
        print(f"{name} CUDA candidates: " + ("can be compiled here" if ok else f"not checkable here: {why}"))
