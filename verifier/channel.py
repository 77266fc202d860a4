"""The one-shot result channel between a sandboxed child and kgen.

The parent creates a pipe and a random key; the child gets the pipe's write
end as an inherited file descriptor and the key on its stdin (read once, then
closed). The child sends exactly one message: JSON, signed with HMAC-SHA256
under that key. The parent accepts only a message whose signature checks out,
so a child's stdout, files or stray writes to the pipe produce no result at all.

Who uses it: the sandbox (verifier.sandbox) frames every one-shot child's
result with it, and two trusted children send theirs over it: the torch.compile
baselines job (verifier.baseline_job) and the profiler's child
(profiler/ncu_child.py). The candidate process does not: it closes the
descriptor before the candidate is imported, and the judge (verifier.judge)
reads nothing from it. A signature proves only that the harness's code wrote a
message, and in a process that runs candidate code that proves nothing; the
judge decides from what it checks itself instead (docs/threat-model.md).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os

MAX_MESSAGE_BYTES = 8_000_000  # a verdict with capped feedback is far smaller


def sign(key: bytes, payload: bytes) -> str:
    return hmac.new(key, payload, hashlib.sha256).hexdigest()


def encode(key: bytes, message: dict) -> bytes:
    payload = json.dumps(message, sort_keys=True).encode()
    return json.dumps({"sig": sign(key, payload), "payload": payload.decode()}).encode() + b"\n"


def decode(key: bytes, data: bytes) -> tuple[dict | None, str]:
    """Return (message, problem). Only a correctly signed single message is accepted."""
    lines = [line for line in data.split(b"\n") if line.strip()]
    if not lines:
        return None, "no result message"
    good = []
    for line in lines:
        try:
            envelope = json.loads(line)
            payload = envelope["payload"].encode()
            if hmac.compare_digest(envelope["sig"], sign(key, payload)):
                good.append(json.loads(payload))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
    if len(good) != 1 or len(lines) != 1:
        return None, f"result channel held {len(lines)} message(s), {len(good)} correctly signed"
    return good[0], ""


class ChildChannel:
    """The child's end: send the one result message."""

    def __init__(self, fd: int, key: bytes):
        self._fd = fd
        self._key = key
        self._sent = False

    def send(self, message: dict) -> None:
        if self._sent:
            return
        self._sent = True
        data = encode(self._key, message)
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        os.close(self._fd)
