"""The judge's parser of the candidate process's replies (verifier.wire) against what the harness really sends.

The "time" reply carries a Timing as the candidate process builds it (verifier.timing), so every Timing the
timing code can produce must parse, and a reply that adds, drops or mistypes a field must not.
"""

import dataclasses
import json

import pytest

from verifier import wire
from verifier.records import Timing
from verifier.timing import kernelbench_timing
from verifier.wire import ProtocolError, parse_reply


def time_reply(timing: Timing) -> bytes:
    # the candidate process's own shape of the reply (verifier.candidate: the "time" handler)
    return wire.encode({"reply": "time", "problem": None, "timing": dict(timing.__dict__), "note": "", "checked": []})


def test_every_field_of_timing_is_one_the_parser_checks():
    assert set(wire.TIMING_FIELDS) == {f.name for f in dataclasses.fields(Timing)}


@pytest.mark.parametrize("timing", [
    Timing(median_ms=0.5, min_ms=0.4, mean_ms=0.51, p10_ms=0.45, p90_ms=0.6, reps=100, sync_ms=0.7, host_ms=0.02,
           method="graph"),
    Timing(median_ms=0.5, min_ms=0.4, mean_ms=0.51, p10_ms=0.45, p90_ms=0.6, reps=100),
    kernelbench_timing([0.5, 0.52, 0.49, 0.61], sync_ms=0.7, host_ms=0.03),
], ids=["graph", "events-defaults", "kernelbench"])
def test_a_timing_the_harness_builds_parses(timing):
    message = wire.parse_reply(time_reply(timing), "time")
    assert Timing(**message["timing"]) == timing


def test_a_timing_with_a_field_more_is_malformed():
    reply = {"reply": "time", "problem": None, "note": "", "checked": [],
             "timing": {**dataclasses.asdict(Timing(0.5, 0.4, 0.5, 0.4, 0.6, 10)), "claimed_ms": 0.001}}
    with pytest.raises(wire.ProtocolError, match="malformed 'timing'"):
        wire.parse_reply(wire.encode(reply), "time")


def test_a_timing_with_a_string_median_is_malformed():
    timing = {**dataclasses.asdict(Timing(0.5, 0.4, 0.5, 0.4, 0.6, 10)), "median_ms": "0.001"}
    reply = {"reply": "time", "problem": None, "note": "", "checked": [], "timing": timing}
    with pytest.raises(wire.ProtocolError, match="malformed 'timing'"):
        wire.parse_reply(wire.encode(reply), "time")


def test_a_timing_with_an_infinite_mean_is_malformed():
    timing = {**dataclasses.asdict(Timing(0.5, 0.4, 0.5, 0.4, 0.6, 10)), "std_ms": float("inf")}
    reply = {"reply": "time", "problem": None, "note": "", "checked": [], "timing": timing}
    with pytest.raises(wire.ProtocolError, match="malformed 'timing'"):
        wire.parse_reply(wire.encode(reply), "time")


# ---- the checksums of inputs made from a seed (verifier.inputs.input_checksums), as both sides compute them


def test_input_checksums_see_a_changed_tensor_and_a_changed_number():
    import torch

    from verifier.inputs import input_checksums

    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    same = input_checksums([x, 3, "mean"], seed=7, device="cpu")
    assert same == input_checksums([x.clone(), 3, "mean"], seed=7, device="cpu")
    y = x.clone()
    y[2, 3] += 1.0
    assert input_checksums([y, 3, "mean"], seed=7, device="cpu")[0] != same[0]
    assert input_checksums([x, 4, "mean"], seed=7, device="cpu")[1] != same[1]
    assert input_checksums([x, 3, "sum"], seed=7, device="cpu")[2] != same[2]


def _forward_reply(**extra) -> bytes:
    return json.dumps({"reply": "forward", "problem": None, "outputs": ["tensor"], "sequence": False, "launches": 1,
                       "aten_ops": [], "input_checksums": [], **extra}).encode()


@pytest.mark.parametrize("sums", [[10**400], [2**63], [True], ["1.0"], [[1.0]]])
def test_an_input_checksum_the_judge_could_not_compare_is_malformed(sums):
    with pytest.raises(ProtocolError, match="input_checksums"):
        parse_reply(_forward_reply(input_checksums=sums), "forward")


def test_a_nan_or_infinite_input_checksum_parses():   # a wrong output's may be: the judge then sends files
    assert parse_reply(_forward_reply(input_checksums=[float("nan"), float("inf"), 3, 1.5]), "forward")


def test_the_outputs_layouts_are_optional_and_checked_when_they_come():
    assert parse_reply(_forward_reply(layouts=[[0, 2, 1], None]), "forward")["layouts"] == [[0, 2, 1], None]
    for bad in ([[-1]], [[64]], [["0"]], [[0.5]], "0,1", [[0]] * 65):
        with pytest.raises(ProtocolError, match="layouts"):
            parse_reply(_forward_reply(layouts=bad), "forward")


def test_the_allocators_account_is_optional_and_checked_when_it_comes():
    assert "allocator_bytes" not in parse_reply(_forward_reply(), "forward")
    assert parse_reply(_forward_reply(allocator_bytes=6 << 30), "forward")["allocator_bytes"] == 6 << 30
    for bad in (-1, "6 GiB", 1.5, None):
        with pytest.raises(ProtocolError, match="allocator_bytes"):
            parse_reply(_forward_reply(allocator_bytes=bad), "forward")
    with pytest.raises(ProtocolError, match="wrong in its 'forward' reply"):
        parse_reply(_forward_reply(allocator=1), "forward")


# ---- timed calls' outputs, as the candidate process writes them (verifier.candidate._write_outputs)


def _checked_entry(tmp_path, out, rep=3):
    from verifier import candidate

    return {"rep": rep, **candidate._write_outputs(out, str(tmp_path / "timed-c0"))}


def test_a_timed_call_as_the_candidate_writes_it_parses(tmp_path):
    import torch

    entry = _checked_entry(tmp_path, (torch.ones(4, 3), torch.ones(3, 4).t(), 2.0))
    assert "layouts" in entry      # the writer's own shape: the parser must take every key it writes
    reply = {"reply": "time", "problem": None, "note": "", "checked": [entry],
             "timing": dataclasses.asdict(Timing(0.5, 0.4, 0.5, 0.4, 0.6, 10))}
    message = wire.parse_reply(wire.encode(reply), "time")
    assert message["checked"][0]["layouts"] == [[0, 1], [1, 0], None]


def test_a_timed_call_with_a_malformed_layout_is_refused(tmp_path):
    import torch

    entry = {**_checked_entry(tmp_path, torch.ones(4, 3)), "layouts": [[0, "1"]]}
    reply = {"reply": "time", "problem": None, "note": "", "checked": [entry],
             "timing": dataclasses.asdict(Timing(0.5, 0.4, 0.5, 0.4, 0.6, 10))}
    with pytest.raises(wire.ProtocolError, match="malformed 'checked'"):
        wire.parse_reply(wire.encode(reply), "time")


def test_a_forward_as_the_candidate_writes_it_parses(tmp_path):
    import torch

    entry = _checked_entry(tmp_path, torch.ones(2, 2))
    del entry["rep"]
    reply = {"reply": "forward", "problem": None, "launches": 1, "aten_ops": [], "input_checksums": [], **entry}
    assert wire.parse_reply(wire.encode(reply), "forward")["layouts"] == [[0, 1]]
