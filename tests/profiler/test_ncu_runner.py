"""profile_candidate's ncu runner, driven through the real sandbox by a stand-in ncu.

The stand-in is an executable that answers the command lines kgen gives ncu the way the H200's
ncu 2025.3.1 did, from the recorded fixtures: `--export` writes a report, `--import --page raw` and
`--page details` print the fixture pages, `--log-file` (the two-pass way) writes them there. Each
invocation is logged in the profile's working folder (the one place the sandbox lets it write,
kept here after the run), so the tests count profiling runs. What a real ncu prints is covered by the
fixture tests in test_ncu.py; the GPU test in test_profile_gpu.py runs the real one.
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
from pathlib import Path

import pytest

from profiler import profile as profile_mod
from profiler.profile import profile_candidate
from verifier.task import load_task

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
KERNEL = (ROOT / "tests" / "verifier" / "candidates" / "good" / "softmax.py").read_text()

FAKE = '''#!{python}
import json, os, shutil, sys
args = sys.argv[1:]
def value(flag):
    return args[args.index(flag) + 1] if flag in args else None
folder = os.path.dirname(value("--export") or value("--import") or value("--log-file"))
with open(os.path.join(folder, "ncu-calls.jsonl"), "a") as log:
    log.write(json.dumps(args) + "\\n")
page = value("--page")
if "--import" in args:
    if {import_works}:
        print(open({raw!r} if page == "raw" else {details!r}).read())
    else:
        print("==ERROR== could not load the report", file=sys.stderr)
        sys.exit(1)
elif "--export" in args:
    if {export_works}:
        open(value("--export"), "w").write("a report")
    print("==PROF== Disconnected from process 1")
else:
    shutil.copy({raw!r} if page == "raw" else {details!r}, value("--log-file"))
'''


def fake_ncu(tmp_path: Path, monkeypatch, *, export_works: bool = True, import_works: bool = True) -> str:
    # the profile's working folder stays under tmp_path, so the calls logged there can be read afterwards
    monkeypatch.setattr(profile_mod.cleanup, "scratch_dir",
                        lambda prefix: contextlib.nullcontext(tempfile.mkdtemp(prefix=prefix + "-", dir=tmp_path)))
    script = tmp_path / "ncu"
    script.write_text(FAKE.format(python=sys.executable, raw=str(FIXTURES / "softmax_raw.csv"),
                                  details=str(FIXTURES / "softmax_details.csv"), export_works=export_works,
                                  import_works=import_works))
    script.chmod(0o755)
    return str(script)


def calls(tmp_path: Path) -> list[list[str]]:
    [log] = tmp_path.glob("kgen-profile-*/ncu-calls.jsonl")
    return [json.loads(line) for line in log.read_text().splitlines()]


@pytest.fixture(scope="module")
def task():
    return load_task(ROOT / "tasks" / "softmax.py")


def test_one_profiling_run_gives_both_pages(task, tmp_path, monkeypatch):
    ncu = fake_ncu(tmp_path, monkeypatch)
    diagnosis = profile_candidate(task, KERNEL, ncu=ncu, timeout_s=60)
    made = calls(tmp_path)
    profiled = [c for c in made if "--import" not in c]
    assert len(profiled) == 1                                        # the candidate ran under ncu once
    assert "--metrics" in profiled[0] and profiled[0].count("--section") == 7
    assert sorted(c[c.index("--page") + 1] for c in made if "--import" in c) == ["details", "raw"]
    assert diagnosis.source == "ncu" and diagnosis.bound == "memory"
    assert [k.name for k in diagnosis.kernels] == ["softmax_kernel"]       # the fixture's kernel
    assert diagnosis.rules                                           # ncu's advice, from the details page
    assert set(diagnosis.passes_s) == {"ncu (metrics and sections, one pass)", "ncu --import (both pages)"}
    assert not any("two passes" in n for n in diagnosis.notes)


@pytest.mark.parametrize("broken", ["export", "import"])
def test_a_report_that_gives_no_rows_is_profiled_again_in_two_passes(task, tmp_path, monkeypatch, broken):
    ncu = fake_ncu(tmp_path, monkeypatch, export_works=broken != "export", import_works=broken != "import")
    diagnosis = profile_candidate(task, KERNEL, ncu=ncu, timeout_s=60)
    profiled = [c for c in calls(tmp_path) if "--import" not in c]
    assert len(profiled) == 3                                        # the report, then raw and details
    assert [c[c.index("--page") + 1] for c in profiled[1:]] == ["raw", "details"]
    assert any("one ncu pass into a report gave no kernel rows" in n and "two passes" in n
               for n in diagnosis.notes), diagnosis.notes
    assert diagnosis.bound == "memory" and diagnosis.rules
    assert {"ncu raw metrics", "ncu section details"} <= set(diagnosis.passes_s)


def test_without_details_the_raw_metrics_come_from_one_pass(task, tmp_path, monkeypatch):
    ncu = fake_ncu(tmp_path, monkeypatch)
    diagnosis = profile_candidate(task, KERNEL, ncu=ncu, timeout_s=60, details=False)
    [profiled] = calls(tmp_path)
    assert "--export" not in profiled and profiled[profiled.index("--page") + 1] == "raw"
    assert diagnosis.bound == "memory" and not diagnosis.rules
    assert set(diagnosis.passes_s) == {"ncu raw metrics"}
