"""The run-time layers that keep a candidate away from the harness, inside the worker.

    guard = Guard.capture()                     # before any candidate code runs
    policy = RuntimePolicy(candidate_path, writable_roots); policy.install()
    ...                                         # import the candidate, run it
    guard.check_or_raise(Verdict, "ModelNew.forward")
    policy.check_or_raise(Verdict, "ModelNew.forward")

Two layers, both in force whatever the static checks let through:

- `Guard` snapshots, before the candidate is imported, every function, class
  and module the harness reaches while it checks, times and reports: the
  namespaces of torch, torch.Tensor and nn.Module, the CUDA events and
  synchronisation, host clocks, builtins, json/hmac (the verdict is encoded and
  signed with them), Triton's launchers and every verifier module, plus
  torch's precision flags, default dtype and the interpreter's trace hooks.
  After each step of the candidate's checks it compares identities; any
  replacement, deletion, or (on a class) addition rejects the kernel, and
  `restore()` puts the originals back so that the verdict itself is encoded by
  untouched code.
- `RuntimePolicy` is a Python audit hook (PEP 578), installed before the
  candidate is imported and never removable. When code from the candidate's
  file asks, directly or through the standard library, for frames
  (sys._getframe, tracebacks, generators), the garbage collector's object
  lists, dynamic code (exec, compile, new functions from code objects), native
  code (ctypes), processes, signals, sockets, trace hooks, or a file write
  outside the sandbox's directory and kgen's compile caches, the hook refuses
  (the call raises PermissionError) and records it; the kernel is rejected
  even if it caught the error. Libraries that the candidate calls (Triton
  compiling with ptxas, torch building an extension) keep their rights: the
  first frame outside the standard library decides whose request it is.

NOTE: neither layer is a boundary against native code (a CUDA kernel or a
load_inline extension can write any host memory it is handed a pointer to) or
against frame walking from a frame the candidate already holds (f_back is not
an audit event): the static checks reject those ways in.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import types

import torch

# Modules whose callables the harness relies on; their replacement is tampering.
WATCHED_MODULES = [
    "builtins", "time", "os", "os.path", "math", "json", "json.encoder", "json.decoder", "json.scanner",
    "hmac", "hashlib", "secrets", "threading", "traceback", "statistics",
    "torch", "torch.cuda", "torch.nn", "torch.nn.functional", "torch.nn.modules.module", "torch.testing",
    "torch.autograd", "torch.autograd.grad_mode", "torch.autograd.profiler", "torch.profiler", "torch.random",
    "torch.utils._python_dispatch", "torch.overrides", "torch.backends", "torch.backends.cuda",
    "torch.backends.cudnn",
    "triton", "triton.runtime", "triton.runtime.jit", "triton.runtime.interpreter", "triton.runtime.autotuner",
]
# Classes whose methods the harness relies on; any change to their namespace is tampering.
WATCHED_CLASSES = [
    "torch.Tensor", "torch.nn.Module", "torch.nn.Parameter", "torch.cuda.Event", "torch.cuda.Stream",
    "torch.utils._python_dispatch.TorchDispatchMode", "torch.overrides.TorchFunctionMode",
    "torch.autograd.grad_mode.no_grad", "torch.autograd.profiler.profile", "torch.profiler.profile",
    "torch.device", "hmac.HMAC", "json.JSONEncoder", "json.JSONDecoder", "threading.Thread",
    "triton.runtime.jit.KernelInterface", "triton.runtime.jit.JITFunction",
    "triton.runtime.interpreter.InterpretedFunction", "triton.runtime.interpreter.GridExecutor",
    "triton.runtime.autotuner.Autotuner",
]
# Every verifier module the worker uses: whole namespaces, and the classes they define.
VERIFIER_MODULES = ["verifier.audit", "verifier.channel", "verifier.correctness", "verifier.integrity",
                    "verifier.launches", "verifier.records", "verifier.task", "verifier.timing", "verifier.candidate",
                    "verifier.inputs", "verifier.tensorfile", "verifier.wire"]
FLAGS = [("torch.backends.cuda.matmul", "allow_tf32"), ("torch.backends.cudnn", "allow_tf32"),
         ("torch.backends.cudnn", "deterministic"), ("torch.backends.cudnn", "enabled"),
         ("torch.backends.cuda.matmul", "allow_fp16_reduced_precision_reduction"),
         ("torch.backends.cuda.matmul", "allow_bf16_reduced_precision_reduction")]
# Global states set through functions rather than attributes: (what, getter, setter).
STATES = [
    ("torch default dtype", torch.get_default_dtype, torch.set_default_dtype),
    ("torch float32 matmul precision", torch.get_float32_matmul_precision, torch.set_float32_matmul_precision),
    ("a trace function (sys.settrace)", sys.gettrace, sys.settrace),
    ("a profile function (sys.setprofile)", sys.getprofile, sys.setprofile),
]


def _resolve(path: str):
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        module = sys.modules.get(".".join(parts[:i]))
        if module is not None:
            obj = module
            for p in parts[i:]:
                obj = getattr(obj, p)
            return obj
    raise AttributeError(path)


def _kept(value) -> bool:
    """Values whose identity matters: code, classes, modules, descriptors. Plain data may legitimately change."""
    if isinstance(value, (bool, int, float, complex, str, bytes, type(None), tuple, frozenset)):
        return False
    return (callable(value) or isinstance(value, (types.ModuleType, property, staticmethod, classmethod))
            or hasattr(type(value), "__get__"))


def import_watched() -> None:
    """Import every module the guard watches (trusted code, nothing of the candidate's).

    NOTE: entering a TorchDispatchMode imports torch._dynamo, which re-wraps torch.manual_seed; import it (and
    everything else watched) before a snapshot, so the identities captured are the settled ones."""
    import hashlib, hmac, json, json.decoder, json.encoder, json.scanner, secrets, statistics  # noqa: F401,E401
    import threading, traceback  # noqa: F401,E401
    import torch._dynamo  # noqa: F401
    import torch.autograd.profiler, torch.profiler, torch.testing  # noqa: F401,E401
    import torch.utils._python_dispatch, torch.overrides  # noqa: F401,E401
    import triton, triton.runtime.autotuner, triton.runtime.interpreter, triton.runtime.jit  # noqa: F401,E401
    for name in VERIFIER_MODULES:
        __import__(name)


class Guard:
    """Identity snapshot of what the harness relies on; see the module docstring."""

    def __init__(self, modules: dict, classes: dict, entries: dict, flags: dict, states: dict):
        self._modules = modules    # path -> (module, {name: value})
        self._classes = classes    # path -> (class, {name: value})
        self._entries = entries    # sys.modules name -> module
        self._flags = flags        # (owner, attr) -> value
        self._states = states      # what -> value

    @classmethod
    def capture(cls) -> "Guard":
        import_watched()
        # NOTE: the candidate process is started as `python -c "from verifier.candidate import main; main()"`,
        # so __main__ holds no harness code: verifier.candidate is watched under its own name
        modules, classes = {}, {}
        for path in WATCHED_MODULES + VERIFIER_MODULES:
            mod = sys.modules.get(path)
            if mod is not None:
                modules[path] = (mod, {k: v for k, v in vars(mod).items() if _kept(v)})
        class_paths = list(WATCHED_CLASSES)
        for name in VERIFIER_MODULES:
            mod = sys.modules[name]
            class_paths += [f"{name}.{k}" for k, v in vars(mod).items()
                            if isinstance(v, type) and v.__module__ == name]
        for path in class_paths:
            try:
                klass = _resolve(path)
            except AttributeError:
                continue
            classes[path] = (klass, dict(vars(klass)))
        entries = {name: sys.modules[name] for name in WATCHED_MODULES + VERIFIER_MODULES
                   if name in sys.modules}
        flags = {(o, a): getattr(_resolve(o), a) for o, a in FLAGS}
        states = {what: get() for what, get, _ in STATES}
        return cls(modules, classes, entries, flags, states)

    def tampered(self) -> list[str]:
        found = []
        for name, module in self._entries.items():
            if sys.modules.get(name) is not module:
                found.append(f"sys.modules[{name!r}]")
        for path, (mod, saved) in self._modules.items():
            now = vars(mod)
            for k, v in saved.items():
                if k not in now:
                    found.append(f"{path}.{k} (deleted)")
                elif now[k] is not v:
                    found.append(f"{path}.{k}")
        for path, (klass, saved) in self._classes.items():
            now = vars(klass)
            for k, v in saved.items():
                if k not in now:
                    found.append(f"{path}.{k} (deleted)")
                elif now[k] is not v:
                    found.append(f"{path}.{k}")
            found += [f"{path}.{k} (added)" for k in now if k not in saved]
        return found

    def flags_changed(self) -> list[str]:
        changed = [f"{o}.{a}" for (o, a), v in self._flags.items() if getattr(_resolve(o), a) != v]
        changed += [what for what, get, _ in STATES if get() != self._states[what]]
        return changed

    def remember_flags(self) -> None:
        """The harness itself sets precision flags between steps; take the new values as the baseline."""
        self._flags = {(o, a): getattr(_resolve(o), a) for o, a in FLAGS}

    def restore(self) -> None:
        """Put every watched object back as it was captured (so the verdict is sent by untouched code)."""
        for name, module in self._entries.items():
            sys.modules[name] = module
        for _, (mod, saved) in self._modules.items():
            for k, v in saved.items():
                if vars(mod).get(k) is not v:
                    setattr(mod, k, v)
        for _, (klass, saved) in self._classes.items():
            now = vars(klass)
            for k in [k for k in now if k not in saved]:
                try:
                    delattr(klass, k)
                except (AttributeError, TypeError):
                    pass
            for k, v in saved.items():
                if now.get(k) is not v:
                    try:
                        setattr(klass, k, v)
                    except (AttributeError, TypeError):
                        pass
        for (o, a), v in self._flags.items():
            setattr(_resolve(o), a, v)
        for what, get, put in STATES:
            if get() != self._states[what]:
                put(self._states[what])

    def check_or_raise(self, verdict_cls, during: str) -> None:
        patched = self.tampered()
        changed = self.flags_changed()
        if patched or changed:
            self.restore()
        # NOTE: settings first: torch.set_default_dtype also rebinds torch.Storage, which is its symptom.
        if changed:
            raise verdict_cls("rejected", f"changed {', '.join(changed[:4])} while {during}: "
                                          f"the harness's settings are off limits")
        if patched:
            raise verdict_cls("rejected", f"monkey-patched {', '.join(patched[:4])} while {during}: "
                                          f"the harness's timers and checks are off limits")


# ----------------------------------------------------------------------------------------------
# the audit hook


_STDLIB = tuple(p for p in {sysconfig.get_paths().get("stdlib"), sysconfig.get_paths().get("platstdlib")} if p)
# Standard-library modules that ask for their caller's frame for harmless bookkeeping
# (namedtuple and Enum set __module__, warnings and logging find the line to blame). The frame they get is the
# candidate's own; walking up from it (f_back) is refused as any frame access is.
_BENIGN_FRAME_USERS = ("collections/__init__.py", "typing.py", "enum.py", "warnings.py", "dataclasses.py",
                       "logging/__init__.py")



def _hands_frame_out(caller) -> bool:
    """Whether the benign frame user asking is logging.currentframe() called by someone other than logging: it
    returns the frame to its caller (logging's own findCaller only reads the calling line from it)."""
    if not caller.f_code.co_filename.endswith("logging/__init__.py"):
        return False
    up = caller.f_back
    return up is None or up.f_code.co_filename != caller.f_code.co_filename


# Events refused when the request comes from the candidate (first frame outside the standard library).
_REFUSED = {
    "sys._getframe": "reading the harness's frames (sys._getframe)",
    "sys._getframemodulename": "reading the harness's frames (sys._getframemodulename)",
    "sys._current_frames": "reading the harness's frames (sys._current_frames)",
    "sys.settrace": "installing a trace function",
    "sys.setprofile": "installing a profile function",
    "sys.addaudithook": "installing an audit hook",
    "sys.monitoring.register_callback": "installing a monitoring callback",
    "gc.get_objects": "reading the harness's objects (gc.get_objects)",
    "gc.get_referrers": "reading the harness's objects (gc.get_referrers)",
    "gc.get_referents": "reading the harness's objects (gc.get_referents)",
    "function.__new__": "building a function from a code object",
    "code.__new__": "building a code object",
    "ctypes.dlopen": "loading native code (ctypes)",
    "ctypes.dlsym": "loading native code (ctypes)",
    "ctypes.addressof": "reaching raw memory (ctypes)",
    "ctypes.string_at": "reading raw memory (ctypes)",
    "ctypes.cdata": "reaching raw memory (ctypes)",
    "ctypes.call_function": "calling native code (ctypes)",
    "ctypes.cdata/buffer": "reaching raw memory (ctypes)",
    "os.system": "running a shell command",
    "os.exec": "replacing the process",
    "os.posix_spawn": "starting a process",
    "os.spawn": "starting a process",
    "os.fork": "starting a process (fork)",
    "os.forkpty": "starting a process (fork)",
    "subprocess.Popen": "starting a process",
    "pty.spawn": "starting a process",
    "os.kill": "sending a signal",
    "os.killpg": "sending a signal",
    "signal.pthread_kill": "sending a signal",
    "socket.__new__": "opening a socket",
    "socket.connect": "opening a network connection",
    "socket.bind": "opening a network socket",
    "socket.getaddrinfo": "looking up a network address",
    "resource.setrlimit": "changing the process's limits",
    "os.putenv": "changing the environment",
    "os.unsetenv": "changing the environment",
}
# Events refused when the candidate's own line makes them (not through a library).
_REFUSED_DIRECT = {"exec": "executing dynamic code (exec)", "compile": "compiling dynamic code"}
_FRAME_ATTRS = {"tb_frame", "tb_next", "gi_frame", "cr_frame", "ag_frame", "f_code", "__code__", "gi_code",
                "cr_code", "ag_code", "f_back"}
# File-system events whose first argument(s) are paths that get written.
_WRITES = {"os.remove": 1, "os.rename": 2, "os.rmdir": 1, "os.mkdir": 1, "os.chmod": 1, "os.chown": 1,
           "os.symlink": 2, "os.link": 2, "os.truncate": 1, "os.utime": 1, "shutil.rmtree": 1,
           "shutil.copyfile": 2, "shutil.copytree": 2, "shutil.move": 2, "os.replace": 2}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


# Modules the static checks forbid a candidate to import (verifier.static.FORBIDDEN_MODULES, in short):
# a candidate namespace holding one under another name reached it through an alias (torch.os,
# collections._sys, typing.sys) rather than an import the static checks judged.
ALIASED_MODULES = frozenset({
    "sys", "os", "ctypes", "_ctypes", "gc", "inspect", "importlib", "builtins", "threading", "_thread",
    "subprocess", "multiprocessing", "socket", "signal", "traceback", "weakref", "atexit", "mmap", "pickle",
    "marshal", "types", "io", "shutil", "tempfile", "runpy", "code", "pathlib", "time", "resource", "posix",
})


def module_aliases(namespace: dict, classes: bool = True) -> list[str]:
    """Names in a candidate's module namespace (and its classes' namespaces) bound to a forbidden module
    under a name other than its own: `c = torch.ctypes`, `s = typing.sys`, `class M: o = torch.os`.

    `import sys` (sys bound as "sys") is not one: what the file imports by name is the static checks'
    to judge. Run after the candidate is imported; the worker calls it once (see docs/threat-model.md)."""
    found = []

    def scan(where: str, items) -> None:
        for name, value in list(items):
            if isinstance(value, types.ModuleType) and value.__name__ in ALIASED_MODULES \
                    and name != value.__name__.rsplit(".", 1)[-1]:
                found.append(f"{where}{name} = <module {value.__name__}>")

    scan("", namespace.items())
    if classes:
        for name, value in list(namespace.items()):
            if isinstance(value, type) and value.__module__ == namespace.get("__name__"):
                scan(f"{name}.", vars(value).items())
    return found


def check_module_aliases_or_raise(verdict_cls, namespace: dict) -> None:
    """module_aliases as a verdict: rejected, naming the first few."""
    found = module_aliases(namespace)
    if found:
        raise verdict_cls("rejected", f"holds forbidden modules under other names ({', '.join(found[:3])}): "
                                      f"a module reached as an attribute of another (torch.os, typing.sys) "
                                      f"is the module itself")


def _under(full: str, roots: list[str]) -> bool:
    return any(full == root or full.startswith(root.rstrip("/") + "/") for root in roots)


class RuntimePolicy:
    """An audit hook refusing the candidate what the static checks forbid; see the module docstring."""

    def __init__(self, untrusted_files: list[str], writable_roots: list[str]):
        """untrusted_files: the candidate's own files. writable_roots: where the candidate may write; code from
        a file under one of them (or under /dev/shm) is the candidate's too, whatever module it was imported as:
        a candidate that writes a .py file there and imports it must not gain a library's rights."""
        self.untrusted = {os.path.abspath(f) for f in untrusted_files}
        self.writable = [os.path.realpath(r) for r in writable_roots if r] + ["/dev/null"]
        self._code_roots = [r for r in self.writable if r != "/dev/null"] + [os.path.realpath("/dev/shm")]
        self._files: dict[str, bool] = {}   # co_filename -> untrusted, decided once per file
        self.violations: list[str] = []
        self._busy = False
        self._cwd = os.getcwd()

    def install(self) -> None:
        sys.addaudithook(self._hook)
        self._guard_raw_memory()

    def _guard_raw_memory(self) -> None:
        """ctypes.memmove and memset raise no audit event: wrap them so that the candidate's calls are refused.

        NOTE: the module object is the same however it is reached (import ctypes, torch.ctypes, an alias of
        an alias), so one wrapper covers every path; libraries calling them keep their rights."""
        try:
            import ctypes
        except ImportError:
            return
        policy = self

        def guarded(name, original):
            def call(*args):
                if policy._is_untrusted_request(sys._getframe(1)):
                    what = f"calling native code (ctypes.{name}) to move raw memory"
                    policy.violations.append(what)
                    raise PermissionError(f"refused by kgen's verifier: {what}")
                return original(*args)
            call.__name__ = name
            call.kgen_guarded = True
            return call

        for name in ("memmove", "memset"):
            original = getattr(ctypes, name, None)
            if original is not None and not getattr(original, "kgen_guarded", False):
                setattr(ctypes, name, guarded(name, original))

    def _is_untrusted_request(self, frame) -> bool:
        requester = self._requester(frame)
        return requester is not None and self._is_untrusted(requester)

    # -- frames ------------------------------------------------------------------------------
    def _is_untrusted(self, frame) -> bool:
        return self.is_untrusted_file(frame.f_code.co_filename)

    def is_untrusted_file(self, filename: str) -> bool:
        """Whether code from this file is the candidate's: its own file, or any file in a place it can write."""
        known = self._files.get(filename)
        if known is None:
            known = filename in self.untrusted or (
                not filename.startswith("<") and _under(os.path.realpath(os.path.join(self._cwd, filename)),
                                                        self._code_roots))
            self._files[filename] = known
        return known

    @staticmethod
    def _is_stdlib(frame) -> bool:
        name = frame.f_code.co_filename
        if name.startswith("<frozen"):
            return True
        return name.startswith(_STDLIB) and "-packages" not in name

    def _requester(self, frame):
        """The first frame outside the standard library: whose request this is."""
        while frame is not None and self._is_stdlib(frame):
            frame = frame.f_back
        return frame

    def _any_untrusted(self, frame) -> bool:
        while frame is not None:
            if self._is_untrusted(frame):
                return True
            frame = frame.f_back
        return False

    # -- the hook ----------------------------------------------------------------------------
    def _hook(self, event: str, args: tuple) -> None:
        if self._busy:
            return
        if not (event in _REFUSED or event in _REFUSED_DIRECT or event in _WRITES or event == "open"
                or event == "object.__getattr__" or event.startswith(("os.exec", "os.spawn"))):
            return
        self._busy = True
        try:
            what = self._judge(event, args, sys._getframe(1))
        except Exception:  # noqa: BLE001 - the hook must never break the harness
            what = None
        finally:
            self._busy = False
        if what:
            self.violations.append(what)
            raise PermissionError(f"refused by kgen's verifier: {what}")

    def _judge(self, event: str, args: tuple, caller) -> str | None:
        if event == "open":
            return self._judge_open(args, caller)
        if event in _WRITES:
            paths = [a for a in args[:_WRITES[event]] if isinstance(a, (str, bytes, os.PathLike))]
            outside = [p for p in paths if not self._writable(p)]
            if outside and self._any_untrusted(caller):
                return f"changing {os.fsdecode(outside[0])} outside the sandbox's directory ({event})"
            return None
        if event == "object.__getattr__":
            if len(args) >= 2 and args[1] in _FRAME_ATTRS and self._is_untrusted(caller):
                return f"reaching frames or code objects (.{args[1]})"
            return None
        if event in _REFUSED_DIRECT:
            return _REFUSED_DIRECT[event] if self._is_untrusted(caller) else None
        requester = self._requester(caller)
        if requester is None or not self._is_untrusted(requester):
            return None
        if event in ("sys._getframe", "sys._getframemodulename") and not self._is_untrusted(caller) \
                and caller.f_code.co_filename.endswith(_BENIGN_FRAME_USERS) and not _hands_frame_out(caller):
            return None
        if event.startswith("os.exec"):
            return "replacing the process"
        if event.startswith("os.spawn"):
            return "starting a process"
        return _REFUSED.get(event)

    def _judge_open(self, args: tuple, caller) -> str | None:
        path, mode, flags = (list(args) + [None, None, None])[:3]
        if isinstance(path, int) or path is None:
            return None
        text = os.fsdecode(path)
        if text.startswith("/proc/") and text.rstrip("/").rsplit("/", 1)[-1] in ("mem", "environ", "maps",
                                                                               "pagemap") \
                and self._any_untrusted(caller):
            return f"reading process memory or environment ({text})"
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
                  (isinstance(flags, int) and flags & _WRITE_FLAGS)
        if writing and not self._writable(text) and self._any_untrusted(caller):
            return f"writing {text} outside the sandbox's directory"
        return None

    def _writable(self, path) -> bool:
        return _under(os.path.realpath(os.path.join(self._cwd, os.fsdecode(path))), self.writable)

    def check_or_raise(self, verdict_cls, during: str) -> None:
        if self.violations:
            seen = list(dict.fromkeys(self.violations))
            raise verdict_cls("rejected", f"tried {'; '.join(seen[:3])} while {during}: refused at run time")
