"""The timing loop's bookkeeping, with the host clock standing in for CUDA events (no GPU here)."""

import time

import torch

from verifier import timing


class HostClockEvent:
    """A CUDA event that timestamps on the host when recorded."""

    def __init__(self, enable_timing: bool = False):
        self.t = None

    def record(self):
        self.t = time.perf_counter()

    def synchronize(self):
        pass

    def elapsed_time(self, other: "HostClockEvent") -> float:
        return (other.t - self.t) * 1e3


def test_every_call_gets_fresh_inputs_and_the_host_share_is_reported(monkeypatch):
    monkeypatch.setattr(timing, "_Event", HostClockEvent)
    monkeypatch.setattr(timing, "_synchronize", lambda: None)
    refreshed, calls = [], []

    def fn():
        calls.append(len(refreshed))
        time.sleep(0.003)

    t = timing.time_callable(fn, refreshed.append, reps=12, warmup=2, sync_reps=3, flush=torch.empty(8))
    assert t.reps == 12 and len(calls) == 2 + 12 + 3
    assert calls == list(range(1, 18))             # each call saw a refresh of its own before it
    assert refreshed[:2] == [-1, -2] and refreshed[2:14] == list(range(12)) and refreshed[14:] == [12, 13, 14]
    assert 3.0 <= t.min_ms <= t.median_ms < 30
    # the whole call ran on the host here, so the host share is (nearly) all of the time
    assert 3.0 <= t.host_ms <= t.median_ms
    assert t.sync_ms >= 3.0 and timing.escaped_stream(t) is None


def test_work_outside_the_events_is_caught(monkeypatch):
    monkeypatch.setattr(timing, "_Event", HostClockEvent)
    calls, seen = [], []

    def synchronize():
        # after a call of the second pass, the device-wide wait finds 20 ms of work on another stream
        if len(calls) > 1 + 5 and len(calls) != (seen[-1] if seen else 0):
            time.sleep(0.02)
        seen.append(len(calls))

    monkeypatch.setattr(timing, "_synchronize", synchronize)
    t = timing.time_callable(lambda: calls.append(1), reps=5, warmup=1, sync_reps=3, flush=torch.empty(8))
    assert t.median_ms < 1 and t.sync_ms >= 20
    assert "work ran outside the timed stream" in timing.escaped_stream(t)
