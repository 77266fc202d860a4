"""verifier.cuda_offline: the CPU's compile-only path tells this machine's missing headers from the source's errors."""

from __future__ import annotations

import pytest

from verifier import cuda_offline
from verifier.devices import find_nvcc

pytestmark = pytest.mark.skipif(find_nvcc() is None, reason="no nvcc here")


def test_a_missing_torch_or_toolkit_header_is_this_machines_lack(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(cuda_offline.MissingHeader) as caught:
        cuda_offline._nvcc("#include <c10/cuda/kgen_no_such_header.h>\n__global__ void k() {}\n", "probe", [])
    assert caught.value.header == "c10/cuda/kgen_no_such_header.h"


def test_a_missing_header_of_the_sources_own_is_its_compile_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(cuda_offline.CompileException) as caught:
        cuda_offline._nvcc('#include "kernel_helpers.h"\n__global__ void k() {}\n', "probe", [])
    assert type(caught.value) is cuda_offline.CompileException and "kernel_helpers.h" in str(caught.value)


def test_a_syntax_error_is_a_compile_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(cuda_offline.CompileException) as caught:
        cuda_offline._nvcc("__global__ void k() { int x = ; }\n", "probe", [])
    assert type(caught.value) is cuda_offline.CompileException
