"""Compiling a CUDA candidate on a machine without a GPU, to report its compile errors.

On such a machine a CUDA candidate cannot run. Inside the sandboxed worker,
`install()` puts stand-ins for `cupy` and `torch.utils.cpp_extension.load_inline`
in place before the candidate is imported: each compiles the CUDA source it is
given with `nvcc` for sm_90 (the same C++ the real backend would build) and
returns an object that refuses to launch. A compile error surfaces as
`CompileException` carrying nvcc's own message; `built()` lists what compiled.
The verdict then is "not_run" (compiled with nvcc, not run here). Whether nvcc
can compile it here at all (nvcc present; for load_inline, torch's CUDA
headers) is decided before the job, by the judge's side
(`verifier.devices.cuda_checkable_here`): where it cannot, the candidate is
"not_checkable" and these stand-ins never run.

An object that compiled is kept under `$TORCH_EXTENSIONS_DIR/kgen-offline/`, named by
the SHA-256 of nvcc, its flags and the source: the same source again is not compiled
again (`cache_hits()`); `build_inline` is the stand-in's compile for verifier.inline_build.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import types

ARCH = "sm_90"
_built: list[str] = []
_hits: list[str] = []     # of those, found compiled in the cache


class CompileException(Exception):
    """nvcc rejected the CUDA source; the message is nvcc's."""


class MissingHeader(CompileException):
    """nvcc stopped at a header of torch's or the CUDA toolkit's that this machine does not have (a torch built
    without CUDA has no c10/cuda; a partial toolkit no cusparse.h): the machine's limit, not the source's fault."""

    def __init__(self, header: str, message: str):
        super().__init__(message)
        self.header = header


# Where the headers of torch's CUDA build and of the CUDA toolkit live: one of these missing is this machine's lack
ENVIRONMENT_HEADERS = re.compile(r"^(c10/|ATen/|torch/|caffe2/|thrust/|cub/|cuda|cublas|cusparse|cufft|curand|"
                                 r"cusolver|cudnn|nvrtc|nvToolsExt|nvtx|nccl|cooperative_groups|mma\.h|sm_\d+_)")
_FATAL_MISSING = re.compile(r"fatal error: ([\w./+-]+): No such file or directory")


def _cached_object(nvcc: str, code: str, extra: list[str]) -> str | None:
    """Where this compile's object is kept: under TORCH_EXTENSIONS_DIR/kgen-offline, by the SHA-256 of nvcc,
    its flags and the source (verifier.inline_build points TORCH_EXTENSIONS_DIR at a folder of the source's own)."""
    root = os.environ.get("TORCH_EXTENSIONS_DIR")
    if not root:
        return None
    key = hashlib.sha256(json.dumps([nvcc, ARCH, list(extra), code]).encode()).hexdigest()[:32]
    return os.path.join(root, "kgen-offline", f"{key}.o")


def _nvcc(code: str, label: str, extra: list[str]) -> None:
    from verifier.devices import find_nvcc

    nvcc = find_nvcc()   # NOTE: where verifier.devices looked before the job: the judge's check and this agree
    if nvcc is None:
        raise CompileException("nvcc not found: cannot compile CUDA sources on this machine (install the CUDA toolkit)")
    kept = _cached_object(nvcc, code, extra)
    if kept is not None and os.path.isfile(kept):
        _built.append(label)   # compiled before, the same source with the same flags: nvcc said yes then
        _hits.append(label)
        return
    with tempfile.TemporaryDirectory(dir=os.getcwd()) as tmp:
        src = os.path.join(tmp, "kernel.cu")
        with open(src, "w", encoding="utf-8") as f:
            f.write(code)
        cmd = [nvcc, f"-arch={ARCH}", "-c", src, "-o", os.path.join(tmp, "kernel.o"), *extra]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if done.returncode == 0 and kept is not None:
            try:
                os.makedirs(os.path.dirname(kept), exist_ok=True)
                shutil.copyfile(os.path.join(tmp, "kernel.o"), kept + f".{os.getpid()}.tmp")
                os.replace(kept + f".{os.getpid()}.tmp", kept)
            except OSError:
                pass   # a cache that cannot be written costs the next compile, nothing else
    if done.returncode != 0:
        msg = (done.stderr or done.stdout).replace(src, f"{label}.cu")
        missing = _FATAL_MISSING.search(msg)
        if missing and ENVIRONMENT_HEADERS.match(missing.group(1)):
            raise MissingHeader(missing.group(1), f"nvcc failed for {label}: this machine has no {missing.group(1)}")
        raise CompileException(f"nvcc failed for {label}:\n{msg.strip()[:3000]}")
    _built.append(label)


class _Unrunnable:
    def __init__(self, what: str):
        self._what = what

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self._what} was compiled but cannot run: no GPU on this machine")

    def __getattr__(self, name):
        return _Unrunnable(f"{self._what}.{name}")


def _options(options) -> list[str]:
    keep = []
    for opt in options or ():
        if isinstance(opt, str) and opt.startswith(("-std", "-D", "--std", "-I")):
            keep.append(opt)
    return keep


class RawModule:
    def __init__(self, code: str = "", options=(), name_expressions=None, **kwargs):
        header = "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"  # NVRTC sources often lean on these
        _nvcc(header + code, "cupy.RawModule", _options(options))

    def get_function(self, name: str):
        return _Unrunnable(f"cupy kernel {name}")


class RawKernel(RawModule):
    def __init__(self, code: str, name: str, options=(), **kwargs):
        super().__init__(code=code, options=options)

    def __call__(self, *args, **kwargs):
        raise RuntimeError("cupy.RawKernel was compiled but cannot run: no GPU on this machine")


def _fake_cupy() -> types.ModuleType:
    cupy = types.ModuleType("cupy")
    cupy.RawModule = RawModule
    cupy.RawKernel = RawKernel
    cuda = types.ModuleType("cupy.cuda")
    cuda.ExternalStream = _Unrunnable("cupy.cuda.ExternalStream")
    cuda.compiler = types.SimpleNamespace(CompileException=CompileException)
    cupy.cuda = cuda
    cupy.__kgen_offline__ = True
    return cupy


def _load_inline(name, cpp_sources="", cuda_sources=None, functions=None, extra_cuda_cflags=None, **kwargs):
    from torch.utils import cpp_extension

    if not cuda_sources:
        raise CompileException(f"load_inline({name!r}) has no cuda_sources: nothing for the GPU to run")
    code = cuda_sources if isinstance(cuda_sources, str) else "\n".join(cuda_sources)
    includes = [f"-I{p}" for p in cpp_extension.include_paths()]
    py_inc = f"-I{sysconfig_include()}"
    _nvcc(code, f"load_inline {name}", includes + [py_inc, "-std=c++17", *(_options(extra_cuda_cflags))])
    return _Unrunnable(f"load_inline module {name}")


def build_inline(name, cpp_sources="", cuda_sources=None, functions=None, extra_cuda_cflags=None, **kwargs) -> None:
    """What _load_inline compiles, for verifier.inline_build's build process (it caches the object)."""
    _load_inline(name, cpp_sources, cuda_sources, functions, extra_cuda_cflags, **kwargs)


def sysconfig_include() -> str:
    import sysconfig

    return sysconfig.get_paths()["include"]


def install() -> None:
    """Put the stand-ins in place (inside the sandboxed worker only)."""
    sys.modules["cupy"] = _fake_cupy()
    sys.modules["cupy.cuda"] = sys.modules["cupy"].cuda
    from torch.utils import cpp_extension

    cpp_extension.load_inline = _load_inline


def built() -> list[str]:
    return list(_built)


def cache_hits() -> list[str]:
    """Those of built() whose object was found in the cache (compiled before with the same flags)."""
    return list(_hits)
