"""The results store: files and SQLite rows round-trip; secrets never reach the disk.

    .venv/bin/python -m pytest tests/agent/test_store.py -q
"""

from __future__ import annotations

import json
import sqlite3
import time

import pytest

from agent.config import OptimizeConfig
from agent.records import Attempt, Run
from agent.store import REDACTED, Store, new_run_id, redact, scrub_config, scrub_url
from profiler.records import Diagnosis
from verifier.records import VerifyResult

SECRET = "sk-store-test-0123456789abcdef"

VERIFY_OK = {
    "status": "ok", "reason": "correct on every trial", "feedback": "", "task": "softmax",
    "timing": {"median_ms": 0.5, "min_ms": 0.49, "mean_ms": 0.51, "p10_ms": 0.49, "p90_ms": 0.52, "reps": 100},
    "baselines": {"eager": {"median_ms": 1.0, "min_ms": 1.0, "mean_ms": 1.0, "p10_ms": 1.0, "p90_ms": 1.0,
                            "reps": 100}},
    "speedups": {"eager": 2.0, "compile": 1.25, "compile-max-autotune": 1.1}, "floor_ms": 0.25,
}
PROFILE = Diagnosis.from_dict({"bound": "memory", "source": "ncu", "top_stalls": [
    {"reason": "long_scoreboard", "ratio": 3.0, "share": 0.6, "fix": "prefetch"}]})


def make_run(store: Store, **changes) -> Run:
    run = Run(run_id=new_run_id("softmax"), task="softmax", task_path="/tasks/softmax.py",
              config=OptimizeConfig(results_dir=str(store.root)).to_dict(), proposer="openai", model="gpt-4.1",
              backend="triton", device="cuda", gpu="NVIDIA H200", started_at="2026-11-29T13:45:01+00:00")
    for key, value in changes.items():
        setattr(run, key, value)
    store.create_run(run)
    return run


def make_attempt(run: Run, number: int, **changes) -> Attempt:
    attempt = Attempt(run_id=run.run_id, number=number, round=1, status="ok", reason="correct on every trial",
                      verify=VerifyResult.from_dict(VERIFY_OK), median_ms=0.5, speedup=1.1, sol_pct=62.5, note="BLOCK=1024", prompt_tokens=1200,
                      completion_tokens=800, cost_usd=0.01, started_at="s", finished_at="f")
    for key, value in changes.items():
        setattr(attempt, key, value)
    return attempt


def test_run_ids_sort_by_start_time():
    earlier = new_run_id("matmul", now=time.mktime((2026, 11, 29, 13, 45, 1, 0, 0, 0)))
    later = new_run_id("matmul", now=time.mktime((2026, 11, 29, 13, 45, 2, 0, 0, 0)))
    assert earlier < later
    assert earlier.split("-")[2] == "matmul"


def test_run_ids_started_in_the_same_second_differ():
    now = time.time()
    ids = {new_run_id("matmul", now=now) for _ in range(50)}
    assert len(ids) > 40   # 16 random bits each: a handful of collisions at most, never all


def test_attempt_round_trips_through_its_files(tmp_path):
    store = Store(tmp_path)
    run = make_run(store)
    attempt = make_attempt(run, 1, profile=PROFILE)
    folder = store.save_attempt(run, attempt, source="class ModelNew: ...\n", prompt="# prompt", response="reply")

    assert {p.name for p in folder.iterdir()} == {"attempt.json", "kernel.py", "verify.json", "profile.json",
                                                   "prompt.md", "response.md"}
    loaded = store.load_attempt(run.run_id, 1)
    assert loaded == attempt
    assert loaded.source_path == f"softmax/{run.run_id}/attempt-001/kernel.py"
    assert (store.root / loaded.source_path).read_text() == "class ModelNew: ...\n"
    assert json.loads((folder / "verify.json").read_text())["speedups"]["eager"] == 2.0


def test_attempt_without_code_stores_its_reply_and_no_kernel(tmp_path):
    store = Store(tmp_path)
    run = make_run(store)
    attempt = make_attempt(run, 1, status="no_code", reason="no python block", verify=None, median_ms=None,
                           speedup=None)
    folder = store.save_attempt(run, attempt, source=None, prompt="p", response="I cannot help")
    assert not (folder / "kernel.py").exists()
    assert (folder / "response.md").read_text() == "I cannot help"
    assert store.load_attempt(run.run_id, 1).source_path == ""


def test_run_round_trips_and_lists_from_the_index(tmp_path):
    store = Store(tmp_path)
    run = make_run(store)
    run.status, run.best_attempt, run.best_speedup, run.attempts = "succeeded", 2, 1.3, 2
    store.save_run(run)
    assert store.load_run(run.run_id) == run
    listed = store.list_runs(task="softmax")
    assert [r.run_id for r in listed] == [run.run_id]
    assert listed[0].best_speedup == 1.3 and listed[0].status == "succeeded"
    assert listed[0].config == run.config
    assert store.list_runs(task="matmul") == []


def test_attempt_rows_carry_what_listings_show(tmp_path):
    store = Store(tmp_path)
    run = make_run(store)
    store.save_attempt(run, make_attempt(run, 1), source="x = 1\n")
    store.save_profile(run, 1, PROFILE, "memory bound: long_scoreboard 60%")
    [row] = store.attempt_rows(run.run_id)
    assert row["status"] == "ok" and row["median_ms"] == 0.5 and row["speedup"] == 1.1
    assert row["speedup_eager"] == 2.0
    assert row["speedup_compile"] == 1.1          # the faster compile mode is the one to beat
    assert row["sol_pct"] == pytest.approx(62.5) and row["floor_ms"] == 0.25
    assert row["top_stall"] == "long_scoreboard" and row["bound"] == "memory"
    assert row["prompt_tokens"] == 1200 and row["cost_usd"] == pytest.approx(0.01)
    assert store.attempt_text(run.run_id, 1, "profile.txt").startswith("memory bound")


def test_index_is_rebuilt_from_the_files(tmp_path):
    store = Store(tmp_path)
    run = make_run(store)
    store.save_attempt(run, make_attempt(run, 1), source="x = 1\n")
    store.index_path.unlink()
    assert store.list_runs() == []
    assert store.reindex() == 1
    assert [r.run_id for r in store.list_runs()] == [run.run_id]
    assert len(store.attempt_rows(run.run_id)) == 1


def test_an_older_index_is_rebuilt_when_run_gains_a_field(tmp_path, monkeypatch):
    import dataclasses

    import agent.store

    store = Store(tmp_path)
    run = make_run(store)
    store.save_attempt(run, make_attempt(run, 1), source="x = 1\n")
    old_version = agent.store.schema_version()

    @dataclasses.dataclass
    class GrownRun(Run):
        seed: int = 7               # a field this kgen's index has no column for

    monkeypatch.setattr(agent.store, "Run", GrownRun)
    assert agent.store.schema_version() != old_version
    reopened = Store(tmp_path)
    [listed] = reopened.list_runs()                     # no "no column named seed" from the insert
    assert listed.run_id == run.run_id and listed.seed == 7
    assert len(reopened.attempt_rows(run.run_id)) == 1  # the attempts were indexed again too
    with sqlite3.connect(store.index_path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == agent.store.schema_version()
        assert "seed" in {row[1] for row in conn.execute("PRAGMA table_info(runs)")}


CONSISTENT = ("ncu cross-check: consistent (claimed 0.5000 ms per call, Nsight Compute measured 0.4700 ms of "
              "device time over 1 kernel launch (mean of 3 calls); ...)")


def test_the_best_kernels_ncu_check_round_trips_through_files_and_index(tmp_path):
    from verifier.records import NcuCheck

    store = Store(tmp_path)
    run = make_run(store, best_ncu_check=CONSISTENT)
    attempt = make_attempt(run, 1)
    attempt.verify.ncu_check = NcuCheck(status="consistent", reason="claimed 0.5000 ms ...", claimed_ms=0.5,
                                        ncu_ms=0.47, margin=1.25, kernels=1, streams=1, calls=3)
    store.save_attempt(run, attempt, source="x = 1\n")
    assert store.load_run(run.run_id).best_ncu_check == CONSISTENT
    [listed] = store.list_runs()
    assert listed.best_ncu_check == CONSISTENT
    assert store.load_attempt(run.run_id, 1).verify.ncu_check == attempt.verify.ncu_check


def test_an_index_made_before_the_ncu_check_is_rebuilt_with_it(tmp_path, monkeypatch):
    import dataclasses

    import agent.store

    def older_field(f):
        if f.default is not dataclasses.MISSING:
            return dataclasses.field(default=f.default)
        if f.default_factory is not dataclasses.MISSING:
            return dataclasses.field(default_factory=f.default_factory)
        return dataclasses.field()

    # Run as it was before the field, and the index that kgen made: its version, no column for the field
    older = dataclasses.make_dataclass("Run", [(f.name, f.type, older_field(f)) for f in dataclasses.fields(Run)
                                               if f.name != "best_ncu_check"])
    monkeypatch.setattr(agent.store, "Run", older)
    older_version = agent.store.schema_version()
    monkeypatch.undo()
    assert older_version != agent.store.schema_version()
    store = Store(tmp_path)
    run = make_run(store)
    with sqlite3.connect(store.index_path) as conn:
        conn.execute("ALTER TABLE runs DROP COLUMN best_ncu_check")
        conn.execute(f"PRAGMA user_version = {older_version}")

    run.best_ncu_check = CONSISTENT
    Store(tmp_path).save_run(run)                              # no "no column named best_ncu_check"
    [listed] = Store(tmp_path).list_runs()
    assert listed.run_id == run.run_id and listed.best_ncu_check == CONSISTENT


def test_the_index_is_written_ahead_so_readers_do_not_block_the_loop(tmp_path):
    store = Store(tmp_path)
    make_run(store)
    with sqlite3.connect(store.index_path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_run_is_found_without_its_index_row(tmp_path):
    store = Store(tmp_path)
    run = make_run(store)
    store.index_path.unlink()
    assert store.load_run(run.run_id).run_id == run.run_id


def test_run_ids_resolve_from_a_prefix_or_latest(tmp_path):
    store = Store(tmp_path)
    first = make_run(store, run_id="20261129-100000-softmax-aaaa")
    second = make_run(store, run_id="20261129-110000-softmax-bbbb")
    assert store.resolve_run_id("latest") == second.run_id
    assert store.resolve_run_id("20261129-10") == first.run_id
    with pytest.raises(KeyError, match="matches 2 runs"):
        store.resolve_run_id("20261129")
    with pytest.raises(KeyError, match="no run"):
        store.resolve_run_id("nope")


def test_creating_a_run_twice_is_refused(tmp_path):
    store = Store(tmp_path)
    run = make_run(store)
    with pytest.raises(FileExistsError):
        store.create_run(run)


def test_config_secrets_are_scrubbed():
    clean = scrub_config({"model": "m", "api_key": SECRET, "OPENAI_API_KEY": SECRET, "client_secret": SECRET,
                          "access_token": SECRET, "budget_tokens": 1000,
                          "base_url": f"https://user:{SECRET}@host/v1?api-key={SECRET}&x=1"})
    assert SECRET not in json.dumps(clean)
    assert clean["budget_tokens"] == 1000 and clean["model"] == "m"
    assert clean["base_url"].startswith("https://host/v1?") and "x=1" in clean["base_url"]


def test_url_without_credentials_is_unchanged():
    assert scrub_url("http://127.0.0.1:8000/v1") == "http://127.0.0.1:8000/v1"


def test_secret_environment_values_are_redacted(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    assert redact(f"the key is {SECRET}.") == f"the key is {REDACTED}."


def test_no_secret_reaches_any_stored_file(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    store = Store(tmp_path)
    run = make_run(store, config={"base_url": f"https://u:{SECRET}@h/v1", "api_key": SECRET, "model": "m"},
                   stop_reason=f"endpoint said: bad key {SECRET}")
    store.save_run(run)
    echoed = make_attempt(run, 1, reason=f"echo {SECRET}", note=SECRET,
                          verify=VerifyResult.from_dict({**VERIFY_OK, "stdout": f"OPENAI_API_KEY={SECRET}"}))
    store.save_attempt(run, echoed, source=f"# {SECRET}\n", prompt=f"key {SECRET}", response=SECRET)
    store.save_best(run, f"# {SECRET}\n")

    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) >= 8
    for path in files:
        assert SECRET.encode() not in path.read_bytes(), path
    with sqlite3.connect(store.index_path) as conn:
        dump = "\n".join(conn.iterdump())
    assert SECRET not in dump


def test_attempt_from_a_timed_verdict_carries_time_speedup_and_sol():
    from verifier.records import VerifyResult

    result = VerifyResult.from_dict(VERIFY_OK)
    attempt = Attempt.from_result("r", 3, 2, result, sol_ms=0.4, note="n")
    assert (attempt.number, attempt.round, attempt.status, attempt.note) == (3, 2, "ok", "n")
    assert attempt.median_ms == 0.5
    assert attempt.speedup == 1.1                 # against the faster baseline: compile-max-autotune
    assert attempt.sol_pct == pytest.approx(80.0)
    assert attempt.verify.speedups["eager"] == 2.0


def test_attempt_from_an_untimed_verdict_has_no_time():
    from verifier.records import VerifyResult

    attempt = Attempt.from_result("r", 1, 1, VerifyResult(status="ok", reason="correct"), sol_ms=0.4)
    assert attempt.median_ms is None and attempt.speedup is None and attempt.sol_pct is None


def test_result_files_are_readable_as_the_umask_allows(tmp_path):
    import os
    import stat

    from agent.store import _write_text

    path = tmp_path / "run.json"
    _write_text(path, "{}")
    mode = stat.S_IMODE(os.stat(path).st_mode)
    mask = os.umask(0)
    os.umask(mask)
    assert mode == 0o666 & ~mask and mode & 0o044   # not mkstemp's 0600
