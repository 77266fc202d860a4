"""The judge decides; the candidate process only answers: forged replies, lies and leaks change no verdict.

    .venv/bin/python -m pytest tests/verifier/test_judge.py -q        # CPU (~3 min here)
    .venv/bin/python -m pytest tests/verifier/test_judge.py -q -m gpu # the block timing and eager, on a GPU

Unit tests for the parts that decide (tensor files, the protocol's parser, the block-timing rule),
and end-to-end tests with a candidate process that lies (tests/verifier/processes/forger.py, speaking
the protocol in verifier.candidate's place) or a real candidate that probes what the process knows.
"""

from __future__ import annotations

import ast
import json
import os
import re
import struct
import sys
import tempfile
import threading
from pathlib import Path
from unittest import mock

import pytest
import torch

from verifier import tensorfile, timing
from verifier.judge import CandidateProcess, judge
from verifier.records import STATUSES, VerifyConfig
from verifier.task import load_task
from verifier.verify import verify
from verifier.wire import ProtocolError, parse_reply

ROOT = Path(__file__).resolve().parents[2]
CANDIDATES = Path(__file__).resolve().parent / "candidates"
FORGER = [sys.executable, str(Path(__file__).resolve().parent / "processes" / "forger.py")]
SOFTMAX = ROOT / "tasks" / "softmax.py"
CPU = VerifyConfig(device="cpu", timeout_s=90, trials=2)
GOOD_SOFTMAX = (CANDIDATES / "good" / "softmax.py").read_text()


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return names


# ---- the trust boundary in the layout


@pytest.mark.parametrize("judging", ["judge.py", "verify.py"])
def test_the_judge_never_imports_the_candidate_process_module(judging):
    assert "verifier.candidate" not in _imports(ROOT / "verifier" / judging)


def test_the_candidate_process_never_imports_the_judge():
    found = _imports(ROOT / "verifier" / "candidate.py")
    assert "verifier.judge" not in found and "verifier.verify" not in found


def test_harness_error_is_a_status():
    assert "harness_error" in STATUSES


# ---- tensor files


@pytest.mark.parametrize("t", [
    torch.randn(127, 781), torch.randn(3, 5, dtype=torch.float64).t(), torch.randn(4, 9).to(torch.bfloat16),
    torch.tensor([True, False, True]), torch.arange(7, dtype=torch.int64), torch.tensor(3.5), torch.empty(0, 4),
], ids=["fp32", "fp64-transposed", "bf16", "bool", "int64", "0-dim", "empty"])
def test_a_tensor_round_trips_through_its_file(tmp_path, t):
    path = tmp_path / "t.t"
    tensorfile.write(path, t)
    back = tensorfile.read(path, max_bytes=1 << 30)
    assert back.dtype == t.dtype and back.shape == t.shape and back.is_contiguous()
    assert torch.equal(back, t)


def _raw(tmp_path, header, payload: bytes = b"", magic: bytes = tensorfile.MAGIC) -> Path:
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    path = tmp_path / "bad.t"
    path.write_bytes(magic + struct.pack("<Q", len(text)) + text + payload)
    return path


GOOD_HEADER = {"dtype": "float32", "shape": [2, 3], "strides": [3, 1], "nbytes": 24}


@pytest.mark.parametrize("header, payload, words", [
    (GOOD_HEADER, b"\0" * 24, None),
    (b"{not json", b"", "not JSON"),
    ({**GOOD_HEADER, "pickle": "cos\nsystem"}, b"\0" * 24, "exactly"),
    ({**GOOD_HEADER, "dtype": "object"}, b"\0" * 24, "unknown dtype"),
    ({**GOOD_HEADER, "strides": [1, 2]}, b"\0" * 24, "contiguous"),
    ({**GOOD_HEADER, "nbytes": 20}, b"\0" * 20, "nbytes"),
    ({**GOOD_HEADER, "shape": [2, -3]}, b"\0" * 24, "non-negative"),
    (GOOD_HEADER, b"\0" * 23, "header says"),
    (GOOD_HEADER, b"\0" * 25, "header says"),
    # no bytes, but extents torch cannot take as int64: the reader says so, never torch's TypeError
    ({"dtype": "float32", "shape": [0, 2**64], "strides": [2**64, 1], "nbytes": 0}, b"", "multiply past"),
    ({"dtype": "float32", "shape": [0, 2**62, 2**62], "strides": [2**124, 2**62, 1], "nbytes": 0}, b"",
     "multiply past"),
    (b"[" * 4000, b"", "not JSON"),
])
def test_malformed_tensor_files_are_refused(tmp_path, header, payload, words):
    path = _raw(tmp_path, header, payload)
    if words is None:
        assert tensorfile.read(path, max_bytes=1 << 20).shape == (2, 3)
        return
    with pytest.raises(tensorfile.TensorFileError, match=words):
        tensorfile.read(path, max_bytes=1 << 20)


def test_a_staging_buffer_is_reused_and_each_read_is_a_view_of_it(tmp_path):
    staging = tensorfile.Staging()
    a, b = torch.randn(64, 33), torch.arange(10, dtype=torch.int64)
    tensorfile.write(tmp_path / "a.t", a, staging)
    tensorfile.write(tmp_path / "b.t", b, staging)
    first = tensorfile.read(tmp_path / "a.t", 1 << 20, staging)
    assert torch.equal(first, a)
    kept = first.clone()
    second = tensorfile.read(tmp_path / "b.t", 1 << 20, staging)
    assert torch.equal(second, b) and second.data_ptr() == first.data_ptr()   # the same buffer: copy before reuse
    assert not torch.equal(first, a) and torch.equal(kept, a)
    # a larger tensor grows it; strided and 16-bit tensors leave as their elements
    big = torch.randn(300, 200, dtype=torch.float64).t()[::2].to(torch.bfloat16)
    tensorfile.write(tmp_path / "big.t", big, staging)
    assert torch.equal(tensorfile.read(tmp_path / "big.t", 1 << 20, staging), big)
    staging.release()
    assert torch.equal(tensorfile.read(tmp_path / "big.t", 1 << 20, staging), big)


def test_a_file_larger_than_expected_is_read_beside_the_staging_buffer_not_into_it(tmp_path):
    staging = tensorfile.Staging()
    tensorfile.write(tmp_path / "small.t", torch.ones(4), staging)
    buffer = tensorfile.read(tmp_path / "small.t", 1 << 20, staging, max_staged=16).data_ptr()
    wide = torch.randn(64, dtype=torch.float64)   # a wrong dtype, still under max_bytes
    tensorfile.write(tmp_path / "wide.t", wide)
    back = tensorfile.read(tmp_path / "wide.t", 1 << 20, staging, max_staged=16)
    assert torch.equal(back, wide) and back.data_ptr() != buffer
    assert staging.take(16).data_ptr() == buffer   # not grown to the wrong file's size


def test_a_short_file_read_into_a_staging_buffer_is_refused(tmp_path):
    staging = tensorfile.Staging()
    staging.take(1 << 10).fill_(7)   # old bytes there: never shown as elements
    with pytest.raises(tensorfile.TensorFileError, match="header says"):
        tensorfile.read(_raw(tmp_path, GOOD_HEADER, b"\0" * 23), 1 << 20, staging)


def test_the_exchange_goes_to_a_tmpfs_with_room_else_the_temporary_directory(tmp_path, monkeypatch):
    from verifier import judge as judge_module

    monkeypatch.delenv(judge_module.EXCHANGE_DIR_ENV, raising=False)
    monkeypatch.setattr(judge_module, "SHM_DIR", str(tmp_path))   # not a tmpfs here (pytest's tmp_path is on disk)
    if not judge_module._is_tmpfs(str(tmp_path)):
        assert judge_module.exchange_root() == tempfile.gettempdir()
    if judge_module._is_tmpfs("/dev/shm") and os.access("/dev/shm", os.W_OK):
        monkeypatch.setattr(judge_module, "SHM_DIR", "/dev/shm")
        monkeypatch.setattr(judge_module, "SHM_MIN_FREE_BYTES", 0)
        assert judge_module.exchange_root() == "/dev/shm"
        monkeypatch.setattr(judge_module, "SHM_MIN_FREE_BYTES", 1 << 60)   # no tmpfs has an exbibyte free
        assert judge_module.exchange_root() == tempfile.gettempdir()
    monkeypatch.setenv(judge_module.EXCHANGE_DIR_ENV, str(tmp_path))
    assert judge_module.exchange_root() == str(tmp_path)
    monkeypatch.setenv(judge_module.EXCHANGE_DIR_ENV, str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="KGEN_EXCHANGE_DIR"):
        judge_module.exchange_root()


def test_a_candidate_process_exchanges_its_files_where_kgen_exchange_dir_says(tmp_path, monkeypatch):
    from verifier import judge as judge_module

    monkeypatch.setenv(judge_module.EXCHANGE_DIR_ENV, str(tmp_path))
    process = CandidateProcess(prestart=False)
    try:
        assert process.exchange.parent == tmp_path
        assert process.files_in_memory == judge_module._is_tmpfs(str(tmp_path))
    finally:
        process.close()
    assert list(tmp_path.iterdir()) == []   # nothing left behind


def test_a_file_without_the_magic_is_refused(tmp_path):
    with pytest.raises(tensorfile.TensorFileError, match="magic"):
        tensorfile.read(_raw(tmp_path, GOOD_HEADER, b"\0" * 24, magic=b"PK\x03\x04zip!"), max_bytes=1 << 20)


def test_a_tensor_larger_than_allowed_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "big.t"
    tensorfile.write(path, torch.zeros(1000))
    with pytest.raises(tensorfile.TensorTooLarge):
        tensorfile.read(path, max_bytes=3999)


def test_a_tensor_file_replaces_a_planted_link_instead_of_following_it(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("not kgen's to write")
    for name in ("in-1-0.t", "in-1-0.t.part"):
        (tmp_path / name).symlink_to(victim)
    tensorfile.write(tmp_path / "in-1-0.t", torch.ones(3))
    assert victim.read_text() == "not kgen's to write"
    assert not (tmp_path / "in-1-0.t").is_symlink()
    assert tensorfile.read(tmp_path / "in-1-0.t", max_bytes=1 << 20).tolist() == [1.0, 1.0, 1.0]


@pytest.fixture
def parallel_files(monkeypatch):
    """Files of 4 KiB and more take the several-threads path, in up to 4 ranges of 1 KiB or more."""
    monkeypatch.setattr(tensorfile, "PARALLEL_MIN_BYTES", 4096)
    monkeypatch.setattr(tensorfile, "PARALLEL_THREADS", 4)
    monkeypatch.setattr(tensorfile, "_CHUNK_MIN_BYTES", 1024)


@pytest.mark.parametrize("t", [torch.randn(37, 1001), torch.randn(9000).to(torch.bfloat16),
                               torch.rand(50000) > 0.5, torch.randn(3, 4096, dtype=torch.float64).t()],
                         ids=["fp32", "bf16", "bool", "fp64-transposed"])
def test_a_large_tensor_is_written_and_read_by_several_threads_and_round_trips(tmp_path, t, parallel_files,
                                                                              monkeypatch):
    readers, real_preadv = [], os.preadv

    def preadv(fd, buffers, offset):
        readers.append((threading.current_thread() is threading.main_thread(), offset))
        return real_preadv(fd, buffers, offset)

    monkeypatch.setattr(os, "preadv", preadv)
    staging = tensorfile.Staging()
    path = tmp_path / "out-1-0.t"
    tensorfile.write(path, t, staging)
    back = tensorfile.read(path, max_bytes=1 << 30, staging=staging)
    assert back.dtype == t.dtype and back.shape == t.shape and torch.equal(back, t)
    # four ranges, three of them read beside the calling thread
    assert len({offset for _, offset in readers}) == 4 and sum(not main for main, _ in readers) >= 3
    assert [p.name for p in tmp_path.iterdir()] == ["out-1-0.t"]   # no .part left beside it


def test_a_large_file_that_ends_early_in_one_thread_is_refused(tmp_path, parallel_files, monkeypatch):
    path = tmp_path / "out-1-0.t"
    tensorfile.write(path, torch.randn(8192))
    real_preadv, calls = os.preadv, []

    def preadv(fd, buffers, offset):   # the file shrank under one of the readers
        calls.append(offset)
        return 0 if len(calls) == 3 else real_preadv(fd, buffers, offset)

    monkeypatch.setattr(os, "preadv", preadv)
    with pytest.raises(tensorfile.TensorFileError, match="ended early"):
        tensorfile.read(path, max_bytes=1 << 20, staging=tensorfile.Staging())


def test_a_large_tensor_file_replaces_a_planted_link_instead_of_following_it(tmp_path, parallel_files):
    victim = tmp_path / "victim.txt"
    victim.write_text("not kgen's to write")
    (tmp_path / "in-1-0.t").symlink_to(victim)
    tensorfile.write(tmp_path / "in-1-0.t", torch.ones(4096))
    assert victim.read_text() == "not kgen's to write"
    assert not (tmp_path / "in-1-0.t").is_symlink()
    assert tensorfile.read(tmp_path / "in-1-0.t", max_bytes=1 << 20).sum() == 4096


def test_a_large_write_that_fails_leaves_no_part_file(tmp_path, parallel_files, monkeypatch):
    def no_room(fd, length):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "ftruncate", no_room)
    with pytest.raises(OSError, match="No space"):
        tensorfile.write(tmp_path / "out-1-0.t", torch.ones(4096))
    assert list(tmp_path.iterdir()) == []


def test_a_text_file_the_candidate_wrote_is_read_only_when_it_is_no_link(tmp_path):
    secret = tmp_path / "root-only.json"
    secret.write_text('{"key": "not for the report"}')
    (tmp_path / "result.json").symlink_to(secret)
    with pytest.raises(OSError):
        tensorfile.read_text_nofollow(tmp_path / "result.json")
    (tmp_path / "plain.json").write_text("{}")
    assert tensorfile.read_text_nofollow(tmp_path / "plain.json") == "{}"


def test_a_symlink_or_a_pipe_is_not_a_tensor_file(tmp_path):
    real = tmp_path / "real.t"
    tensorfile.write(real, torch.ones(3))
    (tmp_path / "link.t").symlink_to(real)
    os.mkfifo(tmp_path / "fifo.t")
    with pytest.raises(tensorfile.TensorFileError):
        tensorfile.read(tmp_path / "link.t", max_bytes=1 << 20)
    with pytest.raises(tensorfile.TensorFileError, match="regular"):
        tensorfile.read(tmp_path / "fifo.t", max_bytes=1 << 20)


# ---- the protocol's parser


GOOD_FORWARD = {"reply": "forward", "problem": None, "outputs": ["tensor"], "sequence": False, "launches": 1,
                "aten_ops": [], "input_checksums": []}


@pytest.mark.parametrize("message, words", [
    ({**GOOD_FORWARD, "status": "ok"}, "fields"),
    ({**GOOD_FORWARD, "launches": "1"}, "launches"),
    ({**GOOD_FORWARD, "reply": "exit"}, "where one to 'forward'"),
    ({"reply": "forward", "problem": {"status": "ok", "reason": "", "feedback": ""}}, "malformed problem"),
    ({"reply": "forward", "problem": {"status": "mismatch", "reason": "", "feedback": ""}}, "malformed problem"),
    ({**GOOD_FORWARD, "outputs": [{"value": [1, 2]}]}, "outputs"),
    ([GOOD_FORWARD], "not a JSON object"),
])
def test_a_reply_off_the_protocol_is_refused(message, words):
    with pytest.raises(ProtocolError, match=words):
        parse_reply(json.dumps(message).encode(), "forward")


def test_a_reply_on_the_protocol_is_accepted():
    assert parse_reply(json.dumps(GOOD_FORWARD).encode(), "forward")["outputs"] == ["tensor"]


def test_a_deeply_nested_reply_is_a_protocol_error_not_a_crash():
    with pytest.raises(ProtocolError):
        parse_reply(b"[" * 200_000 + b"]" * 200_000, "forward")


# ---- the block-timing rule, on hand-made numbers


def _block(per_call_ms: float, calls: int = 100, generation_ms: float = 30.0, checksum_ms: float = 5.0,
           round_trip_ms: float = 0.2) -> timing.BlockMeasure:
    wall = per_call_ms * calls + generation_ms + checksum_ms + round_trip_ms
    return timing.BlockMeasure(calls=calls, wall_ms=wall, generation_ms=generation_ms, checksum_ms=checksum_ms,
                               round_trip_ms=round_trip_ms)


def test_the_block_subtracts_generation_checksums_and_one_round_trip():
    assert timing.block_per_call_ms(_block(0.5)) == pytest.approx(0.5)


def test_a_claim_the_block_agrees_with_passes():
    assert timing.block_inconsistency(0.5, _block(0.55)) is None


def test_a_claim_far_below_the_block_is_rejected_with_both_numbers():
    reason = timing.block_inconsistency(0.05, _block(2.0))
    assert reason.startswith("timing inconsistent: claimed 0.0500 ms per call, the judge measured 2.0000 ms")


def test_the_margin_is_the_boundary():
    claimed = 1.0
    # _block's default generation and checksums, per call, of which a share is allowed on top
    overhead = timing.BLOCK_OVERHEAD_SHARE * (_block(1.0).generation_ms + _block(1.0).checksum_ms) / _block(1.0).calls
    edge = claimed * timing.BLOCK_MARGIN + timing.BLOCK_SLACK_MS + overhead
    assert timing.block_inconsistency(claimed, _block(edge - 1e-6)) is None
    assert timing.block_inconsistency(claimed, _block(edge + 1e-3)) is not None


def test_an_honest_memory_bound_kernel_whose_inputs_dwarf_it_passes():
    # measured on an H200: the Triton softmax over a 512 MiB input claimed 0.2811 ms; the judge's block of
    # 178 calls lasted 693.71 ms, of which it measured 558.64 ms making inputs and checksums on its side
    measure = timing.BlockMeasure(calls=178, wall_ms=693.71, generation_ms=500.0, checksum_ms=58.64,
                                  round_trip_ms=0.04)
    assert timing.block_inconsistency(0.2811, measure) is None


def test_a_tenth_of_the_time_is_still_caught_when_inputs_are_cheap():
    # a 2.7 ms matmul with 64 MiB inputs (0.3 ms a set to make and checksum) claiming 0.27 ms
    measure = _block(2.7, calls=20, generation_ms=4.0, checksum_ms=2.0)
    reason = timing.block_inconsistency(0.27, measure)
    assert reason is not None and "generation and checksums subtracted" in reason


def test_host_launch_cost_of_a_tiny_kernel_is_inside_the_slack():
    # a 5 us kernel replayed from a graph, run eagerly in the block at 0.12 ms of Python per call
    assert timing.block_inconsistency(0.005, _block(0.125)) is None


def test_the_block_lasts_about_the_target_in_claimed_time():
    assert timing.block_calls(1.0) == 50
    assert timing.block_calls(1e-6) == timing.BLOCK_MAX_CALLS
    assert timing.block_calls(1000.0) == timing.BLOCK_MIN_CALLS


def test_large_inputs_shorten_the_block():
    # 100 ms to make one input set: 50 sets fit the generation budget, though the claim would want 2000
    assert timing.block_calls(0.01, generation_ms=100.0) == timing.BLOCK_GENERATION_MS // 100.0
    assert timing.block_calls(0.01, generation_ms=1e6) == timing.BLOCK_MIN_CALLS


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_an_output_right_elementwise_has_a_checksum_within_the_tolerance(dtype):
    from verifier.correctness import tolerance
    from verifier.judge import checksum_tolerance

    ref = (torch.randn(5000) * 3).to(dtype)
    a_tol, r_tol = tolerance(dtype, None, None)
    # every element half as far off as the elementwise bound allows (bf16 rounding stays inside it), all
    # in the direction the weights favour
    w = timing.checksum_weights(3, "cpu")
    off = (a_tol + r_tol * ref.double().abs()) * 0.5 * w[:5000]
    cand = (ref.double() + off).to(dtype) if dtype.is_floating_point else ref
    gap = abs(float(timing.weighted_checksum(cand, w)) - float(timing.weighted_checksum(ref, w)))
    assert gap <= checksum_tolerance(ref, dtype, None, None)


def test_an_output_wrong_in_one_element_has_a_checksum_outside_the_tolerance():
    from verifier.judge import checksum_tolerance

    ref = torch.randn(5000)
    cand = ref.clone()
    cand[17] += 1.0
    w = timing.checksum_weights(3, "cpu")
    gap = abs(float(timing.weighted_checksum(cand, w)) - float(timing.weighted_checksum(ref, w)))
    assert gap > checksum_tolerance(ref, ref.dtype, None, None)


def test_checksum_weights_are_plus_or_minus_one_and_seeded():
    w = timing.checksum_weights(7, "cpu")
    assert set(w.unique().tolist()) == {-1.0, 1.0}
    assert torch.equal(w, timing.checksum_weights(7, "cpu")) and not torch.equal(w, timing.checksum_weights(8, "cpu"))
    x = torch.randn(timing.CHECKSUM_PERIOD + 5)
    expect = (x.double() * torch.cat([w, w[:5]])).sum()
    assert float(timing.weighted_checksum(x, w)) == pytest.approx(float(expect))


# ---- forged replies, end to end


def _forged(mode: str, tmp_path) -> object:
    task = load_task(SOFTMAX)
    process = CandidateProcess(prestart=False, argv=FORGER)
    try:
        result, _ = judge(task, mode, CPU, process, device="cpu", backend="triton")
    finally:
        process.close()
    return result


@pytest.mark.parametrize("mode, status, words", [
    ("no-outputs", "mismatch", "returned 0 output(s)"),
    ("zeros", "mismatch", "elements differ"),
    ("honest-copy", "mismatch", "elements differ"),
    ("ok-field", "crashed", "spoke an unknown protocol"),
    ("ok-problem", "crashed", "spoke an unknown protocol"),
    ("garbage", "crashed", "spoke an unknown protocol"),
    # what the candidate process sends never becomes kgen's own failure (harness_error), nor "no verdict"
    ("bigint-checksum", "crashed", "a malformed 'input_checksums'"),
    ("overflow-shape", "crashed", "shape's extents multiply past 2**63"),
    ("not-run-build", "crashed", "a 'not_run' problem in its 'build' reply"),
    ("not-run-forward", "crashed", "a 'not_run' problem in its 'forward' reply"),
])
def test_a_forged_success_is_not_ok(mode, status, words, tmp_path):
    result = _forged(mode, tmp_path)
    assert result.status == status, (result.status, result.reason)
    assert words in result.reason, result.reason


def test_inputs_travel_as_a_seed_the_candidate_process_makes_them_from():
    # the forger answers right only for inputs it made from the seed: files would get zeros
    result = _forged("seeded-softmax", None)
    assert result.status == "ok", (result.status, result.reason)
    assert not any(f.startswith("inputs sent as files") for f in result.flags), result.flags


def test_inputs_the_candidate_process_made_otherwise_are_sent_again_as_files():
    # its checksums of the inputs made from the seed disagree with the judge's: files from then on
    result = _forged("seeded-lie", None)
    assert result.status == "ok", (result.status, result.reason)
    assert any(f.startswith("inputs sent as files") for f in result.flags), result.flags


def test_an_honest_kernel_passes_where_the_task_makes_its_inputs_from_the_clock(tmp_path):
    # get_small_inputs() is not a function of torch's seed: the two processes make different inputs, the
    # judge notices from the checksums and sends files, and the honest kernel passes
    source = (ROOT / "tasks" / "softmax.py").read_text().replace(
        "    return [_shifted_rows(torch.randn(small_rows, small_cols))]",
        "    import time\n    return [_shifted_rows(torch.randn(small_rows, small_cols)) + (time.perf_counter_ns() % 1000) / 1000]")
    assert source != (ROOT / "tasks" / "softmax.py").read_text()
    task_path = tmp_path / "clock_softmax.py"
    task_path.write_text(source)
    result = verify(load_task(task_path), GOOD_SOFTMAX, CPU)
    assert result.status == "ok", (result.status, result.reason, result.feedback[-400:])
    assert any(f.startswith("inputs sent as files") for f in result.flags), result.flags


PAIR_TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x.clone(), x.clone()


def get_inputs():
    return [torch.randn(64, 33)]


def get_small_inputs():
    return [torch.randn(17, 5)]


def get_init_inputs():
    return []
'''


def test_outputs_that_are_tuples_of_tensors_travel_and_are_compared(tmp_path):
    # The forger computes with torch, which nothing in its own process stops: right outputs are right,
    # whatever made them; only the first layer (not run by the forger) says "torch did the work".
    (tmp_path / "pair.py").write_text(PAIR_TASK)
    process = CandidateProcess(prestart=False, argv=FORGER)
    try:
        result, _ = judge(load_task(tmp_path / "pair.py"), "pair-copy", CPU, process, device="cpu",
                          backend="triton")
    finally:
        process.close()
    assert result.status == "ok", (result.status, result.reason)
    assert result.trials == CPU.trials


def test_a_tuple_where_one_tensor_is_due_is_a_mismatch(tmp_path):
    process = CandidateProcess(prestart=False, argv=FORGER)
    try:
        result, _ = judge(load_task(SOFTMAX), "pair-copy", CPU, process, device="cpu", backend="triton")
    finally:
        process.close()
    assert result.status == "mismatch" and "returned 2 output(s)" in result.reason, result.reason


def test_strings_from_the_candidate_process_are_capped(tmp_path):
    result = _forged("huge-reason", tmp_path)
    assert result.status == "rejected"
    assert len(result.reason) <= 300 and len(result.feedback) <= 2000


def test_a_huge_exception_class_name_becomes_a_short_reason():
    source = GOOD_SOFTMAX + '''

class Huge(ModelNew):
    def forward(self, x):
        raise type("E" * 6_000_000, (RuntimeError,), {})("boom")

ModelNew = Huge
'''
    with mock.patch("verifier.verify.check_source", lambda s: None):
        result = verify(load_task(SOFTMAX), source, CPU)
    assert result.status == "runtime_error", (result.status, result.reason[:300])
    assert len(result.reason) <= 300 and "boom" in result.reason


# ---- what the candidate process knows


def test_torch_initial_seed_in_the_candidate_process_tells_no_trial_seed():
    config = VerifyConfig(device="cpu", timeout_s=90, trials=2, seed=12345)
    source = GOOD_SOFTMAX.replace("import torch\n", "import sys\nimport torch\n", 1) + '''

class Peek(ModelNew):
    def forward(self, x):
        print("initial_seed", torch.initial_seed(), file=sys.stdout, flush=True)
        return super().forward(x)

ModelNew = Peek
'''
    with mock.patch("verifier.verify.check_source", lambda s: None):
        result = verify(load_task(SOFTMAX), source, config)
    assert result.status == "ok", (result.status, result.reason)
    seen = [int(n) for n in re.findall(r"initial_seed (\d+)", result.stdout)]
    assert len(seen) == 3   # two trials and the hidden re-check
    assert not set(seen) & {12345, 12346}


# ---- parameters and the reference


# The known-good RMSNorm, whose ModelNew refuses every method a parameter copy could go through.
OVERRIDING = (CANDIDATES / "good" / "rmsnorm.py").read_text() + '''

class Overriding(ModelNew):
    def state_dict(self, *args, **kwargs):
        raise RuntimeError("the harness called state_dict()")

    def named_parameters(self, *args, **kwargs):
        raise RuntimeError("the harness called named_parameters()")

    def load_state_dict(self, *args, **kwargs):
        raise RuntimeError("the harness called load_state_dict()")

ModelNew = Overriding
'''


def test_parameters_are_filled_without_calling_the_candidates_methods():
    from verifier.candidate import fill_parameters

    class Sneaky(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = torch.nn.Linear(3, 2)

        def state_dict(self, *a, **k):
            raise AssertionError("called state_dict")

        def named_parameters(self, *a, **k):
            raise AssertionError("called named_parameters")

        def __getattr__(self, name):
            raise AssertionError(f"looked up {name} through the candidate's __getattr__")

    source = {"inner.weight": torch.full((2, 3), 7.0), "inner.bias": torch.full((2,), -1.0)}
    kept = {k: v.clone() for k, v in source.items()}
    model = Sneaky()
    assert fill_parameters(model, source) == 2
    assert torch.equal(model._modules["inner"].weight, kept["inner.weight"])
    assert all(torch.equal(source[k], kept[k]) for k in source)


def test_a_candidate_that_overrides_state_dict_still_gets_the_reference_weight():
    # rmsnorm's weight is drawn away from ones: a ModelNew left with its own ones would mismatch
    with mock.patch("verifier.verify.check_source", lambda s: None):
        result = verify(load_task(ROOT / "tasks" / "rmsnorm.py"), OVERRIDING, CPU)
    assert result.status == "ok", (result.status, result.reason, result.feedback[-600:])


def test_a_reference_that_raises_is_a_harness_error(tmp_path):
    task_path = tmp_path / "broken_softmax.py"
    task_path.write_text(SOFTMAX.read_text().replace("return torch.softmax(x, dim=-1)",
                                                     "raise RuntimeError('the reference is broken')"))
    result = verify(load_task(task_path), GOOD_SOFTMAX, CPU)
    assert result.status == "harness_error", (result.status, result.reason)
    assert "the reference Model raised RuntimeError" in result.reason and "not the kernel's" in result.reason


def test_a_random_reference_is_the_tasks_fault_and_a_wrong_kernel_stays_wrong(tmp_path):
    # KernelBench's Matmul_Dropout_Softmax builds nn.Dropout(0.2) in training mode: its reference differs on
    # every run, and an honest softmax was called a mismatch (98% of elements differ) for it
    dropout = tmp_path / "dropout_softmax.py"
    dropout.write_text(SOFTMAX.read_text().replace("return torch.softmax(x, dim=-1)",
                                                   "return torch.softmax(torch.nn.functional.dropout(x, 0.2), dim=-1)"))
    result = verify(load_task(dropout), GOOD_SOFTMAX, CPU)
    assert result.status == "harness_error", (result.status, result.reason)
    assert "the task's reference is random" in result.reason and "not the kernel's" in result.reason
    assert "eval mode" in result.reason
    # a deterministic reference run again is the same: a wrong kernel is still a mismatch
    wrong = GOOD_SOFTMAX.replace("out.to(out_ptr.dtype.element_ty)", "(out * 1.01).to(out_ptr.dtype.element_ty)")
    assert wrong != GOOD_SOFTMAX
    result = verify(load_task(SOFTMAX), wrong, CPU)
    assert result.status == "mismatch" and "random" not in result.reason, (result.status, result.reason)
    # inputs that are not a function of the seed (made again they differ): a wrong kernel is not excused either
    unseeded = tmp_path / "unseeded_softmax.py"
    unseeded.write_text(SOFTMAX.read_text().replace("import torch\n", "import random\nimport torch\n", 1) + """

_get_small_inputs = get_small_inputs


def get_small_inputs():
    return [x * (1.0 + random.random()) for x in _get_small_inputs()]
""")
    result = verify(load_task(unseeded), wrong, CPU)
    assert result.status == "mismatch" and "random" not in result.reason, (result.status, result.reason)


# ---- GPU: the block and eager in the judge


@pytest.mark.gpu
def test_an_honest_kernel_passes_the_block_and_both_times_are_recorded():
    config = VerifyConfig(device="cuda", baselines=False, reps=30)
    result = verify(load_task(SOFTMAX), GOOD_SOFTMAX, config)
    assert result.status == "ok", (result.reason, result.feedback[-600:])
    # NOTE: recorded, not necessarily above 0: for this task (a 512 MiB input, 0.28 ms a call) the block is mostly
    # input generation and checksums, which the judge subtracts as its own process measured them (H200,
    # 2026-12-01: 0.0000 ms in every verdict); the block bounds claims far below the truth, not a second timing
    assert result.judge_ms_per_call is not None and result.judge_ms_per_call >= 0
    assert any(f.startswith("the judge's clock:") for f in result.flags)


@pytest.mark.gpu
def test_eager_is_timed_by_the_judge_after_the_candidate_process_ended():
    config = VerifyConfig(device="cuda", baselines=False, reps=30)
    result = verify(load_task(SOFTMAX), GOOD_SOFTMAX, config)
    assert result.status == "ok", (result.reason, result.feedback[-600:])
    stages = list(result.phases)
    assert "time eager (in the judge, the candidate process closed)" in stages
    assert stages.index("timing block (the judge's clock)") < stages.index(
        "time eager (in the judge, the candidate process closed)")
    assert result.baselines["eager"].median_ms > 0


@pytest.mark.gpu
def test_a_process_that_claims_a_tenth_of_its_time_is_caught_by_the_block():
    # The forger computes right answers (with torch: nothing in its process checks it) and reports a
    # median of 0.01 ms, but spends 5 ms per call in the block: only the judge's clock can see that.
    config = VerifyConfig(device="cuda", baselines=False, reps=30, timing="events", timeout_s=120)
    process = CandidateProcess(prestart=False, argv=FORGER)
    try:
        result, _ = judge(load_task(SOFTMAX), "fast-claim", config, process, device="cuda", backend="triton")
    finally:
        process.close()
    assert result.status == "rejected", (result.status, result.reason)
    assert result.reason.startswith("timing inconsistent: claimed 0.0100 ms per call"), result.reason
    assert result.judge_ms_per_call is not None and result.judge_ms_per_call > 3.0


def test_the_torch_profilers_start_and_stop_lines_are_not_the_candidates_output():
    from verifier.judge import without_profiler_noise

    noisy = ("USDT:2026-12-01 15:54:42 2:2 SyncActivityProfilerHandler.cpp:52] profiler_start\n"
             "my own line\n"
             "USDT:2026-12-01 15:54:42 2:2 SyncActivityProfilerHandler.cpp:59] profiler_stop\n")
    assert without_profiler_noise(noisy) == "my own line\n"


def test_a_crash_in_the_graph_capture_is_named_from_the_dead_process_stack():
    from verifier.judge import crash_site

    site, words = crash_site(
        "Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f (most recent call first):\n"
        '  File "/sandbox/work/candidate.py", line 61 in forward\n'
        '  File "/opt/kgen/verifier/candidate.py", line 455 in <lambda>\n'
        '  File "/opt/kgen/verifier/timing.py", line 160 in capture\n'
        '  File "/opt/kgen/verifier/timing.py", line 318 in time_call\n')
    assert site.startswith(", at line 61 of the candidate's file, in forward; while its forward was captured in a "
                           "CUDA graph") and "--timing events" in site, site
    assert "Segmentation fault" in words
    assert crash_site("") == ("", "")
    assert crash_site("x" * 100_000)[1] == "x" * (16 << 10)     # capped, whatever it wrote


def test_what_a_child_left_in_its_directory_is_read_only_from_a_plain_file_there(tmp_path):
    import os

    from verifier.sandbox import KEPT_BYTES, read_left

    own = tmp_path / "own"
    own.mkdir()
    (own / "words.txt").write_text("y" * (KEPT_BYTES + 10))
    assert read_left(own, "words.txt") == b"y" * KEPT_BYTES
    secret = tmp_path / "secret.txt"
    secret.write_text("root's")
    os.unlink(own / "words.txt")
    os.symlink(secret, own / "words.txt")        # a link the child left: never followed
    assert read_left(own, "words.txt") is None
    os.unlink(own / "words.txt")
    os.mkfifo(own / "words.txt")                 # a fifo: not opened for a read that would wait
    assert read_left(own, "words.txt") is None
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "words.txt").write_text("root's too")
    linked = tmp_path / "linked"
    os.symlink(elsewhere, linked)                # its directory replaced by a link: not followed either
    assert read_left(linked, "words.txt") is None
    assert read_left(tmp_path / "missing", "words.txt") is None


def test_a_prebuilt_library_is_lent_as_a_fresh_copy_in_the_exchange_directory(tmp_path):
    import os
    import types

    from verifier.judge import _Session
    from verifier.records import VerifyConfig
    from verifier.task import load_task

    kept = tmp_path / "cache" / "ext" / "ext.so"
    kept.parent.mkdir(parents=True)
    kept.write_bytes(b"\x7fELF kgen's build")
    exchange = tmp_path / "exchange"
    exchange.mkdir()
    libraries = [{"name": "ext", "digest": "d1", "path": str(kept)},
                 {"name": "gone", "digest": "d2", "path": str(tmp_path / "missing.so")}]
    s = _Session(load_task(ROOT / "tasks" / "softmax.py"), "", VerifyConfig(device="cpu"),
                 types.SimpleNamespace(exchange=exchange), "cuda", "load_inline", {}, libraries)
    lent = s._lend_libraries()
    assert lent == [{"name": "ext", "digest": "d1", "dir": str(exchange / "library-0")}]
    copy = exchange / "library-0" / "ext.so"
    assert copy.read_bytes() == kept.read_bytes() and oct(copy.stat().st_mode & 0o777) == oct(0o644)
    assert any("gone could not be lent" in f for f in s.flags), s.flags
    # a folder the candidate's process made there first is not written into
    planted = tmp_path / "exchange2"
    (planted / "library-0").mkdir(parents=True)
    s = _Session(load_task(ROOT / "tasks" / "softmax.py"), "", VerifyConfig(device="cpu"),
                 types.SimpleNamespace(exchange=planted), "cuda", "load_inline", {}, libraries[:1])
    assert s._lend_libraries() == [] and not os.listdir(planted / "library-0")


# ---- a time check that fails while other processes share the GPU


def _timing_session(monkeypatch, sync_ms: list[float], others: list[str]):
    """A judge's session whose candidate is timed with these sync_ms in turn (event median 0.2 ms each time),
    with these processes found on the GPU at each look: the decision after the timing, nothing else run."""
    import types

    from verifier.judge import _Session
    from verifier.records import Timing

    s = _Session(load_task(SOFTMAX), "", VerifyConfig(device="cpu"), types.SimpleNamespace(exchange=Path("/")),
                 "cuda", "triton", {}, [])
    timed, looks = iter(sync_ms), iter(others)
    monkeypatch.setattr(s, "timed", lambda who: Timing(0.2, 0.19, 0.2, 0.19, 0.21, 100, sync_ms=next(timed),
                                                        method="graph"))

    def look():
        s.others = next(looks)
        s.others_count = int(s.others.split()[0]) if s.others else 0

    monkeypatch.setattr(s, "note_others_on_gpu", look)
    monkeypatch.setattr(s, "inputs", lambda seed, device=None: [])
    monkeypatch.setattr(s, "check", lambda *a, **k: None)
    monkeypatch.setattr(s, "block", lambda t: None)
    s.memory = types.SimpleNamespace(refill_hidden=False)
    return s


def test_work_outside_the_timed_stream_on_a_gpu_of_its_own_is_the_kernels_fault(monkeypatch):
    from verifier.judge import _Decided

    s = _timing_session(monkeypatch, [5.0], [""])
    with pytest.raises(_Decided) as got:
        s.time_on_gpu()
    assert got.value.status == "rejected" and "work ran outside the timed stream" in got.value.reason


def test_a_gpu_shared_with_other_processes_is_timed_again_and_a_clean_timing_is_kept(monkeypatch):
    s = _timing_session(monkeypatch, [5.0, 0.21], ["2 other process(es) on this GPU as it was timed", ""])
    s.time_on_gpu()
    assert s.timing.sync_ms == 0.21
    assert any("timing 2" in p for p in s.phases), s.phases


# 0.2 ms of events each time. 0.9 ms synchronised (4.5x) is within what three others can explain
# (SHARED_GPU_STRETCH x 4 = 8x): kgen's failure. 5.0 ms (25x) is not, however many share the GPU: the kernel's fault.
@pytest.mark.parametrize("sync_ms, status, said", [
    (0.9, "harness_error", "3 other process(es) on this GPU as it was timed"),
    (5.0, "rejected", "25x the claimed time, more than the 8x that 3 other process(es) sharing the GPU can explain"),
], ids=["within-what-sharing-explains", "wider-than-sharing-explains"])
def test_a_time_check_failing_on_every_timing_of_a_shared_gpu(monkeypatch, sync_ms, status, said):
    from verifier.judge import SHARED_GPU_STRETCH, SHARED_GPU_TIMINGS, _Decided

    assert SHARED_GPU_STRETCH * 4 == 8
    busy = "3 other process(es) on this GPU as it was timed"
    s = _timing_session(monkeypatch, [sync_ms] * SHARED_GPU_TIMINGS, [busy] * SHARED_GPU_TIMINGS)
    with pytest.raises(_Decided) as got:
        s.time_on_gpu()
    assert got.value.status == status, got.value.reason
    assert said in got.value.reason and "work ran outside the timed stream" in got.value.reason
    assert f"on each of {SHARED_GPU_TIMINGS} timings" in got.value.reason


@pytest.mark.parametrize("claimed_ms, measured_ms, status", [(0.01, 4.7361, "rejected"), (1.0, 3.0, "harness_error")],
                         ids=["a-tenth-of-its-time-claimed", "a-burst-of-the-others-work"])
def test_the_blocks_clock_against_a_claim_on_a_shared_gpu(monkeypatch, claimed_ms, measured_ms, status):
    # as the H200 saw it: a process claiming 0.0100 ms, the block measured 4.7361 ms with two others on the GPU
    from verifier.judge import _Decided

    s = _timing_session(monkeypatch, [], [])
    s.others, s.others_count = "2 other process(es) on this GPU as it was timed", 2
    with pytest.raises(_Decided) as got:
        s.blame_time("timing inconsistent", claimed_ms, measured_ms)
    assert got.value.status == status, got.value.reason
