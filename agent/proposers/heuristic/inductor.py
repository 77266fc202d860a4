"""Inductor-seeded proposals: what torch.compile generates for a task, captured as plain Triton kernels.

    seed = capture("tasks/layernorm.py")            # a Seed, or a SeedUnavailable with the reason
    seed.plans[-1].kernels[0].configs                # Inductor's own launch configurations for a kernel
    source = emit_candidate(seed, SeedConfig())      # a standalone ModelNew (inductor_emit.py)

Written against torch 2.13 (CPU build, triton 3.6.0 interpreter) and torch 2.11+cu130 with
triton 3.6.0 on the GPU machine. How it works: the reference, in the mode its Model builds it (as the
verifier runs it: training unless it says otherwise, BatchNorm's running-statistics updates dropped), is
traced with torch.export (its parameters become named inputs, so the launcher knows which graph input is
which state_dict key), then compiled by Inductor with `compile_fx` under `torch.no_grad()` (an inference graph)
and with the configuration in INDUCTOR_OPTIONS (Triton wherever a template exists, no CUDA
graphs, no freezing, no autotuning at compile time). Where no GPU is present, Inductor's
`cpu_backend = "triton"` writes the same kind of Triton kernels for the CPU; the two places where
it asks Triton for an active driver (a cache hash, and loading the finished module) are bypassed:
the wrapper's source is taken from `GraphLowering.save_output_code` and the compilation stopped
there, before anything is compiled or run. Shapes are static: one plan per set of input shapes
(the task's small inputs for the interpreter, get_inputs() traced with fake tensors for the GPU).

From the wrapper's source (its `call(args)`) and each kernel's source this module keeps: the
`@triton.jit` function, Inductor's launch configurations (its heuristic decorator evaluated with the
target device's properties, as the autotuner would see them), the grid type, and the call body
(allocations, views, launches). `inductor_emit.py` writes them out as a candidate.

How it fails when Inductor changes: every step that reads Inductor's output checks what it
expects (the `async_compile.triton(...)` definitions, a `call` function, a `.run(...)` launch, a
known grid type, triton_helpers functions that are `@triton.jit`) and otherwise returns
`SeedUnavailable("seed unavailable: <why>")`; so does an Inductor graph that falls back to a
compute op through torch (extern mm, convolution, an aten fallback), which kgen's op audit would
reject. The proposer never sees an exception from here: `capture` catches everything and says
what failed.
"""

from __future__ import annotations

import ast
import contextlib
from dataclasses import dataclass, field
from pathlib import Path

# Inductor's configuration for seeding: Triton wherever it can, nothing that the candidate cannot reproduce.
INDUCTOR_OPTIONS = {
    "max_autotune_gemm_backends": "TRITON",     # Triton matmul templates, never extern cuBLAS (under max-autotune)
    # NOTE: "TRITON" alone makes a convolution a NoValidChoicesError outside max-autotune; with ATEN it is an
    # extern convolution, which the seed refuses with that clear reason.
    "max_autotune_conv_backends": "ATEN,TRITON",
    "triton.cudagraphs": False,                 # the candidate launches kernels itself
    "freezing": False,                          # parameters stay inputs, read from the module
    "fallback_random": False,
    "compile_threads": 1,                       # no subprocess pool: the kernels are never compiled here
}

# What the GPU machine's H200 reports; the autotuner's configurations for a CUDA target depend on these.
H200_PROPERTIES = dict(type="cuda", index=0, multi_processor_count=132, cc=90, major=9,
                       regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048,
                       max_threads_per_block=1024, warp_size=32)

# FixedGrid: a template kernel (Triton matmul) whose launch passes its grid as three trailing arguments
GRID_TYPES = {"Grid1D", "Grid2D", "Grid3D", "CooperativeReductionGrid", "SplitScanGrid", "FixedGrid"}


@dataclass(frozen=True)
class SeedUnavailable:
    """Why there is no Inductor seed for a task."""

    reason: str

    def __str__(self) -> str:
        return f"seed unavailable: {self.reason}"


@dataclass(frozen=True)
class LaunchConfig:
    """One of Inductor's launch configurations for a kernel."""

    kwargs: tuple[tuple[str, int], ...]   # constexpr block sizes, e.g. (("XBLOCK", 1), ("R0_BLOCK", 2048))
    num_warps: int
    num_stages: int

    def describe(self) -> str:
        blocks = ",".join(f"{k}={v}" for k, v in self.kwargs)
        return f"{blocks}{',' if blocks else ''}warps={self.num_warps},stages={self.num_stages}"


@dataclass
class KernelSeed:
    """One Inductor kernel: its @triton.jit source and how Inductor would launch it."""

    name: str                       # Inductor's name, e.g. triton_per_fused__softmax_0
    source: str                     # the function only (`def ...`), helpers renamed to ih_<name>
    params: tuple[str, ...]         # the kernel's runtime arguments in order (constexprs excluded)
    constexprs: tuple[str, ...]     # constexpr parameters the launch must give
    configs: list[LaunchConfig]     # Inductor's candidates, in its order (the first is its pick without autotuning)
    grid_type: str
    inductor_meta: dict
    heuristic: str                  # pointwise / reduction / persistent_reduction / split_scan / template
    helpers: tuple[str, ...] = ()   # triton_helpers functions it calls (inlined by the emitter)


@dataclass
class Plan:
    """The compiled call for one set of input shapes."""

    shapes: tuple                   # (shape, ...) of the forward's tensor inputs, the key the candidate dispatches on
    kernels: list[KernelSeed]
    body: list[ast.stmt]            # call(args)'s statements, rewritten (see _rewrite_body)
    graph_inputs: tuple[str, ...]   # the names call() unpacks args into, in order
    wrapper: str = ""               # Inductor's full wrapper source, for fixtures and the prompt
    label: str = ""                 # "small" (get_small_inputs) or "benchmark" (get_inputs)


@dataclass
class Seed:
    """Everything needed to write an Inductor-seeded candidate for one task."""

    task_name: str
    inputs: tuple[tuple[str, str], ...]   # (kind, target) per graph input: ("param"|"buffer"|"input", name)
    forward_args: tuple[str, ...]
    single_output: bool                    # Model.forward returns one tensor (not a tuple)
    init_signature: str
    init_lines: tuple[str, ...]
    plans: list[Plan] = field(default_factory=list)
    helpers: dict[str, str] = field(default_factory=dict)   # ih_<name> -> @triton.jit source
    device: str = "cpu"                    # where Inductor generated (cpu: the triton CPU backend)
    torch_version: str = ""
    float32: bool = False                  # every floating tensor the graph takes (parameters too) is fp32

    @property
    def fp32_dots(self) -> bool:
        """Whether the kernels multiply fp32 with tl.dot (where three TF32 passes can replace exact products)."""
        return self.float32 and any("tl.dot(" in k.source for p in self.plans for k in p.kernels)

    @property
    def benchmark(self) -> Plan:
        """The plan for get_inputs(), the one the GPU times and the walk tunes."""
        return self.plans[-1]

    def kernel_summary(self) -> str:
        """One line per benchmark kernel: name, heuristic, Inductor's first configuration."""
        return "\n".join(f"{k.name} ({k.heuristic}, {len(k.configs)} configs; first {k.configs[0].describe()})"
                         for k in self.benchmark.kernels)


class _Unseedable(Exception):
    """Raised inside capture to stop with a reason."""


class _StopAfterCodegen(Exception):
    """Raised from save_output_code: the wrapper's source is all we need; nothing is compiled."""


# -- driving Inductor ------------------------------------------------------------------------------------------

@contextlib.contextmanager
def _inductor_for(device: str):
    """Inductor configured for seeding; on the CPU, its Triton backend without a Triton driver."""
    import torch._inductor.config as inductor_config
    import torch.utils._triton as torch_triton

    options = dict(INDUCTOR_OPTIONS)
    if device == "cuda":
        # matmuls through Inductor's Triton templates, chosen by timing them on this GPU (as max-autotune does);
        # on the CPU nothing can be timed, and a matmul stays an extern call the seed refuses
        options["max_autotune_gemm"] = True
    if device == "cpu":
        options["cpu_backend"] = "triton"
        # NOTE: the interpreter runs a tuple reduction (Welford's) one element at a time in Python (minutes for
        # a 67 x 5120 LayerNorm); Inductor's own two-step (sum-based) variance, which it uses for short rows
        # anyway, reduces with tl.sum. Only the CPU seed asks for it; on a GPU, Inductor chooses as it would.
        options["mtia.disable_welford_reduction"] = True
    saved_hash = torch_triton.triton_hash_with_backend
    with inductor_config.patch(options):
        if device == "cpu":
            # NOTE: the hash only names Inductor's on-disk cache entries; there is no CPU driver to ask for one.
            torch_triton.triton_hash_with_backend = lambda: "kgen-seed-no-driver"
        try:
            yield
        finally:
            torch_triton.triton_hash_with_backend = saved_hash


def _generate(exported, example_inputs, device: str) -> str:
    """Inductor's wrapper source for an exported program at the example inputs' shapes."""
    import torch
    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.graph import GraphLowering

    captured: list[str] = []

    def save(code: str) -> None:
        captured.append(code)
        raise _StopAfterCodegen

    saved = GraphLowering.save_output_code
    GraphLowering.save_output_code = staticmethod(save)
    try:
        with _inductor_for(device), torch.no_grad():
            torch._dynamo.reset()
            try:
                compile_fx(exported.graph_module, list(example_inputs))
            except Exception:
                if not captured:
                    raise
    finally:
        GraphLowering.save_output_code = saved
    return captured[0]


def capture(task, device: str | None = None) -> Seed | SeedUnavailable:
    """Compile the task's reference with Inductor and keep its kernels and launches; never raises."""
    try:
        return _capture(Path(getattr(task, "path", task)), device, getattr(task, "small_overrides", None))
    except _Unseedable as exc:
        return SeedUnavailable(str(exc))
    except Exception as exc:   # Inductor changed under us: a reason, never a crash of the proposer
        return SeedUnavailable(f"Inductor failed ({_first_line(exc)})")


def _first_line(exc: BaseException) -> str:
    text = (str(exc).strip().splitlines() or [""])[0][:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _capture(path: Path, device: str | None, small_overrides: dict | None = None) -> Seed:
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from agent.proposers.heuristic.modelnew import parameter_holders
    from verifier.task import import_task_module

    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    name = path.stem
    try:    # the task is the user's code: what fails in it is the reason, not "Inductor failed"
        # NOTE: for the CPU as the CPU check imports it (verifier.shapes' derived sizes, device-neutral): a
        # KernelBench-size task compiled at full size would build GBs in kgen's own process
        on_cpu = device == "cpu"
        module = import_task_module(path.resolve(), f"kgen_inductor_{name}",
                                    overrides=small_overrides if on_cpu else None, device="cpu" if on_cpu else None)
        init_values = list(module.get_init_inputs())
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            # NOTE: in the mode the task builds it (training, unless its Model says otherwise), as the verifier
            # runs the reference: an eval() capture gave BatchNorm its running statistics instead of the
            # batch's, a seed wrong on every element
            model = module.Model(*init_values)
    except Exception as exc:
        raise _Unseedable(f"building the reference raised {_first_line(exc)}") from None
    signature, init_lines = parameter_holders(module.Model, init_values, model)
    model = model.to(device)

    # Inputs are fake tensors (shapes and dtypes, no memory): a KernelBench input of several GB costs nothing.
    shape_sets = [("small", getattr(module, "get_small_inputs", None) or module.get_inputs)]
    if getattr(module, "get_small_inputs", None) is not None:
        shape_sets.append(("benchmark", module.get_inputs))
    plans: list[Plan] = []
    float32 = True
    graph_inputs: tuple = ()
    forward_args: tuple = ()
    single = True
    for label, make_inputs in shape_sets:
        fake = FakeTensorMode(allow_non_fake_inputs=True)
        with fake, torch.random.fork_rng(devices=[]):
            try:
                inputs = list(make_inputs())
            except Exception as exc:
                raise _Unseedable(f"the task's {make_inputs.__name__}() raised {_first_line(exc)}") from None
            if not all(isinstance(x, torch.Tensor) for x in inputs):
                raise _Unseedable("forward takes non-tensor inputs")
            inputs = [x.to(device) for x in inputs]
            with torch.no_grad():
                reference = model(*inputs)
        single = isinstance(reference, torch.Tensor)
        if not single and not (isinstance(reference, (tuple, list))
                               and all(isinstance(t, torch.Tensor) for t in reference)):
            raise _Unseedable("forward returns something other than a tensor or a tuple of tensors")
        with torch.no_grad():
            exported = torch.export.export(model, tuple(inputs))
        exported = exported.run_decompositions({})
        specs = exported.graph_signature.input_specs
        kinds = []
        example = []
        state = {**dict(model.named_parameters()), **dict(model.named_buffers())}
        user = iter(inputs)
        for spec in specs:
            kind = spec.kind.name
            if kind == "PARAMETER":
                kinds.append(("param", spec.target))
                example.append(fake.from_tensor(state[spec.target].detach()))
            elif kind == "BUFFER":
                kinds.append(("buffer", spec.target))
                example.append(fake.from_tensor(state[spec.target].detach()))
            elif kind == "USER_INPUT":
                kinds.append(("input", spec.arg.name))
                example.append(next(user))
            else:
                raise _Unseedable(f"the exported graph has a {kind.lower()} input ({spec.target}), "
                                  "which the launcher cannot supply")
        graph_inputs = tuple(kinds)
        _drop_buffer_updates(exported)
        float32 = float32 and all(x.dtype == torch.float32 for x in example if x.dtype.is_floating_point)
        forward_args = tuple(t for k, t in kinds if k == "input")
        wrapper = _generate(exported, example, device)
        plans.append(_read_wrapper(wrapper, tuple(tuple(x.shape) for x in inputs), device))
        plans[-1].label = label
    seed = Seed(task_name=name, inputs=graph_inputs, forward_args=forward_args, single_output=single,
                init_signature=signature, init_lines=tuple(init_lines), plans=plans, device=device,
                torch_version=torch.__version__, float32=float32)
    seed.helpers = _collect_helpers([k for p in plans for k in p.kernels])
    return seed


def _drop_buffer_updates(exported) -> None:
    """Leave the exported graph only forward's outputs: in training mode BatchNorm updates its running
    statistics, which the graph returns ahead of them (BUFFER_MUTATION). forward's result does not depend on
    them, and the candidate need not keep them (nothing reads its buffers), so they are not computed."""
    kinds = [spec.kind.name for spec in exported.graph_signature.output_specs]
    first = kinds.index("USER_OUTPUT") if "USER_OUTPUT" in kinds else len(kinds)
    if any(k != "BUFFER_MUTATION" for k in kinds[:first]) or any(k != "USER_OUTPUT" for k in kinds[first:]):
        raise _Unseedable(f"the exported graph's outputs are {sorted(set(kinds))}: forward mutates its inputs, "
                          "or returns in an order the launcher cannot follow")
    if first == 0:
        return
    gm = exported.graph_module
    output = next(n for n in gm.graph.nodes if n.op == "output")
    output.args = (tuple(output.args[0][first:]),)
    gm.graph.eliminate_dead_code()
    gm.recompile()


# -- reading Inductor's output ---------------------------------------------------------------------------------

def read_wrapper(wrapper: str, shapes: tuple, device: str = "cpu") -> Plan | SeedUnavailable:
    """A Plan from a wrapper's source (as `TORCH_LOGS=output_code` prints it), or why there is none."""
    try:
        return _read_wrapper(wrapper, shapes, device)
    except _Unseedable as exc:
        return SeedUnavailable(str(exc))


def _read_wrapper(wrapper: str, shapes: tuple, device: str) -> Plan:
    tree = ast.parse(wrapper)
    kernel_sources: dict[str, str] = {}
    call_fn = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            func = node.value.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "async_compile":
                target = node.targets[0].id if isinstance(node.targets[0], ast.Name) else "?"
                if func.attr != "triton":
                    raise _Unseedable(f"inductor wrote a {func.attr} kernel ({target}), not Triton")
                src = node.value.args[1]
                if not (isinstance(src, ast.Constant) and isinstance(src.value, str)):
                    raise _Unseedable(f"kernel {target}'s source is not a string literal")
                kernel_sources[target] = src.value
        if isinstance(node, ast.FunctionDef) and node.name == "call" and call_fn is None:
            call_fn = node
    if call_fn is None:
        raise _Unseedable("no call(args) function in Inductor's wrapper")
    kernels = {name: _read_kernel(name, src, device) for name, src in kernel_sources.items()}
    body, graph_inputs = _rewrite_body(call_fn.body, kernels)
    used = [k for k in kernels.values() if any(
        isinstance(n, ast.Call) and getattr(n, "_kgen_kernel", None) == k.name for s in body for n in ast.walk(s))]
    if not used:
        raise _Unseedable("Inductor launched no Triton kernel (the graph is views and copies only)")
    return Plan(shapes=shapes, kernels=used, body=body, graph_inputs=graph_inputs, wrapper=wrapper)


def _target_properties(triton_meta: dict, device: str):
    from torch._inductor.runtime.hints import DeviceProperties

    if device == "cpu":
        # the interpreter runs the CPU plan; the GPU plan's configurations are those an H200 autotunes over
        return DeviceProperties(**H200_PROPERTIES)
    return triton_meta["device"]


def _read_kernel(name: str, src: str, device: str) -> KernelSeed:
    """The @triton.jit function of one kernel source, and the configurations its heuristic decorator lists."""
    tree = ast.parse(src)
    fns = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    fn, heuristic_call, extra = None, None, []
    for candidate in fns:
        decs = [d for d in candidate.decorator_list if isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute)
                and isinstance(d.func.value, ast.Name) and d.func.value.id == "triton_heuristics"]
        if decs and fn is None:
            fn, heuristic_call = candidate, decs[0]
        elif any(ast.unparse(d) in ("triton.jit", "triton.jit()") for d in candidate.decorator_list):
            extra.append(candidate)     # a scan's or a reduction's combine function, defined beside the kernel
        else:
            raise _Unseedable(f"kernel {name}'s source defines {candidate.name}, neither the kernel nor a @triton.jit")
    if fn is None:
        raise _Unseedable(f"kernel {name} has no triton_heuristics decorator to read its configurations from")
    heuristic = heuristic_call.func.attr
    namespace: dict = {"__file__": f"/tmp/kgen_seed_{name}.py", "__name__": f"kgen_seed_{name}"}
    imports = ast.Module(body=[n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))], type_ignores=[])
    exec(compile(imports, f"<inductor {name} imports>", "exec"), namespace)   # noqa: S102 - Inductor's own imports
    kwargs = {kw.arg: eval(compile(ast.Expression(kw.value), name, "eval"), namespace)  # noqa: S307
              for kw in heuristic_call.keywords}
    args = [eval(compile(ast.Expression(a), name, "eval"), namespace) for a in heuristic_call.args]  # noqa: S307
    inductor_meta = dict(kwargs.get("inductor_meta") or {})
    triton_meta = dict(kwargs.get("triton_meta") or {})
    grid_type = inductor_meta.get("grid_type", "")
    if grid_type not in GRID_TYPES:
        raise _Unseedable(f"kernel {name} uses grid type {grid_type or 'none'}, which the launcher does not write")
    triton_meta["device"] = _target_properties(triton_meta, device)
    kwargs["triton_meta"] = triton_meta
    kwargs["inductor_meta"] = {**inductor_meta, "autotune_local_cache": False, "autotune_remote_cache": False}
    configs = _configs_of(namespace["triton_heuristics"], heuristic, args, kwargs, fn)
    fn.decorator_list = [ast.parse("triton.jit").body[0].value]
    params, constexprs = [], []
    for a in fn.args.args:
        is_constexpr = a.annotation is not None and "constexpr" in ast.unparse(a.annotation)
        (constexprs if is_constexpr else params).append(a.arg)
    helpers = sorted({n.attr for n in ast.walk(fn) if isinstance(n, ast.Attribute)
                      and isinstance(n.value, ast.Name) and n.value.id == "triton_helpers"})
    helpers = sorted(set(helpers) | {n.attr for f in extra for n in ast.walk(f) if isinstance(n, ast.Attribute)
                                     and isinstance(n.value, ast.Name) and n.value.id == "triton_helpers"})
    extra = [_RenameHelpers().visit(f) for f in extra]
    fn = _ScanAsCumsum({f.name for f in extra if _is_add_combine(f)}).visit(_RenameHelpers().visit(fn))
    source = "\n\n".join(ast.unparse(f) for f in [*extra, fn])
    return KernelSeed(name=name, source=source, params=tuple(params), constexprs=tuple(constexprs),
                      configs=configs, grid_type=grid_type, inductor_meta=inductor_meta, heuristic=heuristic,
                      helpers=tuple(helpers))


def _configs_of(triton_heuristics, heuristic: str, args: list, kwargs: dict, fn: ast.FunctionDef) -> list[LaunchConfig]:
    """Run Inductor's heuristic decorator far enough to see its configurations (nothing is compiled)."""
    import inspect

    captured: list = []

    class _Capture:
        def __init__(self, jit_fn, configs=(), **_):
            captured.extend(configs)

    factory = getattr(triton_heuristics, heuristic, None)
    if factory is None:
        raise _Unseedable(f"triton_heuristics.{heuristic} does not exist in this torch")
    original = triton_heuristics.cached_autotune
    params = inspect.signature(original).parameters

    def cached_autotune(*a, **kw):
        if "caching_autotuner_cls" in params:   # Inductor's own filtering of the list, then our stand-in
            kw["caching_autotuner_cls"] = _Capture
            kw["debug_autotuner_cls"] = _Capture
            return original(*a, **kw)
        # a torch whose cached_autotune takes no autotuner class: the heuristic's list as it was passed
        captured.extend(kw["configs"] if "configs" in kw else a[1])
        return lambda fn: fn

    class _Fn:   # what the decorator inspects: a function with the kernel's parameters
        pass

    stub = _Fn()
    source = f"def {fn.name}({', '.join(a.arg for a in fn.args.args)}): pass"
    scope: dict = {}
    exec(source, scope)   # noqa: S102 - a stub with the kernel's parameter names
    stub.fn = scope[fn.name]
    triton_heuristics.cached_autotune = cached_autotune
    try:
        factory(*args, **kwargs)(stub)
    finally:
        triton_heuristics.cached_autotune = original
    if not captured:
        raise _Unseedable(f"triton_heuristics.{heuristic} listed no configurations")
    return [LaunchConfig(kwargs=tuple((k, int(v)) for k, v in c.kwargs.items()), num_warps=int(c.num_warps),
                         num_stages=int(c.num_stages)) for c in captured]


# libdevice functions that triton.language.math also has: the same operation, and Triton's interpreter runs
# tl.math natively where libdevice needs kgen's emulation (verifier.interpreter_fixes); on the GPU both lower to
# the same device library call or instruction.
TL_MATH_FUNCTIONS = {"abs", "ceil", "cos", "div_rn", "erf", "exp", "exp2", "fdiv", "floor", "fma", "log", "log2",
                     "rsqrt", "sin", "sqrt", "sqrt_rn", "umulhi"}


class _RenameHelpers(ast.NodeTransformer):
    """triton_helpers.X -> ih_X (the emitter defines ih_X from Inductor's own source); libdevice.X -> tl_math.X
    where tl.math has X."""

    def visit_Attribute(self, node):
        self.generic_visit(node)
        if isinstance(node.value, ast.Name) and node.value.id == "triton_helpers":
            return ast.copy_location(ast.Name(id=f"ih_{node.attr}", ctx=node.ctx), node)
        if isinstance(node.value, ast.Name) and node.value.id == "libdevice" and node.attr in TL_MATH_FUNCTIONS:
            return ast.copy_location(ast.Attribute(value=ast.Name(id="tl_math", ctx=ast.Load()), attr=node.attr,
                                                   ctx=node.ctx), node)
        return node


# triton_helpers' max2/min2 and max/min_with_index reduce through tl.reduce with a NaN-propagating combine
# function, which the Triton interpreter runs one element at a time in Python (minutes for a 127 x 781
# softmax). These are kgen's, not Inductor's: tl.max/tl.min (vectorised in the interpreter, a native reduction
# on the GPU), then NaN wherever the reduced slice held one, which is what Inductor's combine functions give
# (torch.amax and torch.max propagate NaN).
VECTORISED_HELPERS = {
    "max2": """@triton.jit
def ih_max2(a, dim):
    out = tl.max(a, dim)
    if a.dtype.is_floating():
        out = tl.where(tl.max((a != a).to(tl.int8), dim) > 0, float('nan'), out)
    return out""",
    "min2": """@triton.jit
def ih_min2(a, dim):
    out = tl.min(a, dim)
    if a.dtype.is_floating():
        out = tl.where(tl.max((a != a).to(tl.int8), dim) > 0, float('nan'), out)
    return out""",
    # (value, index) of the max / min along dim, the lowest index among ties, NaN (at its lowest index) where
    # the slice holds one: what Inductor's maximum_with_index / minimum_with_index combine to.
    "max_with_index": """@triton.jit
def ih_max_with_index(value, index, dim):
    best = tl.max(value, dim, keep_dims=True)
    hit = value == best
    out = tl.max(value, dim)
    if value.dtype.is_floating():
        nan = value != value
        has_nan = tl.max(nan.to(tl.int8), dim, keep_dims=True) > 0
        hit = tl.where(has_nan, nan, hit)
        out = tl.where(tl.max(nan.to(tl.int8), dim) > 0, float('nan'), out)
    first = tl.min(tl.where(hit, index, tl.full(index.shape, 2147483647, index.dtype)), dim)
    return (out, first)""",
    "min_with_index": """@triton.jit
def ih_min_with_index(value, index, dim):
    best = tl.min(value, dim, keep_dims=True)
    hit = value == best
    out = tl.min(value, dim)
    if value.dtype.is_floating():
        nan = value != value
        has_nan = tl.max(nan.to(tl.int8), dim, keep_dims=True) > 0
        hit = tl.where(has_nan, nan, hit)
        out = tl.where(tl.max(nan.to(tl.int8), dim) > 0, float('nan'), out)
    first = tl.min(tl.where(hit, index, tl.full(index.shape, 2147483647, index.dtype)), dim)
    return (out, first)""",
}


def _collect_helpers(kernels: list[KernelSeed]) -> dict[str, str]:
    """ih_<name> -> source for every triton_helpers function the kernels call, and the ones those call."""
    from torch._inductor.runtime import triton_helpers

    out: dict[str, str] = {}
    todo = [h for k in kernels for h in k.helpers]
    while todo:
        name = todo.pop()
        if f"ih_{name}" in out:
            continue
        if name in VECTORISED_HELPERS:
            out[f"ih_{name}"] = VECTORISED_HELPERS[name]
            continue
        obj = getattr(triton_helpers, name, None)
        src = getattr(obj, "src", None)
        if obj is None or not isinstance(src, str) or not hasattr(obj, "fn"):
            raise _Unseedable(f"triton_helpers.{name} is not a @triton.jit function the candidate can carry")
        tree = ast.parse(_dedent(src))
        fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
        fn.decorator_list = [ast.parse("triton.jit").body[0].value]
        module_names = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)}
        for ref in sorted(module_names):
            target = getattr(triton_helpers, ref, None)
            if ref != name and hasattr(target, "fn") and isinstance(getattr(target, "src", None), str):
                todo.append(ref)
                fn = _RenameName(ref, f"ih_{ref}").visit(fn)
            elif ref in _HELPER_GLOBALS:
                fn = _RenameName(ref, _HELPER_GLOBALS[ref]).visit(fn)
        fn = _RenameHelpers().visit(fn)
        fn.name = f"ih_{name}"
        out[f"ih_{name}"] = ast.unparse(fn)
    return out


# Module-level names triton_helpers' functions read, and what they are called in a candidate.
_HELPER_GLOBALS = {"math": "tl_math", "libdevice": "libdevice", "tl": "tl", "triton": "triton"}


def _is_add_combine(fn: ast.FunctionDef) -> bool:
    """`def f(a, b): return a + b`: the combine function of a sum scan."""
    args = [a.arg for a in fn.args.args]
    body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if len(args) != 2 or not body or not isinstance(body[-1], ast.Return):
        return False
    ret = body[-1].value
    if len(body) == 2:      # Inductor's form: `tmp0 = a + b; return tmp0`
        first = body[0]
        if not (isinstance(first, ast.Assign) and len(first.targets) == 1 and isinstance(first.targets[0], ast.Name)
                and isinstance(ret, ast.Name) and ret.id == first.targets[0].id):
            return False
        ret = first.value
    elif len(body) != 1:
        return False
    return (isinstance(ret, ast.BinOp) and isinstance(ret.op, ast.Add) and isinstance(ret.left, ast.Name)
            and isinstance(ret.right, ast.Name) and {ret.left.id, ret.right.id} == set(args))


class _ScanAsCumsum(ast.NodeTransformer):
    """tl.associative_scan(x, axis, add) -> tl.cumsum(x, axis).

    The same scan (tl.cumsum is associative_scan with tl's own add), which the interpreter runs as one numpy
    cumsum instead of one Python call per element; on the GPU it compiles to the same scan.
    """

    def __init__(self, add_combines: set[str]):
        self.add_combines = add_combines

    def visit_Call(self, node):
        self.generic_visit(node)
        if ast.unparse(node.func) == "tl.associative_scan" and len(node.args) == 3 and not node.keywords \
                and isinstance(node.args[2], ast.Name) and node.args[2].id in self.add_combines:
            call = ast.parse("tl.cumsum(0, 0)").body[0].value
            values = node.args[0]
            if isinstance(values, ast.Tuple):     # Inductor's form: `tmp4, = tl.associative_scan((tmp2,), 1, add)`
                if len(values.elts) != 1:
                    return node
                call.args = [values.elts[0], node.args[1]]
                return ast.copy_location(ast.Tuple(elts=[call], ctx=ast.Load()), node)
            call.args = node.args[:2]
            return ast.copy_location(call, node)
        return node


class _RenameName(ast.NodeTransformer):
    def __init__(self, old: str, new: str):
        self.old, self.new = old, new

    def visit_Name(self, node):
        if node.id == self.old:
            return ast.copy_location(ast.Name(id=self.new, ctx=node.ctx), node)
        return node


def _dedent(src: str) -> str:
    import textwrap

    return textwrap.dedent(src)


# -- the call body ---------------------------------------------------------------------------------------------

_DROPPED_CALLS = {"assert_size_stride", "assert_alignment", "get_raw_stream", "set_device", "clear",
                  "_DeviceGuard", "check_tensor_alignment"}
_ALLOC_CALLS = {"empty_strided_cpu", "empty_strided_cuda", "empty_strided"}


def _call_name(node: ast.AST) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _rewrite_body(stmts: list[ast.stmt], kernels: dict[str, KernelSeed]) -> tuple[list[ast.stmt], tuple]:
    """call(args)'s statements as a launcher's: allocations through torch, launches marked, checks dropped."""
    from verifier.audit import ALLOWED_OPS

    out: list[ast.stmt] = []
    graph_inputs: tuple = ()

    def rewrite(stmts):
        nonlocal graph_inputs
        for stmt in stmts:
            if isinstance(stmt, ast.With):             # device guards: their body runs as it is
                rewrite(stmt.body)
                continue
            if isinstance(stmt, ast.Delete):
                continue
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Name) and stmt.value.id == "args":
                graph_inputs = tuple(e.id for e in stmt.targets[0].elts) if isinstance(stmt.targets[0], ast.Tuple) \
                    else (stmt.targets[0].id,)
                continue
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                name = _call_name(stmt.value)
                if name in _DROPPED_CALLS:
                    continue
            if isinstance(stmt, ast.Assign) and _call_name(stmt.value) == "get_raw_stream":
                continue
            out.append(_LaunchMarker(kernels, ALLOWED_OPS).visit(stmt))

    rewrite(stmts)
    if not graph_inputs:
        raise _Unseedable("call(args) does not unpack its arguments as expected")
    return out, graph_inputs


class _LaunchMarker(ast.NodeTransformer):
    """Marks kernel.run(...) launches, maps allocations to torch, refuses compute through torch."""

    def __init__(self, kernels: dict[str, KernelSeed], allowed_ops):
        self.kernels, self.allowed = kernels, allowed_ops

    def visit_Call(self, node):
        self.generic_visit(node)
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "run" and isinstance(func.value, ast.Name) \
                and func.value.id in self.kernels:
            node.keywords = [kw for kw in node.keywords if kw.arg != "stream"]
            node._kgen_kernel = func.value.id
            return node
        name = _call_name(node)
        dotted = ast.unparse(func)
        if dotted.startswith("extern_kernels."):
            raise _Unseedable(f"inductor used extern {name} (aten.{name} through torch), which the op audit rejects")
        if "aten." in dotted or dotted.startswith("torch.ops."):
            op = dotted.split(".")[-2] if dotted.split(".")[-1] in ("default", "Tensor", "Scalar") else dotted.split(".")[-1]
            if op not in self.allowed:
                raise _Unseedable(f"inductor fell back to aten.{op} (a compute op through torch), "
                                  "which the op audit rejects")
            return node
        if name in _ALLOC_CALLS:
            size, stride, dtype = (node.args + [None] * 3)[:3]
            call = ast.parse("torch.empty_strided(0, 0, dtype=0, device=_device)").body[0].value
            call.args = [size, stride]
            call.keywords[0].value = dtype
            return ast.copy_location(call, node)
        if name == "reinterpret_tensor":
            call = ast.parse("torch.as_strided(0)").body[0].value
            call.args = node.args
            return ast.copy_location(call, node)
        if dotted.startswith(("torch.", "math.")) or name in {"len", "max", "min", "int"}:
            return node
        if isinstance(func, ast.Attribute) and func.attr in {"size", "stride", "storage_offset", "view", "reshape",
                                                              "as_strided", "copy_", "to", "contiguous", "t"}:
            return node
        raise _Unseedable(f"Inductor's wrapper calls {dotted}, which the launcher does not know")



def _main() -> int:
    import argparse
    import sys

    parser = argparse.ArgumentParser(description="Capture what Inductor generates for a task, as a kgen seed.")
    parser.add_argument("task", type=Path)
    parser.add_argument("--wrappers", type=Path, help="write each plan's Inductor wrapper source into this folder")
    parser.add_argument("--candidate", type=Path, help="write the seeded candidate (Inductor's first configurations)")
    args = parser.parse_args()
    seed = capture(args.task)
    if isinstance(seed, SeedUnavailable):
        print(seed)
        return 1
    print(f"{seed.task_name}: {len(seed.plans)} plans, generated on {seed.device} with torch {seed.torch_version}")
    print(seed.kernel_summary())
    if args.wrappers:
        args.wrappers.mkdir(parents=True, exist_ok=True)
        for plan in seed.plans:
            (args.wrappers / f"{seed.task_name}_{plan.label}.py").write_text(plan.wrapper)
    if args.candidate:
        from agent.proposers.heuristic.inductor_emit import emit_candidate

        args.candidate.write_text(emit_candidate(seed))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
