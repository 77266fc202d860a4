"""The interpreter computes what the GPU computes: TF32 dots, bf16 arithmetic, autotune without a driver.

The rounding functions are checked directly; the kernels run in a fresh interpreter process (the
fixes patch Triton's interpreter for the life of the process, as the worker applies them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

from verifier.interpreter_fixes import round_to_tf32, tf32_dot

ROOT = Path(__file__).resolve().parents[2]


def test_tf32_keeps_ten_mantissa_bits_rounding_to_nearest_even():
    one_ulp = 2.0 ** -10
    values = np.array([1.0, 1.0 + one_ulp, 1.0 + one_ulp / 2, 1.0 + 3 * one_ulp / 2, 1.0 + one_ulp / 2 + 2 ** -20,
                       -(1.0 + 3 * one_ulp / 2)], dtype=np.float32)
    expect = np.array([1.0, 1.0 + one_ulp, 1.0, 1.0 + 2 * one_ulp, 1.0 + one_ulp, -(1.0 + 2 * one_ulp)],
                      dtype=np.float32)
    assert np.array_equal(round_to_tf32(values), expect), round_to_tf32(values)


def test_tf32_leaves_inf_and_nan_alone():
    out = round_to_tf32(np.array([np.inf, -np.inf, np.nan], dtype=np.float32))
    assert np.isposinf(out[0]) and np.isneginf(out[1]) and np.isnan(out[2])


def test_tf32_product_is_about_3e4_off_and_tf32x3_about_fp32():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((64, 256), dtype=np.float32), rng.standard_normal((256, 32), dtype=np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    rel = {mode: np.linalg.norm(tf32_dot(a, b, mode) - exact) / np.linalg.norm(exact) for mode in ("tf32", "tf32x3")}
    assert 1e-4 < rel["tf32"] < 1e-3, rel
    assert rel["tf32x3"] < 1e-6, rel


KERNELS = textwrap.dedent('''
    import json, os
    os.environ["TRITON_INTERPRET"] = "1"
    import torch, triton, triton.language as tl
    from verifier import interpreter_fixes
    interpreter_fixes.apply()

    @triton.jit
    def dot_kernel(a, b, c, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, MODE: tl.constexpr):
        rm, rn, rk = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
        x = tl.load(a + rm[:, None] * K + rk[None, :])
        y = tl.load(b + rk[:, None] * N + rn[None, :])
        if MODE == 0:
            z = tl.dot(x, y)
        elif MODE == 1:
            z = tl.dot(x, y, input_precision="tf32")
        elif MODE == 2:
            z = tl.dot(x, y, allow_tf32=True)
        elif MODE == 3:
            z = tl.dot(x, y, input_precision="tf32x3")
        else:
            z = tl.dot(x, y, input_precision="ieee")
        tl.store(c + rm[:, None] * N + rn[None, :], z)

    @triton.jit
    def bf16_kernel(x, w, out, N: tl.constexpr):
        r = tl.arange(0, N)
        h = tl.load(x + r).to(tl.float32) * 0.5
        y = tl.load(w + r) * h.to(tl.bfloat16)               # bf16 * bf16
        y = tl.maximum(y, tl.load(w + r) - tl.load(w + r))   # bf16 max and sub
        tl.store(out + r, y)

    @triton.autotune(configs=[triton.Config({"B": 16}), triton.Config({"B": 32})], key=["n"])
    @triton.jit
    def tuned_kernel(x, out, n, B: tl.constexpr):
        offs = tl.program_id(0) * B + tl.arange(0, B)
        tl.store(out + offs, tl.load(x + offs, mask=offs < n) * 2, mask=offs < n)

    torch.manual_seed(0)
    a, b = torch.randn(32, 128), torch.randn(128, 16)
    exact = a.double() @ b.double()
    rel = []
    for mode in range(5):
        c = torch.empty(32, 16)
        dot_kernel[(1,)](a, b, c, 32, 16, 128, mode)
        rel.append(float((c.double() - exact).norm() / exact.norm()))
    x = torch.randn(64, dtype=torch.bfloat16)
    w = torch.randn(64, dtype=torch.bfloat16)
    out = torch.empty_like(x)
    bf16_kernel[(1,)](x, w, out, 64)
    want = torch.maximum(w * (x.float() * 0.5).to(torch.bfloat16), torch.zeros_like(w))
    v = torch.randn(100)
    doubled = torch.empty_like(v)
    tuned_kernel[lambda meta: (triton.cdiv(100, meta["B"]),)](v, doubled, 100)
    print(json.dumps({"rel": rel, "bf16_equal": bool(torch.equal(out, want)),
                      "tuned": bool(torch.equal(doubled, v * 2))}))
''')


def _run_kernels() -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", KERNELS], capture_output=True, text=True, timeout=300, env=env,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_interpreter_dots_bf16_arithmetic_and_autotune_match_the_gpu():
    # One process for all three properties: each interpreter start costs seconds on a loaded CPU.
    got = _run_kernels()
    default, tf32, allow_tf32, tf32x3, ieee = got["rel"]
    assert default > 1e-4 and tf32 > 1e-4 and allow_tf32 > 1e-4, got   # TF32 on the GPU: so here
    assert default == tf32 == allow_tf32, got
    assert tf32x3 < 1e-6 and ieee < 1e-6, got
    assert got["bf16_equal"], got      # bf16 values multiplied as numbers, not as bit patterns
    assert got["tuned"], got           # several configs, no GPU driver: still runs


LIBDEVICE = textwrap.dedent('''
    import json, math, os
    os.environ["TRITON_INTERPRET"] = "1"
    import torch, triton, triton.language as tl
    from verifier import interpreter_fixes
    interpreter_fixes.apply()
    from triton.language.extra import libdevice
    from triton.language.extra.libdevice import tanh as stub_tanh
    from triton.language.extra.cuda import libdevice as cuda_libdevice

    @triton.jit
    def math_kernel(x, out, N: tl.constexpr, WHICH: tl.constexpr):
        r = tl.arange(0, N)
        v = tl.load(x + r)
        if WHICH == 0:
            y = libdevice.tanh(v)
        elif WHICH == 1:
            y = stub_tanh(v)                               # the stub bound by name at import
        elif WHICH == 2:
            y = cuda_libdevice.erf(v)                      # the backend's module itself
        elif WHICH == 3:
            y = libdevice.pow(tl.abs(v), 1.5)              # a block and a scalar
        elif WHICH == 4:
            y = libdevice.fma(v, v, 1.0)
        else:
            y = libdevice.isnan(v).to(tl.float32)          # an int-valued symbol
        tl.store(out + r, y)

    @triton.jit
    def missing_kernel(x, out, N: tl.constexpr):
        r = tl.arange(0, N)
        tl.store(out + r, libdevice.j0(tl.load(x + r)))

    torch.manual_seed(0)
    x = torch.randn(64)
    x[3] = float("nan")
    want = [torch.tanh(x), torch.tanh(x), torch.erf(x), x.abs() ** 1.5, x * x + 1.0, torch.isnan(x).float()]
    errs = []
    for which, w in enumerate(want):
        out = torch.empty_like(x)
        math_kernel[(1,)](x, out, 64, which)
        ok = torch.isnan(out) == torch.isnan(w)
        errs.append(float((out - w).nan_to_num().abs().max()) if bool(ok.all()) else float("inf"))
    try:
        missing_kernel[(1,)](x, torch.empty_like(x), 64)
        missing = ""
    except Exception as exc:
        missing = str(exc)
    print(json.dumps({"errs": errs, "missing": missing}))
''')


def test_libdevice_functions_run_under_the_interpreter_as_on_the_gpu():
    # honest kernels call libdevice.tanh (GELU's tanh form) and erf: the interpreter alone returns None
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", LIBDEVICE], capture_output=True, text=True, timeout=300, env=env,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert all(e < 1e-6 for e in got["errs"]), got
    assert "not emulated by kgen's CPU interpreter" in got["missing"] and "j0" in got["missing"], got


def test_every_emulated_libdevice_name_is_reached_by_a_symbol_of_the_backend():
    import re

    from triton.language.extra.cuda import libdevice as cuda

    from verifier.interpreter_fixes import LIBDEVICE_NUMPY, libdevice_name

    symbols = set(re.findall(r'"(__nv_\w+)"', Path(cuda.__file__).read_text()))
    reached = {libdevice_name(s) for s in symbols} - {None}
    assert set(LIBDEVICE_NUMPY) - reached == set()
    assert {"tanh", "erf", "exp", "log", "sqrt", "rsqrt", "pow", "fma"} <= reached
