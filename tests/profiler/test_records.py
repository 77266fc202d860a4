"""Diagnosis records: the JSON round trip and the compact text."""

from __future__ import annotations

import json
from pathlib import Path

from profiler.diagnose import diagnose
from profiler.ncu import parse_details_csv, parse_raw_csv
from profiler.records import Diagnosis, Stall

FIXTURES = Path(__file__).parent / "fixtures"


def softmax() -> Diagnosis:
    return diagnose(parse_raw_csv((FIXTURES / "softmax_raw.csv").read_text()),
                    parse_details_csv((FIXTURES / "softmax_details.csv").read_text()))


def test_round_trip_through_json_keeps_every_field():
    d = softmax()
    again = Diagnosis.from_dict(json.loads(json.dumps(d.to_dict(raw=True))))
    assert again == d


def test_to_dict_leaves_raw_counters_out_unless_asked():
    d = softmax()
    assert d.to_dict()["kernels"][0]["raw"] == {}
    assert d.to_dict(raw=True)["kernels"][0]["raw"]["gpu__time_duration.sum"] == "63,744"


def test_text_is_capped_at_25_lines_however_much_there_is():
    d = Diagnosis(bound="latency", source="ncu", kernel="k",
                  top_stalls=[Stall(reason=f"r{i}", ratio=1.0, share=0.1, fix="x") for i in range(10)],
                  findings=[f"finding {i}" for i in range(10)], notes=[f"note {i}" for i in range(10)])
    lines = d.to_text().splitlines()
    assert len(lines) == 25
    assert "more lines" in lines[-1]


def test_fallback_text_says_where_it_came_from():
    d = Diagnosis(bound="unknown", source="fallback", notes=["ncu not found"])
    text = d.to_text()
    assert text.startswith("Diagnosis (fallback)") and "Note: ncu not found" in text
