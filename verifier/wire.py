"""The protocol between the judge (verifier.judge) and the candidate process (verifier.candidate).

Two named pipes in the directory the judge and the candidate process share
(the "exchange" directory, inside which the sandbox makes the process's own
working directory): `requests` (judge -> candidate) and `replies` (candidate
-> judge). One JSON object per line, one reply per request, in order. Tensors
never travel in a line: they are files in the exchange directory
(verifier.tensorfile), named by the judge.

Requests (the judge writes them; the candidate process trusts them):
    {"op": "build", "init_seed": int, "params": [[name, file], ...]}
    {"op": "forward", "inputs": [{"tensor": file} | {"value": v}, ...] | {"seed": int},
     "into": "fresh"|"last"|"timing", "out": prefix, "during": str, "snapshot": "device"|"host", "keep": bool}
    (inputs as {"seed": s}: the task's own get_inputs() under seed s, made by the candidate process on
    its device, as the timing loop makes its fresh inputs; the seed is drawn or chosen when the call is
    due, so it tells the process nothing the inputs themselves would not)
     (snapshot: where the inputs-unchanged check keeps its copy; keep: a fresh call's inputs are kept for a
     refill into="last" (else dropped once the call is done); both optional, "device" and true by default)
    {"op": "time", "seed": int, "reps": int, "warmup": int, "method": "graph"|"events", "out": prefix,
     "spot_checks": int (optional, timing.SPOT_CHECKS by default)}
    {"op": "ping"}
    {"op": "block", "seed": int, "calls": int}
    {"op": "exit"}

Replies (the candidate process writes them; the judge believes none of them; `parse_reply` checks each
against REPLY_FIELDS, and anything else is a ProtocolError, which the judge reports as "crashed: spoke
an unknown protocol"):
    every reply: {"reply": op, "problem": null | {"status": one of CANDIDATE_STATUSES, "reason": str,
                  "feedback": str}, ...}; with a problem, only "phases" may come along.
    build:   "filled": int, "phases": [[name, seconds], ...]
    forward: "outputs": ["tensor" | {"value": v}, ...], "sequence": bool, "launches": int, "aten_ops": [str],
             "input_checksums": [float per input] (inputs made from a seed, verifier.inputs.input_checksums;
             [] for files); optional "allocator_bytes": int (what its torch allocator reserves after the
             call: told in a memory verdict as the process's own account, never believed)
             (output j, when "tensor", is the file f"{prefix}-{j}.t")
    time:    "timing": {Timing's fields}, "note": str, "checked": [{"rep": int, "outputs": [...],
             "sequence": bool, optional "layouts"}] (the i-th checked call's output j is f"{prefix}-c{i}-{j}.t")
    ping:    nothing more
    block:   "checksums": [[float per output] per call]
    exit:    "phases": [[name, seconds], ...]

A reply is believed only when it is negative (its "problem"): those are the
first layer's readable reasons. Everything positive is data the judge checks
itself (outputs against its own reference, timings against its own clock).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import select
import time

from verifier.records import Timing

# NOTE: one name on every machine (callers look the phase up by it); CUDA starts there only where there is a GPU
PRESTART_PHASE = "pre-started: Python, torch, triton start, and CUDA's on a GPU (before the job)"
MAX_LINE_BYTES = 1 << 20        # a reply with capped feedback and 2000 checksums is far smaller
REQUESTS_PIPE = "requests"
REPLIES_PIPE = "replies"
REPLAY_REP = 10**6 + 1          # the refresh index of the inputs a captured graph is replayed on, to check it
# What a candidate process may say went wrong; "ok" and "mismatch" are only ever the judge's to say.
# HARNESS_STATUS: kgen's own code in that process could not allocate what it needed (inputs, snapshots, files):
# the process keeps serving so the judge can measure the memory itself, and the judge, not the process, decides
# whether it is kgen's failure or the candidate's (verifier.judge; a candidate can send this line itself).
HARNESS_STATUS = "harness_error"
# in the candidate process's own directory: where its fatal-signal handler writes the Python stack of the thread
# that died (faulthandler), read back by the sandbox and quoted by the judge where a crash had no verdict
LAST_WORDS = "last-words.txt"
CANDIDATE_STATUSES = ("compile_error", "runtime_error", "rejected", "not_run", "crashed", HARNESS_STATUS)
MAX_CHECKSUMS = 4096


def _timing_fields() -> dict[str, object]:
    """Each field of verifier.records.Timing and the JSON kind it travels as: float, int, str or (float, None).

    Read from the dataclass itself, so a field added to Timing travels (and is checked) without a second list
    to keep in step here."""
    kinds = {"float": float, "int": int, "str": str, "float | None": (float, None)}
    fields = {f.name: kinds.get(str(f.type)) for f in dataclasses.fields(Timing)}
    unknown = [name for name, kind in fields.items() if kind is None]
    if unknown:   # a type this parser has no check for: fail at import, not with a "malformed" verdict later
        raise TypeError(f"verifier.wire cannot check Timing fields {unknown}: add their kind to _timing_fields")
    return fields


TIMING_FIELDS = _timing_fields()


class ProtocolError(Exception):
    """The other side said something that is not this protocol; the message says what."""


class PeerGone(Exception):
    """The other side closed its pipe (its process ended) before the reply came."""


def encode(message: dict) -> bytes:
    return json.dumps(message, allow_nan=True).encode() + b"\n"


# ---- checking replies


def _is_int(v) -> bool:
    return type(v) is int and abs(v) < 2**63


def _is_float(v) -> bool:
    return type(v) in (int, float) and (type(v) is float or abs(v) < 2**63)


def _is_scalar(v) -> bool:
    return v is None or type(v) in (bool, str) and len(str(v)) < 1000 or _is_int(v) or type(v) is float


def _phases(v) -> bool:
    return type(v) is list and len(v) <= 64 and all(
        type(p) is list and len(p) == 2 and type(p[0]) is str and len(p[0]) <= 200 and _is_float(p[1])
        and math.isfinite(p[1]) for p in v)


def _outputs(v) -> bool:
    return type(v) is list and len(v) <= 64 and all(
        o == "tensor" or type(o) is dict and set(o) == {"value"} and _is_scalar(o["value"]) for o in v)


def _timing(v) -> bool:
    if type(v) is not dict or set(v) != set(TIMING_FIELDS):
        return False
    for key, kind in TIMING_FIELDS.items():
        value = v[key]
        if kind is float and not (_is_float(value) and math.isfinite(value)):
            return False
        if kind is int and not _is_int(value):
            return False
        if kind is str and (type(value) is not str or len(value) > 20):
            return False
        if kind == (float, None) and value is not None and not (_is_float(value) and math.isfinite(value)):
            return False
    return True


def _checked(v) -> bool:
    """The timed calls' outputs: each as a forward reply gives them (`layouts` optional there as here)."""
    return type(v) is list and len(v) <= 16 and all(
        type(c) is dict and set(c) - {"layouts"} == {"rep", "outputs", "sequence"} and _is_int(c["rep"])
        and _outputs(c["outputs"]) and type(c["sequence"]) is bool and _layouts(c.get("layouts")) for c in v)


def _number(x) -> bool:
    """A float (NaN and infinities included: a wrong output's checksum may be either) or an int that converts to
    one: never an int of hundreds of digits, which float() refuses where the judge compares."""
    return type(x) is float or _is_int(x)


def _checksums(v) -> bool:
    return type(v) is list and len(v) <= MAX_CHECKSUMS and all(
        type(c) is list and len(c) <= 64 and all(_number(x) for x in c) for c in v)


def _floats(v) -> bool:
    return type(v) is list and len(v) <= 64 and all(_number(x) for x in v)


def _layouts(v) -> bool:
    if v is None:
        return True
    return type(v) is list and len(v) <= 64 and all(
        o is None or type(o) is list and len(o) <= 64 and all(type(d) is int and 0 <= d < 64 for d in o) for o in v)


def _strings(v) -> bool:
    return type(v) is list and len(v) <= 200 and all(type(s) is str and len(s) <= 200 for s in v)


REPLY_FIELDS = {
    "build": {"filled": _is_int, "phases": _phases},
    "forward": {"outputs": _outputs, "sequence": lambda v: type(v) is bool, "launches": _is_int,
                "aten_ops": _strings, "input_checksums": _floats},
    "time": {"timing": _timing, "note": lambda v: type(v) is str and len(v) <= 2000, "checked": _checked},
    "ping": {},
    "block": {"checksums": _checksums},
    "exit": {"phases": _phases},
}
# Fields a reply may leave out (each still checked when it comes).
OPTIONAL_FIELDS = {
    "forward": {"allocator_bytes": lambda v: _is_int(v) and v >= 0, "layouts": _layouts},
}


def _problem(v) -> bool:
    return (type(v) is dict and set(v) == {"status", "reason", "feedback"} and v["status"] in CANDIDATE_STATUSES
            and type(v["reason"]) is str and type(v["feedback"]) is str)


def parse_reply(line: bytes, op: str) -> dict:
    """The reply to `op` in line, checked field by field; ProtocolError saying what is wrong otherwise."""
    try:
        message = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ProtocolError("a reply that is not one JSON line") from None
    if type(message) is not dict:
        raise ProtocolError("a reply that is not a JSON object")
    if message.get("reply") != op:
        raise ProtocolError(f"a reply to {str(message.get('reply'))[:40]!r} where one to {op!r} was due")
    if "problem" not in message:
        raise ProtocolError(f"a {op!r} reply without its problem field")
    problem = message["problem"]
    if problem is not None:
        if not _problem(problem):
            raise ProtocolError(f"a malformed problem in its {op!r} reply")
        extra = set(message) - {"reply", "problem", "phases"}
        if extra or ("phases" in message and not _phases(message["phases"])):
            raise ProtocolError(f"unknown fields in its {op!r} reply")
        return message
    fields, optional = REPLY_FIELDS[op], OPTIONAL_FIELDS.get(op, {})
    required = {"reply", "problem", *fields}
    if not required <= set(message) <= required | set(optional):
        odd = sorted((set(message) ^ required) - set(optional))
        raise ProtocolError(f"fields {', '.join(str(k)[:40] for k in odd[:4])} wrong in its {op!r} reply")
    for key, valid in {**fields, **optional}.items():
        if key in message and not valid(message[key]):
            raise ProtocolError(f"a malformed {key!r} in its {op!r} reply")
    return message


# ---- the judge's end


class JudgeEnd:
    """The judge's side of the two pipes: send a request, wait (bounded) for its reply."""

    def __init__(self, directory: str):
        self.requests_path = os.path.join(directory, REQUESTS_PIPE)
        self.replies_path = os.path.join(directory, REPLIES_PIPE)
        for path in (self.requests_path, self.replies_path):
            os.mkfifo(path, 0o600)
        self._out: int | None = None
        self._in: int | None = None
        self._buffer = b""

    def open(self) -> None:
        """Open both ends without blocking, before the candidate process gets its job (it opens the others)."""
        # NOTE: O_RDWR on the requests pipe never blocks and keeps it open for the candidate's reader;
        # the replies pipe is read non-blocking so that a dead peer never hangs the judge.
        self._out = os.open(self.requests_path, os.O_RDWR | os.O_NONBLOCK)
        self._in = os.open(self.replies_path, os.O_RDONLY | os.O_NONBLOCK)

    def send(self, message: dict, deadline: float) -> None:
        data = memoryview(encode(message))
        while data:
            if time.monotonic() > deadline:
                raise PeerGone("the candidate process stopped reading its requests")
            try:
                n = os.write(self._out, data)
            except BlockingIOError:
                select.select([], [self._out], [], 0.1)
                continue
            data = data[n:]

    def receive(self, op: str, deadline: float, alive) -> dict:
        """The reply to op. PeerGone when the process ended (alive() false, or its pipe closed) first."""
        while b"\n" not in self._buffer:
            if len(self._buffer) > MAX_LINE_BYTES:
                raise ProtocolError(f"a reply line longer than {MAX_LINE_BYTES} bytes")
            if time.monotonic() > deadline:
                raise PeerGone("no reply before the time limit")
            ready, _, _ = select.select([self._in], [], [], 0.2)
            if not ready:
                if not alive():
                    raise PeerGone("the candidate process ended")
                continue
            # NOTE: Linux reports a FIFO readable at its end only after a writer has come and gone, so an
            # empty read here means the candidate process closed its replies (or ended).
            chunk = os.read(self._in, 65536)
            if not chunk:
                raise PeerGone("the candidate process closed its replies")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        if len(line) > MAX_LINE_BYTES:
            raise ProtocolError(f"a reply line longer than {MAX_LINE_BYTES} bytes")
        return parse_reply(line, op)

    def close(self) -> None:
        """Close the judge's ends: the candidate process reads the end of its requests and exits."""
        for fd in (self._out, self._in):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._out = self._in = None


# ---- the candidate process's end


class CandidateEnd:
    """The candidate process's side: read a request, write its reply."""

    def __init__(self, requests_path: str, replies_path: str):
        # NOTE: opened without blocking: a judge that has already closed its ends (it failed, or gave up)
        # leaves an empty requests pipe (read: end, exit) and no reader of replies (ENXIO), never a hang.
        fd = os.open(requests_path, os.O_RDONLY | os.O_NONBLOCK)
        os.set_blocking(fd, True)
        self._in = os.fdopen(fd, "rb")
        self._out = os.open(replies_path, os.O_WRONLY | os.O_NONBLOCK)
        os.set_blocking(self._out, True)

    def receive(self) -> dict | None:
        """The next request; None once the judge has closed its end."""
        line = self._in.readline(MAX_LINE_BYTES)
        if not line:
            return None
        return json.loads(line.decode())

    def send(self, message: dict) -> None:
        data = memoryview(encode(message))
        while data:
            data = data[os.write(self._out, data):]
