"""load_inline builds before the candidate process (verifier.inline_build): the plan read from the syntax
tree, the cache key, the index, and a second verification of the same source finding its build.

    .venv/bin/python -m pytest tests/verifier/test_inline_build.py -q        # ~1 min here (nvcc for sm_90)
    python3 -m pytest tests/verifier/test_inline_build.py -q -m gpu          # on a GPU: cold vs cached builds

KernelBench's example solutions are read from the shared/ beside the checkout (as tests/verifier/test_honest.py
finds them); the CPU tests that build need nvcc (verifier.devices.cuda_checkable_here) and compile a small
CUDA source without torch's headers, through the nvcc stand-in (verifier.cuda_offline).
"""

from __future__ import annotations

import ast
import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from verifier import inline_build, sandbox

_DROPS_UID = sandbox.drops_uid   # what this machine does, before the fixture below says otherwise
from verifier.inline_build import BuildPlan, cache_key, plan_builds
from verifier.records import VerifyConfig
from verifier.task import load_task
from verifier.verify import prestart_worker, verify

ROOT = Path(__file__).resolve().parents[2]
# the copy of shared/ beside the checkout (as test_honest.py finds it), or inside it (as a GPU session's copy has it)
_SHARED = [Path(__file__).resolve().parents[3] / "shared", ROOT / "shared"]
KERNELBENCH_PROMPTS = next((s for s in _SHARED if s.is_dir()), _SHARED[0]) / "kernelbench" / "src" / "kernelbench" \
    / "prompts"
# KernelBench's CUDA example solutions (load_inline, kernels on the legacy default stream) and their problems.
KERNELBENCH_CUDA = [
    ("model_ex_add.py", "model_new_ex_add.py", "elementwise_add"),
    ("few_shot/model_ex_add.py", "few_shot/model_new_ex_add.py", "elementwise_add"),
    ("few_shot/model_ex_fuse_gelu.py", "few_shot/model_new_ex_fuse_gelu.py", "fused_gelu"),
    ("few_shot/model_ex_tiled_matmul.py", "few_shot/model_new_ex_tiled_matmul.py", "tiled_matmul"),
    ("few_shot/model_ex_flash_attn.py", "few_shot/model_new_ex_flash_attn.py", "attention"),
]
TOOLS = {"torch": "2.11.0+cu130", "cuda": "13.0", "python": "3.12.3", "arch": "9.0", "nvcc": "/usr/local/bin/nvcc",
         "cxx": "", "offline": False}

# A load_inline candidate whose CUDA source needs no torch header: nvcc compiles it in seconds here.
TINY = '''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

scale_source = """
__global__ void scale_kernel(const float* x, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = SCALE * x[i];
}
"""
cpp_source = "void scale(int n);"

ext = load_inline(name="kgen_test_scale", cpp_sources=cpp_source, cuda_sources=scale_source,
                  functions=["scale"], extra_cuda_cflags=["-DSCALE=2.0f"], verbose=True)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.scale(x)
'''


def kernelbench(path: str) -> Path:
    full = KERNELBENCH_PROMPTS / path
    if not full.exists():
        pytest.skip("KernelBench's prompts are not on this machine")
    return full


def module_string(source: str, name: str) -> str:
    """The value of a module-level string constant of a file, read from its syntax tree."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == name:
            return ast.literal_eval(node.value)
    raise KeyError(name)


@pytest.fixture(autouse=True)
def lendable(monkeypatch):
    # the prebuild is lent where the candidate keeps kgen's uid and its caches (kgen not root): so here, where
    # kgen is root, every sandbox of these tests keeps uid 0 (verifier.sandbox passes --uid=0 then)
    monkeypatch.setattr(sandbox, "drops_uid", lambda: False)


def test_without_a_gpu_nothing_is_prebuilt_where_the_candidate_runs_as_an_unprivileged_uid(monkeypatch):
    # nvcc's stand-in caches its objects where the sandbox's uid has caches of its own: nothing to lend
    monkeypatch.setattr(sandbox, "drops_uid", lambda: True)
    done = inline_build.prebuild(plan_builds(TINY), "cpu", timeout_s=10)
    assert done.env == {} and done.libraries == [] and "unprivileged uid" in done.note, done


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """kgen's cache (the index) and the torch extensions cache of this test alone."""
    monkeypatch.setattr(sandbox, "CACHE_ROOT", tmp_path / "kgen")
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "torch_extensions"))
    return tmp_path


def needs_nvcc():
    from verifier.devices import cuda_checkable_here

    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not on PATH")
    return cuda_checkable_here


# ---- the plan, from the syntax tree


@pytest.mark.parametrize("problem, solution, name", KERNELBENCH_CUDA, ids=lambda v: str(v).replace("/", "-"))
def test_kernelbench_examples_are_planned_from_their_literals(problem, solution, name):
    source = kernelbench(solution).read_text()
    plan = plan_builds(source)
    assert plan and not plan.skipped, plan.skipped
    (call,) = plan.calls
    args = call.arguments()
    assert call.name == name and call.at_import
    assert isinstance(args["functions"], list) and args["functions"]
    # the CUDA source is the file's own string constant, named where load_inline is given it
    tree = ast.parse(source)
    given = next(k.value for n in ast.walk(tree) if isinstance(n, ast.Call)
                 for k in n.keywords if k.arg == "cuda_sources")
    assert args["cuda_sources"] == module_string(source, given.id)


def test_the_examples_verbatim_arguments_are_kept():
    args = plan_builds(kernelbench("model_new_ex_add.py").read_text()).calls[0].arguments()
    assert args["functions"] == ["elementwise_add_cuda"]
    assert args["extra_cflags"] == [""] and args["extra_ldflags"] == [""] and args["verbose"] is True
    assert args["cpp_sources"] == "torch::Tensor elementwise_add_cuda(torch::Tensor a, torch::Tensor b);"


def test_a_call_inside_modelnew_is_planned_but_not_at_import():
    source = TINY.replace("ext = load_inline(", "def build():\n    return load_inline(")
    source = source.replace("class ModelNew(nn.Module):", "class ModelNew(nn.Module):\n    ext = build()")
    (call,) = plan_builds(source).calls
    assert call.name == "kgen_test_scale" and not call.at_import


def test_string_sums_and_a_functions_dict_are_literals():
    source = TINY.replace('cuda_sources=scale_source', 'cuda_sources="// head\\n" + scale_source') \
        .replace('functions=["scale"]', 'functions={"scale": "doubles x"}')
    args = plan_builds(source).calls[0].arguments()
    assert args["cuda_sources"].startswith("// head\n\n__global__") and args["functions"] == {"scale": "doubles x"}


@pytest.mark.parametrize("change, why", [
    (('cuda_sources=scale_source', 'cuda_sources=f"{scale_source}"'), "not a literal"),
    (('extra_cuda_cflags=["-DSCALE=2.0f"]', 'extra_cuda_cflags=flags()'), "not a literal"),
    (('verbose=True)', 'verbose=True, **options)'), "**"),
    (('verbose=True)', 'verbose=True, build_directory="/tmp/x")'), "build_directory"),
    (('cpp_source = "void scale(int n);"', 'cpp_source = "void scale(int n);"\ncpp_source += "\\n"'), "not a literal"),
    (('cpp_source = "void scale(int n);"', 'cpp_source = ["void scale(int n);"]\ncpp_source.append("")'),
     "not a literal"),
    (("import torch\n", "import os, torch\nos.environ['TORCH_CUDA_ARCH_LIST'] = '9.0a'\n"), "environment"),
    (('verbose=True)', 'verbose=True)\next2 = load_inline(name="kgen_test_scale", cpp_sources="", '
                                     'cuda_sources="__global__ void k() {}")'), "two load_inline calls"),
])
def test_what_is_not_a_literal_is_left_to_the_candidates_own_build(change, why):
    source = TINY.replace(*change)
    assert source != TINY
    plan = plan_builds(source)
    assert not plan and why in plan.skipped, plan


def test_a_source_without_load_inline_has_nothing_to_build():
    plan = plan_builds((ROOT / "tests" / "verifier" / "candidates" / "good" / "softmax.py").read_text())
    assert not plan and plan.skipped == "no load_inline call"


# ---- the key


def test_the_same_source_has_the_same_key():
    assert cache_key(plan_builds(TINY), TOOLS) == cache_key(plan_builds(str(TINY)), dict(TOOLS))


@pytest.mark.parametrize("change", [
    ('"-DSCALE=2.0f"', '"-DSCALE=3.0f"'),                        # another flag
    ("SCALE * x[i]", "x[i] * SCALE"),                             # another source
    ('name="kgen_test_scale"', 'name="kgen_test_scale2"'),        # another name
])
def test_other_arguments_have_another_key(change):
    assert cache_key(plan_builds(TINY.replace(*change)), TOOLS) != cache_key(plan_builds(TINY), TOOLS)


@pytest.mark.parametrize("field, value", [("arch", "10.0"), ("torch", "2.12.0+cu130"), ("offline", True)])
def test_another_toolchain_has_another_key(field, value):
    assert cache_key(plan_builds(TINY), {**TOOLS, field: value}) != cache_key(plan_builds(TINY), TOOLS)


def test_what_the_build_prints_is_not_in_the_key():
    quiet = TINY.replace("verbose=True", "verbose=False")
    assert cache_key(plan_builds(quiet), TOOLS) == cache_key(plan_builds(TINY), TOOLS)


# ---- the index


def test_a_built_file_changed_after_the_build_is_no_cache_hit(own_cache):
    folder = own_cache / "ext" / "kgen-abc"
    (folder / "m").mkdir(parents=True)
    (folder / "m" / "m.so").write_bytes(b"built by kgen")
    inline_build._record("abc", folder, plan_builds(TINY), 1.0)
    assert inline_build.cached("abc", folder)
    (folder / "m" / "m.so").write_bytes(b"left by another candidate")
    assert not inline_build.cached("abc", folder)


def test_a_file_left_in_the_folder_before_the_build_is_not_recorded_as_built(own_cache):
    needs_nvcc()
    plan = plan_builds(TINY)
    key = cache_key(plan, inline_build.toolchain("cpu"))
    folder = inline_build.extensions_root() / f"kgen-{key}"
    (folder / "kgen_test_scale").mkdir(parents=True)
    (folder / "kgen_test_scale" / "kgen_test_scale.so").write_bytes(b"left by an earlier candidate")
    built = inline_build.prebuild(plan, "cpu", timeout_s=120)
    assert built.key == key and "built in" in built.note, built.note
    recorded = inline_build._artifacts(folder)
    assert recorded and "kgen_test_scale/kgen_test_scale.so" not in recorded


def test_another_run_of_a_built_source_gets_its_build_variables_and_nothing_else_does(own_cache):
    needs_nvcc()
    assert inline_build.built_env(TINY, "cpu") == {}            # not built yet: nothing is built here
    built = inline_build.prebuild(plan_builds(TINY), "cpu", timeout_s=120)
    assert inline_build.built_env(TINY, "cpu") == built.env and built.env["TORCH_EXTENSIONS_DIR"].endswith(built.key)
    assert inline_build.built_env(TINY.replace("2.0f", "5.0f"), "cpu") == {}


def test_no_index_entry_is_no_cache_hit(own_cache):
    folder = own_cache / "ext" / "kgen-def"
    (folder / "m").mkdir(parents=True)
    (folder / "m" / "m.so").write_bytes(b"whoever left it")
    assert not inline_build.cached("def", folder)


def test_an_empty_plan_builds_nothing_and_says_why_only_when_there_was_a_call():
    assert inline_build.prebuild(BuildPlan(skipped="no load_inline call"), "cpu", 10).note == ""
    done = inline_build.prebuild(BuildPlan(skipped="line 3: a load_inline argument is not a literal"), "cpu", 10)
    assert done.env == {} and "built in the candidate's process" in done.note


def test_the_candidate_process_takes_only_the_build_variables(monkeypatch):
    import os

    from verifier import candidate

    monkeypatch.delenv("MAX_JOBS", raising=False)
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", "/before")
    candidate._apply_build_env({"TORCH_EXTENSIONS_DIR": "/keyed", "MAX_JOBS": "16", "LD_PRELOAD": "/evil.so",
                                "TORCH_CUDA_ARCH_LIST": 9.0})
    assert os.environ["TORCH_EXTENSIONS_DIR"] == "/keyed" and os.environ["MAX_JOBS"] == "16"
    assert "LD_PRELOAD" not in os.environ or os.environ["LD_PRELOAD"] != "/evil.so"
    assert os.environ.get("TORCH_CUDA_ARCH_LIST") != 9.0


# ---- lent as a library file, where the candidate runs as the sandbox's unprivileged uid


def test_where_the_uid_drops_the_build_runs_in_a_folder_of_its_own_and_the_library_is_kept(own_cache, monkeypatch):
    # the build process is the sandbox's (stood in for here: what it is handed and what it leaves); kgen keeps
    # the library in its own cache, and the second verification finds it there without a build
    monkeypatch.setattr(sandbox, "drops_uid", lambda: True)
    monkeypatch.setattr(inline_build, "toolchain", lambda device: TOOLS)
    seen = []

    def build(argv, job, **kwargs):
        seen.append((job, kwargs))
        folder = Path(job["build_root"]) / "kgen_test_scale"
        folder.mkdir(parents=True)
        (folder / "kgen_test_scale.so").write_bytes(b"\x7fELF built for uid 65534")
        (folder / "build.ninja").write_text("left in the build folder")
        return sandbox.SandboxResult(returncode=0, stdout="", stderr="", timed_out=False, wall_s=1.0,
                                     message={"status": "ok", "built": [["kgen_test_scale", 1.0]]})

    monkeypatch.setattr(sandbox, "run_sandboxed", build)
    plan = plan_builds(TINY)
    first = inline_build.prebuild(plan, "cuda", timeout_s=60)
    assert first.problem is None and "lent to the candidate process as its library file" in first.note, first.note
    job, kwargs = seen[0]
    assert kwargs["cwd"] == Path(job["build_root"]) and not Path(job["build_root"]).exists()   # handed, then gone
    assert "TORCH_EXTENSIONS_DIR" not in first.env and "TORCH_EXTENSIONS_DIR" not in kwargs["extra_env"]
    [lib] = first.libraries
    kept = Path(lib["path"])
    assert kept.read_bytes().endswith(b"built for uid 65534") and kept.stat().st_uid == os.geteuid()
    assert oct(kept.stat().st_mode & 0o777) == oct(0o644) and not (kept.parent / "build.ninja").exists()
    assert lib["digest"] == inline_build.call_digest(plan.calls[0].arguments())
    second = inline_build.prebuild(plan, "cuda", timeout_s=60)
    assert second.hit and second.libraries == first.libraries and len(seen) == 1
    kept.write_bytes(b"changed by someone")            # no longer the bytes recorded: built again
    inline_build.prebuild(plan, "cuda", timeout_s=60)
    assert len(seen) == 2


def test_a_link_the_build_left_is_not_followed_when_kgen_keeps_its_library(tmp_path):
    # the build ran the compiler with the candidate's flags as the sandbox's uid: kgen (root) copies only a plain
    # file it made, never what a link there points to
    plan = plan_builds(TINY)
    work, folder, secret = tmp_path / "work", tmp_path / "cache", tmp_path / "secret"
    work.mkdir()
    secret.mkdir()
    (secret / "kgen_test_scale.so").write_bytes(b"root's own file")
    os.symlink(secret, work / "kgen_test_scale")                      # the folder a link
    inline_build._adopt(work, folder, plan)
    assert not (folder / "kgen_test_scale" / "kgen_test_scale.so").exists()
    os.unlink(work / "kgen_test_scale")
    (work / "kgen_test_scale").mkdir()
    os.symlink(secret / "kgen_test_scale.so", work / "kgen_test_scale" / "kgen_test_scale.so")   # the file a link
    inline_build._adopt(work, folder, plan)
    assert not (folder / "kgen_test_scale" / "kgen_test_scale.so").exists()
    os.unlink(work / "kgen_test_scale" / "kgen_test_scale.so")
    (work / "kgen_test_scale" / "kgen_test_scale.so").write_bytes(b"\x7fELF built")           # a plain file: kept
    inline_build._adopt(work, folder, plan)
    assert (folder / "kgen_test_scale" / "kgen_test_scale.so").read_bytes() == b"\x7fELF built"


def test_the_candidates_load_inline_imports_a_lent_library_only_for_the_very_call_it_was_built_from(monkeypatch,
                                                                                                     tmp_path):
    from torch.utils import cpp_extension

    plan = plan_builds(TINY)
    arguments = plan.calls[0].arguments()
    calls = []
    import functools

    torch_own = functools.wraps(cpp_extension.load_inline)(lambda *a, **k: calls.append(("built", a, k)) or "built")
    monkeypatch.setattr(cpp_extension, "load_inline", torch_own)     # torch's, with its signature
    monkeypatch.setattr(cpp_extension, "_import_module_from_library",
                        lambda name, path, python: calls.append(("imported", name, path, python)) or "imported")
    inline_build.use_lent_libraries([{"name": "kgen_test_scale", "digest": inline_build.call_digest(arguments),
                                "dir": str(tmp_path)}, {"name": 3, "digest": None, "dir": "/"}])
    load = cpp_extension.load_inline
    # as the file calls it (keywords), and positionally: the library, nothing built
    assert load(**arguments) == "imported" and calls[-1] == ("imported", "kgen_test_scale", str(tmp_path), True)
    assert load(arguments["name"], arguments["cpp_sources"], arguments["cuda_sources"],
                **{k: v for k, v in arguments.items() if k not in ("name", "cpp_sources", "cuda_sources")}) \
        == "imported"
    assert load(**{**arguments, "verbose": False}) == "imported"           # what it prints is not what it builds
    # any other call is torch's own
    for other in ({**arguments, "extra_cuda_cflags": ["-DSCALE=5.0f"]}, {**arguments, "build_directory": "/tmp/x"},
                  {**arguments, "name": "another"}):
        assert load(**other) == "built" and calls[-1][0] == "built"


# ---- through verify(), on the CPU (nvcc only)


CPU = VerifyConfig(device="cpu", timeout_s=120)


def test_a_second_verification_of_the_same_source_finds_its_build(own_cache):
    needs_nvcc()
    task = load_task(ROOT / "tasks" / "softmax.py")
    first = verify(task, TINY, CPU)
    assert first.status == "not_run", (first.reason, first.feedback[-600:])
    assert any("kgen_test_scale built in" in f for f in first.flags), first.flags
    second = verify(task, TINY, CPU)
    assert second.status == "not_run", (second.reason, second.feedback[-600:])
    assert any("found built in the cache" in f for f in second.flags), second.flags
    assert second.phases[inline_build.PHASE] < 0.5 < first.phases[inline_build.PHASE]
    assert "found compiled in the cache" in second.reason     # the candidate process's nvcc did not run either


def test_a_compile_error_at_import_is_the_verdict_from_the_build_alone(own_cache):
    needs_nvcc()
    broken = TINY.replace("if (i < n) out[i]", "if (i < n) out[i] = ;")
    result = verify(load_task(ROOT / "tasks" / "softmax.py"), broken, CPU)
    assert result.status == "compile_error", result.reason
    assert "before the candidate process" in result.reason and "nvcc failed" in result.feedback
    assert result.isolation == []       # the candidate process never got the job


def test_kgens_own_failure_in_the_build_phase_leaves_the_build_to_the_candidates_process(own_cache, monkeypatch):
    needs_nvcc()

    def broken(*args, **kwargs):
        raise OSError("no space left on device")

    monkeypatch.setattr(inline_build, "prebuild", broken)
    result = verify(load_task(ROOT / "tasks" / "softmax.py"), TINY, CPU)
    assert result.status == "not_run", (result.reason, result.feedback[-600:])     # as before the phase existed
    assert any("kgen's own failure: OSError" in f for f in result.flags), result.flags


def test_a_compile_error_inside_a_function_is_left_to_the_candidates_process(own_cache):
    needs_nvcc()
    broken = TINY.replace("if (i < n) out[i]", "if (i < n) out[i] = ;") \
        .replace("ext = load_inline(", "def build():\n    return load_inline(") \
        .replace("class ModelNew(nn.Module):", "class ModelNew(nn.Module):\n    def __init__(self):\n"
                                                "        super().__init__()\n        self.ext = build()\n")
    result = verify(load_task(ROOT / "tasks" / "softmax.py"), broken, CPU)
    assert result.status == "compile_error", result.reason
    assert "before the candidate process" not in result.reason and "ModelNew" in result.reason
    assert any("built in the candidate's process instead" in f for f in result.flags), result.flags


def test_a_rounds_builds_run_side_by_side_before_its_verifications(own_cache):
    needs_nvcc()
    sources = [TINY.replace("2.0f", f"{k}.0f") for k in (3, 4)]
    assert inline_build.prebuild_round(sources + [sources[0]], "cpu", timeout_s=120) == 2   # one build a source
    result = verify(load_task(ROOT / "tasks" / "softmax.py"), sources[1], CPU)
    assert result.status == "not_run", result.reason
    assert any("found built in the cache" in f and "ahead" in f for f in result.flags), result.flags


@pytest.mark.slow
def test_what_the_build_process_built_is_what_load_inline_then_loads_without_a_rebuild(own_cache, monkeypatch):
    # torch's own load_inline in the sandboxed build process (the GPU path), here on a host C++ extension (g++,
    # torch's headers: minutes on this machine); then load_inline as the candidate process calls it, verbose
    # and all: ninja finds nothing to do, the library is the one built before.
    import os
    import subprocess
    import sys

    if shutil.which("ninja") is None:
        pytest.skip("ninja not on PATH")
    call = inline_build.InlineCall(kwargs=(("name", "kgen_test_twice"), ("cpp_sources", "int twice(int x) { return 2 * x; }"),
                                           ("functions", ("twice",)), ("verbose", False)), line=1, at_import=True)
    monkeypatch.setattr(inline_build, "toolchain", lambda device: {**TOOLS, "arch": "", "offline": False})
    built = inline_build.prebuild(BuildPlan(calls=(call,)), "cuda", timeout_s=900)
    assert built.problem is None and "built in" in built.note, built.note
    library = Path(built.env["TORCH_EXTENSIONS_DIR"]) / "kgen_test_twice" / "kgen_test_twice.so"
    before = library.stat().st_mtime_ns
    load = ("from torch.utils.cpp_extension import load_inline\n"
            "m = load_inline(name='kgen_test_twice', cpp_sources='int twice(int x) { return 2 * x; }', "
            "functions=['twice'], verbose=True)\nprint(m.twice(21))")
    done = subprocess.run([sys.executable, "-c", load], capture_output=True, text=True, timeout=600,
                          env={**os.environ, **built.env})
    assert done.stdout.strip().endswith("42"), done.stderr[-1500:]
    assert "no work to do" in done.stdout + done.stderr
    assert library.stat().st_mtime_ns == before
    assert inline_build.cached(built.key, Path(built.env["TORCH_EXTENSIONS_DIR"]))


@pytest.mark.slow
def test_where_the_uid_drops_the_sandboxed_build_leaves_a_library_that_loads_as_the_call_it_was_built_from(
        own_cache, monkeypatch):
    # the real build process as the sandbox's unprivileged uid (kgen is root here), on a host C++ extension
    # (g++, torch's headers: minutes on this machine); then the library kgen kept, loaded in another process
    # through the candidate process's load_inline for that call, with nothing compiled there
    import subprocess
    import sys

    monkeypatch.setattr(sandbox, "drops_uid", _DROPS_UID)
    if not sandbox.drops_uid():
        pytest.skip("the candidate keeps kgen's uid here (kgen is not root)")
    if shutil.which("ninja") is None:
        pytest.skip("ninja not on PATH")
    call = inline_build.InlineCall(kwargs=(("name", "kgen_test_thrice"), ("cpp_sources", "int thrice(int x) { return 3 * x; }"),
                                           ("functions", ("thrice",)), ("verbose", False)), line=1, at_import=True)
    monkeypatch.setattr(inline_build, "toolchain", lambda device: {**TOOLS, "arch": "", "offline": False})
    built = inline_build.prebuild(BuildPlan(calls=(call,)), "cuda", timeout_s=900)
    assert built.problem is None and "library file" in built.note, (built.note, built)
    [lib] = built.libraries
    assert Path(lib["path"]).stat().st_uid == os.geteuid()
    load = ("import json, sys\nfrom verifier import inline_build\n"
            "from torch.utils import cpp_extension\n"
            "cpp_extension._jit_compile = lambda *a, **k: sys.exit('compiled in the candidate process')\n"
            f"inline_build.use_lent_libraries([{{'name': 'kgen_test_thrice', 'digest': {lib['digest']!r}, "
            f"'dir': {str(Path(lib['path']).parent)!r}}}])\n"
            "m = cpp_extension.load_inline(name='kgen_test_thrice', cpp_sources='int thrice(int x) { return 3 * x; }', "
            "functions=['thrice'])\nprint(m.thrice(14))")
    done = subprocess.run([sys.executable, "-c", load], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.stdout.strip().endswith("42"), (done.stdout[-500:], done.stderr[-1500:])


# ---- on a GPU (torch with CUDA, nvcc and ninja)


GPU = VerifyConfig(device="cuda", timeout_s=400, baselines=False)
GPU_UNTIMED = VerifyConfig(device="cuda", timeout_s=400, time_it=False)   # four at once: no timing side by side


def _distinct(source: str, i: int) -> str:
    """The same solution, a source of its own (another key): a comment inside its CUDA source."""
    return source.replace('#include <torch/extension.h>', f'#include <torch/extension.h>\n// kgen copy {i}', 1)


@pytest.mark.gpu
def test_cold_and_cached_builds_on_gpu(own_cache):
    problem, solution, _ = KERNELBENCH_CUDA[2]   # fused_gelu: torch's headers, a real nvcc build
    task, source = load_task(kernelbench(problem)), kernelbench(solution).read_text()
    cold = verify(task, source, GPU)
    assert cold.status == "ok", (cold.status, cold.reason, cold.feedback[-800:])
    assert any("fused_gelu built in" in f for f in cold.flags), cold.flags
    worker = prestart_worker()
    time.sleep(10)      # warm: torch imported and CUDA started before the job, as the loop's WorkerPool has it
    warm = verify(task, source, GPU, worker=worker)
    print(f"\ncold build {cold.phases[inline_build.PHASE]:.1f} s, verdict {cold.wall_s:.1f} s; cached build "
          f"{warm.phases[inline_build.PHASE]:.2f} s, verdict {warm.wall_s:.1f} s")
    assert warm.status == "ok", (warm.status, warm.reason)
    assert any("found built in the cache" in f for f in warm.flags), warm.flags
    assert warm.phases[inline_build.PHASE] < 1.0
    assert warm.wall_s <= 5.0, warm.phases


@pytest.mark.gpu
def test_cold_and_cached_builds_on_gpu_where_the_candidate_runs_as_the_unprivileged_uid(own_cache, monkeypatch):
    # kgen as root (the GPU machine): the candidate is uid 65534 and gets the library file, not the build folder
    monkeypatch.setattr(sandbox, "drops_uid", _DROPS_UID)
    if not sandbox.drops_uid():
        pytest.skip("the candidate keeps kgen's uid here (kgen is not root)")
    problem, solution, _ = KERNELBENCH_CUDA[2]
    task, source = load_task(kernelbench(problem)), kernelbench(solution).read_text()
    cold = verify(task, source, GPU)
    assert cold.status == "ok", (cold.status, cold.reason, cold.feedback[-800:])
    assert any("fused_gelu built in" in f and "library file" in f for f in cold.flags), cold.flags
    worker = prestart_worker()
    time.sleep(10)
    warm = verify(task, source, GPU, worker=worker)
    print(f"\nas uid 65534: cold build {cold.phases[inline_build.PHASE]:.1f} s, verdict {cold.wall_s:.1f} s; cached "
          f"build {warm.phases[inline_build.PHASE]:.2f} s, import {warm.phases.get('import task and candidate', 0):.2f} "
          f"s, verdict {warm.wall_s:.1f} s")
    assert warm.status == "ok", (warm.status, warm.reason)
    assert any("found built in the cache" in f for f in warm.flags), warm.flags
    assert warm.phases["import task and candidate"] < 5.0, warm.phases
    assert warm.wall_s <= 5.0, warm.phases


@pytest.mark.gpu
def test_four_candidates_compile_at_once_on_gpu(own_cache):
    problem, solution, _ = KERNELBENCH_CUDA[2]
    task, source = load_task(kernelbench(problem)), kernelbench(solution).read_text()
    results = [None] * 4

    def one(i: int) -> None:
        results[i] = verify(task, _distinct(source, i), GPU_UNTIMED)

    started = time.perf_counter()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"\nfour builds at once: {time.perf_counter() - started:.1f} s; builds "
          f"{[round(r.phases[inline_build.PHASE], 1) for r in results]} s")
    for r in results:
        assert r.status == "ok", (r.status, r.reason, r.feedback[-600:])
        assert any("built in" in f and "cache" not in f for f in r.flags), r.flags
