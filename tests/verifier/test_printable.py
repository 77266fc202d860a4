"""verifier.records: a verdict's text is printable, whatever the candidate wrote into it."""

from __future__ import annotations

import pytest

from verifier.records import NcuCheck, Timing, VerifyResult, printable


@pytest.mark.parametrize("raw, shown", [
    ("\x1b[2J\x1b[Hok", "\\x1b[2J\\x1b[Hok"),          # erase the screen, cursor home
    ("a\rb", "a\\rb"),                                  # a carriage return overwrites the line
    ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),        # the window title, ended by BEL
    ("\x9b2J", "\\x9b2J"),                              # the one-byte C1 CSI
    ("\u202eevil\u2066", "\\u202eevil\\u2066"),         # bidi override and isolate
    ("\x00\x7f", "\\x00\\x7f"),
    ("line 1\n\tline 2 caf\u00e9 \u00d7 \u2264", "line 1\n\tline 2 caf\u00e9 \u00d7 \u2264"),   # kept as they are
])
def test_printable_writes_out_what_a_terminal_acts_on_and_keeps_the_rest(raw, shown):
    assert printable(raw) == shown


def test_a_verdict_made_printable_leaves_no_string_a_terminal_acts_on():
    t = Timing(median_ms=1.0, min_ms=1.0, mean_ms=1.0, p10_ms=1.0, p90_ms=1.0, reps=3)
    result = VerifyResult(status="mismatch", reason="r\x1b[1A", feedback="f\r", flags=["n\x07"], aten_ops=["x::\x1b"],
                          stdout="\x1b[2J", stderr="\u202e", phases={"p\x1b": 1.5}, baselines={"eager": t},
                          ncu_check=NcuCheck(status="consistent", reason="l\x1b"))
    result.made_printable()
    assert (result.reason, result.feedback, result.flags, result.aten_ops) == \
        ("r\\x1b[1A", "f\\r", ["n\\x07"], ["x::\\x1b"])
    assert (result.stdout, result.stderr, result.phases) == ("\\x1b[2J", "\\u202e", {"p\\x1b": 1.5})
    assert result.ncu_check.reason == "l\\x1b" and result.baselines["eager"] == t
    assert VerifyResult.from_dict(result.to_dict()) == result
