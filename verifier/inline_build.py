"""load_inline extensions built before the candidate process, in a sandboxed build process, cached by source.

    from verifier.inline_build import plan_builds, prebuild
    plan = plan_builds(source)            # static: the literal load_inline arguments, or why there are none
    built = prebuild(plan, device="cuda", timeout_s=180)
    built.env       # TORCH_EXTENSIONS_DIR (keyed by source), TORCH_CUDA_ARCH_LIST, MAX_JOBS: for the candidate process
    built.seconds, built.hit, built.note, built.problem

    prebuild_round([source, ...], "cuda", timeout_s=180)   # a round's builds side by side, before its verifications

    python -m verifier.inline_build       # the build process itself (one job line on stdin, as a Sandbox sends it)

A KernelBench CUDA solution calls `torch.utils.cpp_extension.load_inline(...)` when it is imported, so
the compile (nvcc on torch's headers: 30-90 s) used to happen inside the candidate process, in the
GPU's time, every time, and under a build folder named by the extension's name alone, which every
candidate that names its extension "elementwise_add" shares and rebuilds. Here the build is a phase
of its own:

1. `plan_builds` reads the candidate's syntax tree, never runs it: every `load_inline` call whose
   arguments are literals (strings, lists of strings, booleans; or names bound once, at module level,
   to such literals and never changed, as KernelBench writes `cuda_sources=elementwise_add_source`).
   A call with any other argument (an f-string, a computed flag, `**kwargs`, a `build_directory`), two
   calls under one name, or a file that touches `os.environ` leaves the whole candidate to build in its
   own process as before (`plan.skipped` says why).
2. The key is the SHA-256 of those arguments and the toolchain (torch, its CUDA, Python, the GPU
   architecture, nvcc): `TORCH_EXTENSIONS_DIR` becomes `<kgen's extensions cache>/kgen-<key>`, so the
   same source meets its own build folder again in any later candidate or run, and different sources
   never share one.
3. `prebuild` looks the key up in kgen's own index (`<kgen cache>/inline_builds/<key>.json`, outside
   every sandbox's writable places): a hit is the index's SHA-256 of each built file matching the file
   on disk, and costs no process. Otherwise it runs this module's `main` in a Sandbox (the same
   confinement as the candidate process, no network, writable only there and in the caches): torch's
   real load_inline with the very same arguments, ninja, MAX_JOBS from the CPU count, with the step that
   would load the built library replaced by nothing, so none of the candidate's code runs there, only
   the compiler on its C++. On a machine with no GPU the build is nvcc's alone, through
   verifier.cuda_offline's stand-in, whose objects are cached in the same folder.
4. The candidate process gets `built.env` before it imports the candidate: its own load_inline finds
   the build folder up to date (ninja does nothing) and loads the library, in the sandbox, as before.

The candidate's Python never runs in kgen's process or in the build process. A compile error of a call
made at module level (it runs at import) is the verdict (compile_error, with the compiler's message);
any other failure of the build (a call inside a function, a timeout, kgen's own trouble) is only a
note, and the candidate process builds it as it always did. A cache folder is writable by later
candidates (as every compile cache of kgen's is, verifier.sandbox): a file changed there no longer
matches the index and is rebuilt, but a change between the index check and the candidate's load is
not seen.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from verifier import cleanup

BUILD_JOB = [sys.executable, "-m", "verifier.inline_build"]
PHASE = "load_inline build (its own sandboxed process, cached by source)"
FEEDBACK_CHARS = 4000
# load_inline's parameters a call may set, by keyword, to a literal. `build_directory` is not among them:
# a candidate choosing its own folder keeps it (and builds it in its process, as before).
KEYWORDS = ("name", "cpp_sources", "cuda_sources", "functions", "extra_cflags", "extra_cuda_cflags",
            "extra_ldflags", "extra_include_paths", "verbose", "with_cuda", "is_python_module",
            "with_pytorch_error_handling", "keep_intermediates", "use_pch", "no_implicit_headers")
POSITIONAL = ("name", "cpp_sources", "cuda_sources")   # the same in every torch version; later ones moved
NOT_IN_KEY = ("verbose",)    # what the build prints, not what it builds


@dataclass(frozen=True)
class InlineCall:
    """One load_inline call, its arguments as the candidate writes them (literal values only)."""

    kwargs: tuple            # ((keyword, value), ...), in KEYWORDS order
    line: int
    at_import: bool          # a module-level statement: it runs whenever the candidate is imported

    @property
    def name(self) -> str:
        return dict(self.kwargs)["name"]

    def arguments(self) -> dict:
        """The keyword arguments as load_inline takes them (lists, a dict for functions=)."""
        return {k: _plain(v) for k, v in self.kwargs}


@dataclass(frozen=True)
class BuildPlan:
    """What can be built before the candidate process: every call, or none (`skipped` says why)."""

    calls: tuple = ()
    skipped: str = ""

    def __bool__(self) -> bool:
        return bool(self.calls) and not self.skipped


@dataclass
class Prebuilt:
    """The outcome of prebuild(): the candidate process's build environment and what the phase did."""

    env: dict = field(default_factory=dict)   # for the candidate process ({} when nothing was built here)
    seconds: float = 0.0
    hit: bool = False         # found built in the cache: no build process ran
    note: str = ""            # a line for the verdict's flags
    problem: dict | None = None   # {"status", "reason", "feedback"} when the build decides the verdict
    key: str = ""
    # lent as library files (lends_library): [{"name", "digest" (call_digest), "path" (kgen's copy)}]
    libraries: list = field(default_factory=list)


# ----------------------------------------------------------------------------------------------
# 1. the plan, from the syntax tree


class _Unresolved(Exception):
    """An argument that is not a literal (or a name bound once to one)."""


def _bindings(tree: ast.Module) -> dict[str, int]:
    """How many times each name is bound anywhere in the file (assignments, arguments, imports, defs...)."""
    counts: dict[str, int] = {}

    def bind(name: str) -> None:
        counts[name] = counts.get(name, 0) + 1

    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bind(node.id)
        elif isinstance(node, ast.arg):
            bind(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bind(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                bind((a.asname or a.name).split(".")[0])
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            for name in node.names:
                bind(name)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bind(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            bind(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bind(node.rest)
    return counts


def _touched(tree: ast.Module) -> set[str]:
    """Names whose value may change without being bound again: `flags.append(...)`, `src[0] = ...`."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            out.add(node.value.id)
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
                and isinstance(node.ctx, (ast.Store, ast.Del)):
            out.add(node.value.id)
    return out


def _constants(tree: ast.Module) -> dict[str, ast.AST]:
    """Module-level names bound exactly once in the whole file, by a plain assignment, never changed after."""
    counts, touched = _bindings(tree), _touched(tree)
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            name, value = node.target.id, node.value
        else:
            continue
        if counts.get(name) == 1 and name not in touched:
            out[name] = value
    return out


def _literal(node: ast.AST, names: dict[str, ast.AST], depth: int = 0):
    """The value of a literal expression: str, bool, int, None, lists and tuples of them (as tuples), a
    dict of strings (load_inline's functions= may be one), `a + b` of two such strings or lists, and names
    bound once to any of those. Anything else raises _Unresolved."""
    if depth > 20:
        raise _Unresolved("nested too deep")
    if isinstance(node, ast.Constant) and (node.value is None or type(node.value) in (str, bool, int)):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        return tuple(_literal(e, names, depth + 1) for e in node.elts)
    if isinstance(node, ast.Dict) and all(k is not None for k in node.keys):
        pairs = [(_literal(k, names, depth + 1), _literal(v, names, depth + 1)) for k, v in zip(node.keys, node.values)]
        if not all(type(k) is str and type(v) is str for k, v in pairs):
            raise _Unresolved("a dict that is not of strings")
        return (_DICT, tuple(pairs))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal(node.left, names, depth + 1), _literal(node.right, names, depth + 1)
        if type(left) is type(right) and type(left) in (str, tuple):
            return left + right
        raise _Unresolved("a sum that is not of strings or lists")
    if isinstance(node, ast.Name) and node.id in names:
        return _literal(names[node.id], names, depth + 1)
    raise _Unresolved(ast.dump(node)[:60] if not isinstance(node, ast.Name) else f"the name {node.id}")


_DICT = "__dict__"   # marks a dict literal in _literal's tuples: (_DICT, ((key, value), ...))


def _plain(value):
    """A literal as load_inline takes it: tuples become lists, a dict literal a dict."""
    if isinstance(value, tuple) and len(value) == 2 and value[0] == _DICT:
        return {k: v for k, v in value[1]}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def _is_load_inline(call: ast.Call, names) -> bool:
    return names.resolve(call.func).split(".")[-1] == "load_inline"


def lends_library() -> bool:
    """Whether a build is lent to the candidate process as its library file rather than as its build folder.

    Where kgen is root the candidate runs as the sandbox's unprivileged uid, with compile caches of its own
    sandbox (verifier.sandbox.PRIVATE_CACHES): kgen's extensions cache is root's and out of its reach, and
    torch's load_inline writes a lock file beside the library it loads. The build then runs in a folder of its
    own, the library is kept in kgen's cache, and each verification gets a copy of it in its exchange
    directory, which the candidate's load_inline imports (use_lent_libraries) instead of building. Where kgen
    is not root the candidate keeps kgen's uid and the shared caches: the build folder itself is lent
    (TORCH_EXTENSIONS_DIR), and ninja finds it up to date."""
    from verifier.sandbox import drops_uid

    return drops_uid()


def call_digest(arguments: dict) -> str:
    """SHA-256 of one load_inline call's arguments (those that shape the build), as load_inline takes them:
    the same for the literal read from the syntax tree and for the call the candidate then makes."""
    kept = {k: v for k, v in arguments.items() if k not in NOT_IN_KEY}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=list).encode()).hexdigest()


def plan_builds(source: str) -> BuildPlan:
    """Every load_inline call of the source with literal arguments, or an empty plan saying why not."""
    from verifier.static import _Names

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as exc:
        return BuildPlan(skipped=f"not valid Python ({exc})")
    names = _Names(tree)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _is_load_inline(n, names)]
    if not calls:
        return BuildPlan(skipped="no load_inline call")
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr in ("environ", "putenv", "unsetenv")) or \
                (isinstance(node, ast.Name) and node.id in ("environ", "putenv")):
            # NOTE: a build made under other variables than the candidate's own would not be the one it loads
            return BuildPlan(skipped=f"line {node.lineno}: the candidate reads or sets environment variables")
    top_level = {id(n) for stmt in tree.body if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                       ast.ClassDef, ast.If, ast.Try, ast.With,
                                                                       ast.For, ast.While))
                 for n in ast.walk(stmt)}
    constants = _constants(tree)
    planned, seen = [], {}
    for call in sorted(calls, key=lambda c: (c.lineno, c.col_offset)):
        where = f"line {call.lineno}"
        if len(call.args) > len(POSITIONAL):
            return BuildPlan(skipped=f"{where}: load_inline with more than {len(POSITIONAL)} positional arguments")
        given = list(zip(POSITIONAL, call.args))
        for k in call.keywords:
            if k.arg is None:
                return BuildPlan(skipped=f"{where}: load_inline(**...) arguments")
            if k.arg not in KEYWORDS:
                return BuildPlan(skipped=f"{where}: load_inline's {k.arg}= is left to the candidate's own build")
            given.append((k.arg, k.value))
        try:
            values = {k: _literal(v, constants) for k, v in given}
        except _Unresolved as exc:
            return BuildPlan(skipped=f"{where}: a load_inline argument is not a literal ({exc})")
        if type(values.get("name")) is not str or not values.get("cuda_sources"):
            return BuildPlan(skipped=f"{where}: load_inline without a literal name and CUDA source")
        kwargs = tuple((k, values[k]) for k in KEYWORDS if k in values)
        one = InlineCall(kwargs=kwargs, line=call.lineno, at_import=id(call) in top_level)
        if one.name in seen and seen[one.name] != one.kwargs:
            return BuildPlan(skipped=f"{where}: two load_inline calls named {one.name!r}")
        if one.name not in seen:
            seen[one.name] = one.kwargs
            planned.append(one)
    return BuildPlan(calls=tuple(planned))


# ----------------------------------------------------------------------------------------------
# 2. the key and the cache


def toolchain(device: str) -> dict:
    """What else decides the built library: torch and its CUDA, Python, the GPU architecture, the compilers."""
    import torch

    arch = os.environ.get("TORCH_CUDA_ARCH_LIST", "")
    if not arch and device == "cuda":
        major, minor = torch.cuda.get_device_capability()
        arch = f"{major}.{minor}"
    if device != "cuda":
        from verifier import cuda_offline

        arch = cuda_offline.ARCH
    return {"torch": torch.__version__, "cuda": torch.version.cuda or "", "python": sys.version.split()[0],
            "arch": arch, "nvcc": shutil.which("nvcc") or "", "cxx": os.environ.get("CXX", ""),
            "offline": device != "cuda"}


def cache_key(plan: BuildPlan, tools: dict) -> str:
    """SHA-256 (24 hex digits) of every call's arguments (those that shape the build) and the toolchain."""
    calls = [[[k, v] for k, v in c.kwargs if k not in NOT_IN_KEY] for c in plan.calls]
    text = json.dumps({"calls": calls, "toolchain": tools}, sort_keys=True, default=list)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def extensions_root() -> Path:
    """The torch extensions cache the sandbox makes writable (verifier.sandbox.scrubbed_env)."""
    from verifier.sandbox import scrubbed_env

    return Path(scrubbed_env()["TORCH_EXTENSIONS_DIR"])


def index_dir() -> Path:
    """kgen's own record of finished builds: under its cache, outside every sandbox's writable places."""
    from verifier.sandbox import CACHE_ROOT

    return CACHE_ROOT / "inline_builds"


def _artifacts(folder: Path) -> dict[str, str]:
    """{path relative to the folder: SHA-256} of every library and object file built there."""
    out = {}
    if folder.is_dir():
        for path in sorted(folder.rglob("*")):
            if path.suffix in (".so", ".o") and path.is_file() and not path.is_symlink():
                out[str(path.relative_to(folder))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def cached(key: str, folder: Path) -> bool:
    """The index has this key, and every file it recorded is there with the same bytes."""
    entry = index_dir() / f"{key}.json"
    try:
        recorded = json.loads(entry.read_text())["artifacts"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if not recorded or not isinstance(recorded, dict):
        return False
    for rel, digest in recorded.items():
        path = folder / rel
        try:
            if hashlib.sha256(path.read_bytes()).hexdigest() != digest:
                return False
        except OSError:
            return False
    return True


def _record(key: str, folder: Path, plan: BuildPlan, seconds: float) -> None:
    artifacts = _artifacts(folder)
    if not artifacts:
        return
    index = index_dir()
    index.mkdir(parents=True, exist_ok=True)
    entry = index / f"{key}.json"
    tmp = entry.with_name(f".{entry.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"key": key, "names": [c.name for c in plan.calls], "artifacts": artifacts,
                               "build_s": round(seconds, 3), "built": time.strftime("%Y-%m-%d %H:%M:%S")},
                              indent=2))
    os.replace(tmp, entry)   # NOTE: whole, then renamed: another verification may read it meanwhile


# ----------------------------------------------------------------------------------------------
# 3. the phase, in kgen's process


def build_env(folder: Path, tools: dict) -> dict:
    """The variables under which the build process and the candidate process build the same thing."""
    env = {"TORCH_EXTENSIONS_DIR": str(folder), "MAX_JOBS": str(max(1, os.cpu_count() or 1))}
    if not tools["offline"] and tools["arch"]:
        # NOTE: set for both processes: without it torch asks the GPU, and the build process leaves the GPU alone
        env["TORCH_CUDA_ARCH_LIST"] = tools["arch"]
    return env


def prebuild(plan: BuildPlan, device: str, timeout_s: float, output_cap_bytes: int = 64_000) -> Prebuilt:
    """Build the plan's extensions in a sandboxed build process, or find them built; never raises for the
    candidate's faults. An empty plan returns an empty Prebuilt with a note saying why."""
    started = time.perf_counter()
    if not plan:
        return Prebuilt(note=f"load_inline built in the candidate's process: {plan.skipped}" if plan.skipped
                        and plan.skipped != "no load_inline call" else "")
    try:
        tools = toolchain(device)
    except Exception as exc:  # noqa: BLE001 - kgen cannot say what it would build with: the old way then
        return Prebuilt(note=f"load_inline built in the candidate's process: no toolchain here ({exc})"[:300])
    if tools["offline"] and lends_library():
        # NOTE: nvcc's stand-in caches objects under TORCH_EXTENSIONS_DIR, which the sandbox's uid has of its own
        return Prebuilt(note="load_inline built in the candidate's process: the candidate runs as an unprivileged "
                             "uid with compile caches of its own sandbox, and no library is loaded here (no GPU)")
    key = cache_key(plan, tools)
    folder = extensions_root() / f"kgen-{key}"
    env = build_env(folder, tools)
    names = ", ".join(c.name for c in plan.calls)
    with _key_lock(key):   # NOTE: two verifications of one source in this process: one builds, one finds it
        return _prebuild_locked(plan, key, folder, env, names, tools, started, timeout_s, output_cap_bytes)


_KEY_LOCKS: dict[str, threading.Lock] = {}
_KEY_LOCKS_LOCK = threading.Lock()


def _key_lock(key: str) -> threading.Lock:
    with _KEY_LOCKS_LOCK:
        return _KEY_LOCKS.setdefault(key, threading.Lock())


def _prebuild_locked(plan: BuildPlan, key: str, folder: Path, env: dict, names: str, tools: dict, started: float,
                     timeout_s: float, output_cap_bytes: int) -> Prebuilt:
    library = lends_library()
    lent = {k: v for k, v in env.items() if k != "TORCH_EXTENSIONS_DIR"} if library else env
    libraries = _libraries(plan, folder) if library else []
    if _all_kept(key, folder, libraries):
        with _AHEAD_LOCK:
            ahead = _AHEAD.pop(key, None)
        how = f"built {ahead:.1f} s ahead, beside the round's other candidates" if ahead is not None else \
            "no compile"
        return Prebuilt(env=lent, seconds=time.perf_counter() - started, hit=True, key=key, libraries=libraries,
                        note=f"load_inline: {names} found built in the cache (key {key}): {how}")
    from verifier.sandbox import run_sandboxed

    # NOTE: from an empty folder: a library left there by someone else (the folder is writable by sandboxes,
    # and a key can be guessed from a source) would look up to date to ninja and be recorded as kgen's build
    cleanup.remove_tree(folder)   # NOTE: what a sandbox left may be anything: no recursion, no link followed
    job = {"calls": [c.arguments() for c in plan.calls], "offline": tools["offline"]}
    work = None
    if library:
        # the sandbox's uid builds in a folder of kgen's that it is handed (shared as its working directory);
        # its private caches go with the sandbox, so the libraries are taken from there into kgen's cache
        import tempfile

        from verifier.judge import exchange_root

        work = Path(tempfile.mkdtemp(prefix=cleanup.owned_prefix("kgen-inline-build"), dir=exchange_root()))
        job["build_root"] = str(work)
    try:
        res = run_sandboxed(BUILD_JOB, job, timeout_s=timeout_s, output_cap_bytes=output_cap_bytes,
                            extra_env=lent if library else env, cwd=work)
        message = res.message or {}
        if message.get("status") == "ok" and work is not None:
            _adopt(work, folder, plan)
    finally:
        if work is not None:
            cleanup.remove_soon(work)
    seconds = time.perf_counter() - started
    if message.get("status") == "ok":
        _record(key, folder, plan, seconds)
        how = "; lent to the candidate process as its library file" if library else ""
        return Prebuilt(env=lent, seconds=seconds, key=key, libraries=libraries,
                        note=f"load_inline: {names} built in {seconds:.1f} s in a process of its own (key {key})"
                             f"{how}")
    at_import = any(c.at_import for c in plan.calls)
    if message.get("status") == "compile_error" and at_import:
        return Prebuilt(env=env, seconds=seconds, key=key, problem={
            "status": "compile_error", "reason": str(message.get("reason", ""))[:300],
            "feedback": str(message.get("feedback", ""))[-FEEDBACK_CHARS:]})
    if res.timed_out and at_import:
        return Prebuilt(env=env, seconds=seconds, key=key, problem={
            "status": "timeout", "reason": f"its load_inline build ({names}) ran past the {timeout_s:.0f} s limit",
            "feedback": res.stderr[-FEEDBACK_CHARS:]})
    why = message.get("reason") or ("timed out" if res.timed_out else res.limit or "the build process ended "
                                    "without a result")
    # NOTE: not the candidate's verdict: its own process builds it again, as it did before this phase existed
    return Prebuilt(env=env, seconds=seconds, key=key,
                    note=f"load_inline: the build before the candidate process failed ({str(why)[:200]}); "
                         f"built in the candidate's process instead")


def _libraries(plan: BuildPlan, folder: Path) -> list[dict]:
    """Where each call's library lies in kgen's cache once built, with the digest its call is known by."""
    return [{"name": c.name, "digest": call_digest(c.arguments()), "path": str(folder / c.name / f"{c.name}.so")}
            for c in plan.calls]


def _adopt(work: Path, folder: Path, plan: BuildPlan) -> None:
    """Copy each library the sandbox's uid built under work into kgen's cache folder, kgen's own files there.
    A call whose library is missing leaves the folder without it: that is no cache hit, and the candidate
    process builds it as before."""
    from verifier.sandbox import read_left

    for c in plan.calls:
        # NOTE: the build ran the compiler with the candidate's flags, as the sandbox's uid, in that folder: a link
        # it left there (the folder or the file) is not followed, so kgen (root) copies only a plain file it made
        data = read_left(work, c.name, f"{c.name}.so", max_bytes=1 << 40)
        if data is None:
            continue
        target = folder / c.name
        target.mkdir(parents=True, exist_ok=True)
        tmp = target / f".{c.name}.so.{os.getpid()}.tmp"
        tmp.write_bytes(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target / f"{c.name}.so")


def built_env(source: str, device: str = "cuda") -> dict:
    """The build variables under which source's extensions are found built, when the cache has them; else {}.

    Builds nothing and starts no process: for another sandboxed run of a verified candidate (the profiler's
    child), so that its load_inline loads the library instead of compiling it again."""
    keyed = _keyed(source, device)
    if keyed is None:
        return {}
    _, tools, key, folder = keyed
    return build_env(folder, tools) if cached(key, folder) else {}


def _keyed(source: str, device: str):
    """(plan, toolchain, key, cache folder) of source's extensions; None where nothing is planned or there is no
    toolchain to key by (the child then builds as it always did)."""
    plan = plan_builds(source)
    if not plan:
        return None
    try:
        tools = toolchain(device)
    except Exception:  # noqa: BLE001
        return None
    key = cache_key(plan, tools)
    return plan, tools, key, extensions_root() / f"kgen-{key}"


def _all_kept(key: str, folder: Path, libraries: list[dict]) -> bool:
    """The index's files are there as built, and so is every library lent as a file."""
    return cached(key, folder) and all(Path(lib["path"]).is_file() for lib in libraries)


def use_lent_libraries(lent: list) -> None:
    """In the process that imports the candidate (verifier.candidate, profiler.ncu_child): load_inline, for a
    call whose arguments are those of a library built before (lent as [{"name", "digest", "dir"}], a copy in a
    directory this process can read): that library imported, nothing compiled; any other call goes to torch's
    own load_inline. The library is the candidate's own C++ either way, built by kgen from the literals of its
    file: nothing here is trusted to it, only its build time is saved."""
    import inspect

    known = {item["digest"]: (item["name"], item["dir"]) for item in lent
             if type(item) is dict and all(type(item.get(k)) is str for k in ("name", "digest", "dir"))}
    if not known:
        return
    from torch.utils import cpp_extension

    own, load = cpp_extension.load_inline, cpp_extension._import_module_from_library
    signature = inspect.signature(own)

    def load_inline(*args, **kwargs):
        try:
            given = signature.bind(*args, **kwargs).arguments
        except TypeError:
            return own(*args, **kwargs)
        if set(given) <= set(KEYWORDS):
            try:
                digest = call_digest(given)
            except (TypeError, ValueError):
                digest = None
            hit = known.get(digest)
            if hit is not None and hit[0] == given.get("name"):
                return load(hit[0], hit[1], given.get("is_python_module", True))
        return own(*args, **kwargs)

    load_inline.__doc__ = own.__doc__
    load_inline.__wrapped__ = own
    cpp_extension.load_inline = load_inline


def built_libraries(source: str, device: str = "cuda") -> list[dict]:
    """The libraries of source's extensions where they are lent as files (lends_library) and the cache has them
    all; else []. Builds nothing: for another sandboxed run of a verified candidate (the profiler's child)."""
    keyed = _keyed(source, device) if lends_library() else None
    if keyed is None or keyed[1]["offline"]:
        return []
    plan, _, key, folder = keyed
    libraries = _libraries(plan, folder)
    return libraries if _all_kept(key, folder, libraries) else []


def lend_copies(libraries: list[dict], folder: Path) -> list[dict]:
    """A fresh copy of each library under folder (library-<i>/<name>.so, made here, never through a link left
    there), for a process that can read folder: [{"name", "digest", "dir"}]. One that cannot be copied is left
    out (that process's load_inline builds it)."""
    from verifier import tensorfile

    lent = []
    for i, lib in enumerate(libraries):
        where = Path(folder) / f"library-{i}"
        try:
            where.mkdir(mode=0o755)
            os.chmod(where, 0o755)
            tensorfile.write_fresh(where / f"{lib['name']}.so", Path(lib["path"]).read_bytes())
        except OSError:
            continue
        lent.append({"name": lib["name"], "digest": lib["digest"], "dir": str(where)})
    return lent


_AHEAD: dict[str, float] = {}      # key -> seconds its build took in prebuild_round, before its verification
_AHEAD_LOCK = threading.Lock()


def prebuild_round(sources: list[str], device: str, timeout_s: float, parallel: int | None = None) -> int:
    """Build the extensions of a round's candidates side by side, before any of them is verified (on a GPU the
    verifications run one at a time; their builds need only the CPU). Each verification then finds its build
    in the cache, and its note says how long the build took here. Returns how many builds ran; never raises
    for a candidate's faults (its own verification meets them and reports them)."""
    from concurrent.futures import ThreadPoolExecutor

    plans = {}
    for source in sources:
        plan = plan_builds(source)
        if plan:
            plans.setdefault(plan.calls, plan)
    if not plans:
        return 0
    workers = parallel or max(1, min(len(plans), (os.cpu_count() or 2) // 2))

    def one(plan: BuildPlan) -> None:
        done = prebuild(plan, device, timeout_s)
        if done.key and not done.hit and done.problem is None and "failed" not in done.note:
            with _AHEAD_LOCK:
                _AHEAD[done.key] = done.seconds

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kgen-inline-build") as pool:
        list(pool.map(one, plans.values()))
    return len(plans)


# ----------------------------------------------------------------------------------------------
# 4. the build process (trusted code; the candidate's C++ goes to the compiler only)


def _build_one(kwargs: dict, offline: bool) -> None:
    if offline:
        from verifier import cuda_offline

        cuda_offline.build_inline(**kwargs)
        return
    from torch.utils import cpp_extension

    cpp_extension.load_inline(**{**kwargs, "verbose": False})


def _compile_error(exc: BaseException) -> bool:
    text = str(exc)
    return "Error building extension" in text or "nvcc failed" in text or type(exc).__name__ == "CompileException"


def main() -> None:
    hello = json.loads(sys.stdin.readline())
    sys.stdin.close()
    from verifier.channel import ChildChannel

    chan = ChildChannel(int(os.environ.pop("KGEN_RESULT_FD")), bytes.fromhex(hello["key"]))
    job = hello["job"]
    built = []
    try:
        if not job["offline"]:
            from torch.utils import cpp_extension

            # NOTE: build, never load: loading would run the candidate's static initialisers here
            cpp_extension._import_module_from_library = lambda *args, **kwargs: None
        for kwargs in job["calls"]:
            t0 = time.perf_counter()
            if job.get("build_root"):
                # NOTE: the folder kgen takes the library from (inline_build._adopt), not this sandbox's caches
                kwargs = {**kwargs, "build_directory": os.path.join(job["build_root"], kwargs["name"])}
                os.makedirs(kwargs["build_directory"], exist_ok=True)
            _build_one(kwargs, job["offline"])
            built.append([kwargs["name"], time.perf_counter() - t0])
        message = {"status": "ok", "reason": "built", "built": built}
    except BaseException as exc:  # noqa: BLE001 - the caller must hear why
        text = str(exc)
        first = text.strip().splitlines()[0] if text.strip() else ""
        status = "compile_error" if _compile_error(exc) else "crashed"
        message = {"status": status, "reason": f"{type(exc).__name__} building the load_inline extension "
                                                f"(before the candidate process): {first[:200]}",
                   "feedback": text[-FEEDBACK_CHARS:], "built": built}
    sys.stdout.flush()
    sys.stderr.flush()
    chan.send(message)
    os._exit(0)


if __name__ == "__main__":
    main()
