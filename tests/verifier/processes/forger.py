"""A candidate process that lies: it speaks verifier.wire in verifier.candidate's place, forging replies.

    python tests/verifier/processes/forger.py      # started by tests/verifier/test_judge.py in a Sandbox

The job's "source" names the lie (the judge passes the source through untouched):
    no-outputs   every forward "succeeds" with no outputs at all
    zeros        every forward "succeeds" with an all-zero tensor of the first input's shape
    ok-field     a forward reply that says {"status": "ok"} instead of the protocol's fields
    ok-problem   a forward reply whose problem claims the status "ok"
    huge-reason  a forward problem with a 500 000-character reason and feedback
    garbage      a forward reply that is not JSON
    honest-copy  every forward returns its first input unchanged (right only for an identity task)
    pair-copy    every forward returns a tuple of two copies of its first input
    seeded-softmax  (softmax) makes its inputs from the judge's seed and answers right with torch; inputs
                 sent as files get zeros
    seeded-lie   (softmax) misreports the checksums of the inputs made from a seed (and answers zeros);
                 inputs sent as files get right answers
    harness-oom  every forward "fails" with a harness_error problem, as kgen's harness there would say it
    fast-claim   (GPU, softmax) right answers computed with torch, a claimed median of 0.01 ms, and
                 5 ms of sleep per call of a timing block
    bigint-checksum  a forward reply whose input checksum is an int of 401 digits (float() refuses it)
    overflow-shape   an output file whose header is well formed but its shape, [0, 2**64], is no torch shape
    not-run-build    a build reply that says "not_run" (no verdict), for a Triton kernel the judge can run
    not-run-forward  a forward reply that says "not_run"
"""

import dataclasses
import json
import os
import struct
import sys
import time

import torch

from verifier import tensorfile
from verifier.records import Timing
from verifier.wire import CandidateEnd


def seeded_input(job: dict, seed: int):
    """The task's first input as the harness makes it from a seed (verifier.inputs), on the job's device."""
    from verifier.inputs import input_fn, make_inputs
    from verifier.task import import_task_module

    mod = import_task_module(job["task_path"], "kgen_task")
    return make_inputs(input_fn(mod, job["device"]), seed, job["device"])[0]


def seeded_reply(job: dict, request: dict, mode: str) -> dict:
    from verifier.inputs import input_checksums

    x = seeded_input(job, request["inputs"]["seed"])
    (made,) = input_checksums([x], request["inputs"]["seed"], job["device"])   # the account the judge compares
    if mode == "seeded-softmax":
        out, sums = torch.softmax(x, dim=-1), [made]
    else:   # seeded-lie: a wrong account of the inputs, and an output of other inputs
        out, sums = torch.zeros_like(x), [made + 1.0]
    tensorfile.write(f"{request['out']}-0.t", out)
    return {"reply": "forward", "problem": None, "outputs": ["tensor"], "sequence": False, "launches": 1,
            "aten_ops": [], "input_checksums": sums}


def forward_reply(mode: str, request: dict, job: dict) -> dict | bytes:
    if isinstance(request["inputs"], dict) and mode in ("seeded-softmax", "seeded-lie"):
        return seeded_reply(job, request, mode)
    if mode in ("seeded-softmax", "seeded-lie"):
        # inputs as files: right for seeded-lie (the judge's fallback), zeros for seeded-softmax
        first = tensorfile.read(request["inputs"][0]["tensor"], max_bytes=1 << 34)
        out = torch.softmax(first, dim=-1) if mode == "seeded-lie" else torch.zeros_like(first)
        tensorfile.write(f"{request['out']}-0.t", out)
        return {"reply": "forward", "problem": None, "outputs": ["tensor"], "sequence": False, "launches": 1,
                "aten_ops": [], "input_checksums": []}
    if isinstance(request["inputs"], dict):
        # inputs to make from a seed: it says it made none, so the judge sends them as files (its fallback)
        return {"reply": "forward", "problem": None, "outputs": [], "sequence": False, "launches": 1,
                "aten_ops": [], "input_checksums": []}
    first = tensorfile.read(request["inputs"][0]["tensor"], max_bytes=1 << 34)
    if mode == "bigint-checksum":
        tensorfile.write(f"{request['out']}-0.t", first)
        return {"reply": "forward", "problem": None, "outputs": ["tensor"], "sequence": False, "launches": 1,
                "aten_ops": [], "input_checksums": [10**400]}
    if mode == "overflow-shape":
        header = json.dumps({"dtype": "float32", "shape": [0, 2**64], "strides": [2**64, 1], "nbytes": 0}).encode()
        with open(f"{request['out']}-0.t", "wb") as f:
            f.write(tensorfile.MAGIC + struct.pack("<Q", len(header)) + header)
        return {"reply": "forward", "problem": None, "outputs": ["tensor"], "sequence": False, "launches": 1,
                "aten_ops": [], "input_checksums": []}
    if mode == "not-run-forward":
        return {"reply": "forward", "problem": {"status": "not_run", "reason": "no GPU here", "feedback": ""}}
    if mode == "fast-claim":
        tensorfile.write(f"{request['out']}-0.t", torch.softmax(first.cuda(), dim=-1))
        return {"reply": "forward", "problem": None, "outputs": ["tensor"], "sequence": False, "launches": 1,
                "aten_ops": [], "input_checksums": []}
    if mode == "no-outputs":
        return {"reply": "forward", "problem": None, "outputs": [], "sequence": False, "launches": 1, "aten_ops": [],
                "input_checksums": []}
    if mode in ("zeros", "honest-copy"):
        tensorfile.write(f"{request['out']}-0.t", torch.zeros_like(first) if mode == "zeros" else first)
        return {"reply": "forward", "problem": None, "outputs": ["tensor"], "sequence": False, "launches": 1,
                "aten_ops": [], "input_checksums": []}
    if mode == "pair-copy":
        for j in range(2):
            tensorfile.write(f"{request['out']}-{j}.t", first)
        return {"reply": "forward", "problem": None, "outputs": ["tensor", "tensor"], "sequence": True,
                "launches": 1, "aten_ops": [], "input_checksums": []}
    if mode == "harness-oom":
        return {"reply": "forward", "problem": {
            "status": "harness_error", "feedback": "",
            "reason": "kgen ran out of host memory while serving 'forward' in the candidate's process (asked 16.0 "
                      "GiB, free 1.0 GiB, total 128.0 GiB)"}}
    if mode == "ok-field":
        return {"reply": "forward", "status": "ok", "reason": "correct on every trial"}
    if mode == "ok-problem":
        return {"reply": "forward", "problem": {"status": "ok", "reason": "correct", "feedback": ""}}
    if mode == "huge-reason":
        return {"reply": "forward", "problem": {"status": "rejected", "reason": "r" * 500_000,
                                                "feedback": "f" * 500_000}}
    return b"{not json at all\n"


def time_reply(job: dict, request: dict) -> dict:
    """A made-up median; the spot checks right, so that only the block can tell."""
    from verifier.inputs import make_inputs, refresh_seed
    from verifier.task import import_task_module

    gen = import_task_module(job["task_path"], "kgen_task").get_inputs
    checked = []
    for i, rep in enumerate([0, 1, 2][:request["reps"]]):
        x = make_inputs(gen, refresh_seed(request["seed"], rep), "cuda")[0]
        tensorfile.write(f"{request['out']}-c{i}-0.t", torch.softmax(x, dim=-1))
        checked.append({"rep": rep, "outputs": ["tensor"], "sequence": False})
    # NOTE: every field of a Timing, as a real candidate process sends it (verifier.wire checks them all)
    fake = dataclasses.asdict(Timing(median_ms=0.01, min_ms=0.01, mean_ms=0.01, p10_ms=0.01, p90_ms=0.01,
                                     reps=request["reps"], sync_ms=0.011, host_ms=0.005, method=request["method"]))
    return {"reply": "time", "problem": None, "timing": fake, "note": "", "checked": checked}


def block_reply(job: dict, request: dict) -> dict:
    from verifier import timing
    from verifier.inputs import block_seed, make_inputs
    from verifier.task import import_task_module

    gen = import_task_module(job["task_path"], "kgen_task").get_inputs
    weights = timing.checksum_weights(request["seed"], "cuda")
    sums = []
    for k in range(request["calls"]):
        x = make_inputs(gen, block_seed(request["seed"], k), "cuda")[0]
        sums.append([float(timing.weighted_checksum(torch.softmax(x, dim=-1), weights))])
        time.sleep(0.005)
    return {"reply": "block", "problem": None, "checksums": sums}


def main() -> None:
    job = json.loads(sys.stdin.readline())["job"]
    mode = job["source"]
    wire = CandidateEnd(job["requests"], job["replies"])
    while True:
        request = wire.receive()
        if request is None:
            return
        op = request["op"]
        if op == "build" and mode == "not-run-build":
            reply = {"reply": "build", "problem": {"status": "not_run", "reason": "CUDA source compiled with nvcc; "
                                                   "nothing was run: no GPU here", "feedback": ""}, "phases": []}
        elif op == "build":
            reply = {"reply": "build", "problem": None, "filled": 0, "phases": []}
        elif op == "forward":
            reply = forward_reply(mode, request, job)
        elif op == "time":
            reply = time_reply(job, request)
        elif op == "block":
            reply = block_reply(job, request)
        elif op == "exit":
            reply = {"reply": "exit", "problem": None, "phases": []}
        else:
            reply = {"reply": op, "problem": None}
        if isinstance(reply, bytes):
            os.write(wire._out, reply)
        else:
            wire.send(reply)


if __name__ == "__main__":
    main()
