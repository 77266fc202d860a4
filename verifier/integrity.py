"""Noticing a candidate that patches what the harness relies on.

    guard = Guard.capture()          # in the worker, before any candidate code runs
    ...
    guard.check_or_raise(Verdict, "ModelNew.forward")

The guard remembers the identity of every function the harness uses to time
and compare (CUDA events and synchronisation, host clocks, torch's comparison
functions, the verifier's own modules) and the precision flags of the
reference, and after each step of the candidate's checks that none was
replaced. Static checks reject the obvious patches before anything runs; this
catches the ones that slip past them.
"""

from __future__ import annotations

import sys
import time

import torch

# (owner path, attribute): each a thing a cheat would swap for something that lies.
WATCHED = [
    ("torch.cuda", "Event"), ("torch.cuda", "synchronize"), ("torch.cuda", "current_stream"),
    ("torch.cuda.Event", "elapsed_time"), ("torch.cuda.Event", "record"),
    ("time", "perf_counter"), ("time", "time"), ("time", "monotonic"),
    ("torch", "allclose"), ("torch", "equal"), ("torch", "isclose"), ("torch.testing", "assert_close"),
    ("torch", "manual_seed"), ("torch", "randn"), ("torch", "rand"), ("torch", "randint"),
    ("torch.Tensor", "clone"), ("torch.Tensor", "copy_"), ("torch.Tensor", "__eq__"), ("torch.Tensor", "__ne__"),
    ("torch.Tensor", "abs"), ("torch.Tensor", "sum"), ("torch.Tensor", "double"), ("torch.Tensor", "__sub__"),
    ("torch.nn.Module", "__call__"), ("torch.nn.Module", "_call_impl"), ("torch.nn.Module", "to"),
    ("torch", "no_grad"),
    ("verifier.correctness", "compare_outputs"), ("verifier.correctness", "aliases"),
    ("verifier.timing", "time_callable"), ("verifier.timing", "escaped_stream"),
    ("verifier.audit", "OpAudit"), ("verifier.channel", "ChildChannel"), ("verifier.channel", "encode"),
    ("verifier.worker", "Verdict"), ("verifier.worker", "_check_inputs_unchanged"),
]
FLAGS = [("torch.backends.cuda.matmul", "allow_tf32"), ("torch.backends.cudnn", "allow_tf32"),
         ("torch.backends.cudnn", "deterministic")]


def _resolve(path: str):
    parts = path.split(".")
    obj = sys.modules.get(parts[0]) or __import__(parts[0])
    for p in parts[1:]:
        obj = getattr(obj, p)
    return obj


class Guard:
    def __init__(self, saved: dict, flags: dict):
        self._saved = saved
        self._flags = flags

    @classmethod
    def capture(cls) -> "Guard":
        # NOTE: entering a TorchDispatchMode imports torch._dynamo, which re-wraps torch.manual_seed;
        # import it first so the identities captured here are the settled ones.
        import torch._dynamo  # noqa: F401
        import verifier.audit, verifier.channel, verifier.correctness, verifier.timing, verifier.worker  # noqa: F401,E401

        saved = {}
        for owner, attr in WATCHED:
            saved[(owner, attr)] = getattr(_resolve(owner), attr)
        flags = {(o, a): getattr(_resolve(o), a) for o, a in FLAGS}
        return cls(saved, flags)

    def tampered(self) -> list[str]:
        found = []
        for (owner, attr), value in self._saved.items():
            try:
                now = getattr(_resolve(owner), attr)
            except AttributeError:
                found.append(f"{owner}.{attr} (deleted)")
                continue
            if now is not value:
                found.append(f"{owner}.{attr}")
        return found

    def flags_changed(self) -> list[str]:
        return [f"{o}.{a}" for (o, a), v in self._flags.items() if getattr(_resolve(o), a) != v]

    def remember_flags(self) -> None:
        """The harness itself sets precision flags between steps; take the new values as the baseline."""
        self._flags = {(o, a): getattr(_resolve(o), a) for o, a in FLAGS}

    def check_or_raise(self, verdict_cls, during: str) -> None:
        patched = self.tampered()
        if patched:
            raise verdict_cls("rejected", f"monkey-patched {', '.join(patched[:4])} while {during}: "
                                          f"the harness's timers and checks are off limits")
        changed = self.flags_changed()
        if changed:
            raise verdict_cls("rejected", f"changed torch precision flags {', '.join(changed)} while {during}")
