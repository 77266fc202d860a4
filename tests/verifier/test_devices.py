"""verifier.devices: CUDA-placed tasks checked on the CPU, and whether CUDA candidates can be compiled here."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from verifier import devices
from verifier.devices import cuda_checkable_here, on_device
from verifier.task import import_task_module

KB = Path(__file__).parent / "kernelbench"
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="shows what fails without CUDA")


def test_tensor_cuda_lands_on_the_target():
    with on_device("cpu"):
        x = torch.ones(3).cuda()
    assert x.device.type == "cpu"


def test_device_keyword_lands_on_the_target():
    with on_device("cpu"):
        x = torch.zeros(3, device="cuda:0")
    assert x.device.type == "cpu"


def test_to_cuda_lands_on_the_target():
    with on_device("cpu"):
        x = torch.ones(3).to(torch.device("cuda"))
    assert x.device.type == "cpu"


def test_module_cuda_lands_on_the_target():
    with on_device("cpu"):
        layer = torch.nn.Linear(3, 4).cuda()
    assert layer.weight.device.type == "cpu"


def test_meta_target_allocates_nothing():
    with torch.device("meta"), on_device("meta"):
        x = torch.rand(4096, 393216).cuda()
    assert x.device.type == "meta"


def test_outside_the_mode_nothing_is_rewritten():
    with on_device("cpu"):
        pass
    assert torch.zeros(1, device="meta").device.type == "meta"


@no_cuda
def test_cuda_placed_task_fails_here_as_written():
    module = import_task_module(KB / "cuda_placed_relu.py", "kgen_test_cuda_plain")
    with pytest.raises((AssertionError, RuntimeError)):
        module.get_inputs()


def test_cuda_placed_task_inputs_are_cpu_tensors_in_a_cpu_check():
    module = import_task_module(KB / "cuda_placed_relu.py", "kgen_test_cuda_cpu", device="cpu")
    assert all(x.device.type == "cpu" for x in module.get_inputs())


def test_cuda_placed_task_model_is_on_the_cpu_in_a_cpu_check():
    module = import_task_module(KB / "cuda_placed_relu.py", "kgen_test_cuda_model", device="cpu")
    model = module.Model(*module.get_init_inputs())
    out = model(*module.get_inputs())
    assert model.offset.device.type == "cpu" and out.device.type == "cpu"


def test_cuda_checkable_needs_nvcc(monkeypatch):
    monkeypatch.setattr(devices.shutil, "which", lambda name: None)
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    ok, why = cuda_checkable_here()
    assert not ok and "nvcc" in why


def test_cuda_checkable_needs_torch_cuda_headers(monkeypatch, tmp_path):
    from torch.utils import cpp_extension

    monkeypatch.setattr(devices.shutil, "which", lambda name: "/usr/bin/nvcc")
    monkeypatch.setattr(cpp_extension, "include_paths", lambda *a, **k: [str(tmp_path)])
    ok, why = cuda_checkable_here()
    assert not ok and "CUDAStream.h" in why


def test_cuda_checkable_with_nvcc_and_headers(monkeypatch, tmp_path):
    from torch.utils import cpp_extension

    (tmp_path / "c10" / "cuda").mkdir(parents=True)
    (tmp_path / "c10" / "cuda" / "CUDAStream.h").write_text("")
    monkeypatch.setattr(devices.shutil, "which", lambda name: "/usr/bin/nvcc")
    monkeypatch.setattr(cpp_extension, "include_paths", lambda *a, **k: [str(tmp_path)])
    assert cuda_checkable_here() == (True, "")


def test_meta_target_takes_explicit_cpu_tensors_too():
    with on_device("meta"):
        x = torch.empty(4096, 393216, device="cpu")
    assert x.device.type == "meta"


def test_cpu_target_leaves_other_devices_alone():
    with on_device("cpu"):
        x = torch.empty(3, device="meta")
    assert x.device.type == "meta"


# ---- other processes on the GPU (a real nvidia-smi's output format, from a stand-in on PATH)

UUID = "GPU-5f2c0a9e-1b3d-4c5e-8f70-123456789abc"


def _fake_nvidia_smi(tmp_path, monkeypatch, lines: list[str], code: int = 0) -> None:
    script = tmp_path / "nvidia-smi"
    body = "".join(f"echo {line!r}\n" for line in lines)
    script.write_text(f"#!/bin/sh\n{body}exit {code}\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")


def test_other_processes_on_the_gpu_are_named_and_kgens_own_are_not(tmp_path, monkeypatch):
    me = os.getpid()
    _fake_nvidia_smi(tmp_path, monkeypatch, [f"{UUID}, {me}, 1024", f"{UUID}, 4242, 20480", f"{UUID}, 777, 600",
                                             f"GPU-00000000-0000-0000-0000-000000000000, 5151, 9000",
                                             f"{UUID}, 6161, [N/A]"])
    assert devices.other_gpu_processes(UUID, mine={me, 777}) == [(4242, 20480), (6161, 0)]
    assert devices.other_gpu_processes(UUID.lower().removeprefix("GPU-"), mine={me, 777, 4242, 6161}) == []


def test_other_processes_cannot_be_told_where_kgen_itself_is_not_listed(tmp_path, monkeypatch):
    # a container's nvidia-smi shows the host's pids: none of them can be said to be another's
    _fake_nvidia_smi(tmp_path, monkeypatch, [f"{UUID}, 31337, 1024", f"{UUID}, 4242, 20480"])
    assert devices.other_gpu_processes(UUID, mine={os.getpid()}) is None
    _fake_nvidia_smi(tmp_path, monkeypatch, [f"{UUID}, {os.getpid()}, 1024"], code=9)
    assert devices.other_gpu_processes(UUID, mine=set()) is None
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert devices.other_gpu_processes(UUID, mine=set()) is None
    assert devices.other_gpu_processes("", mine=set()) is None
