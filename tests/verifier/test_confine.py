"""The OS confinement's user (verifier/confine.py): the unprivileged uid, its fallback, the init out of reach.

    .venv/bin/python -m pytest tests/verifier/test_confine.py -q      # ~30 s here

The other mechanisms (namespaces, seccomp, the read-only world) are tested one by one in
tests/verifier/test_sandbox.py; escapes that lean on the uid in tests/verifier/test_exploits_escape.py.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from verifier import confine
from verifier.sandbox import CACHE_ROOT, confinement, drops_uid, run_sandboxed, scrubbed_env

ROOT = Path(__file__).resolve().parents[2]
UID = confine.SANDBOX_UID

needs_uid = pytest.mark.skipif(not (drops_uid() and confinement().get("pid_namespace")),
                               reason="kgen is not root here, or the OS confinement does not hold")

HONEST = '''
import json, os, sys
hello = json.loads(sys.stdin.readline())
from verifier.channel import ChildChannel
chan = ChildChannel(int(os.environ["KGEN_RESULT_FD"]), bytes.fromhex(hello["key"]))
'''

# What a program learns of its init's /proc entries: each opened, or the error it got
INIT_PROBE = '''
import os
seen = {}
for name in ("environ", "mem", "maps", "cwd"):
    path = "/proc/1/" + name
    try:
        if name == "cwd":
            os.listdir(path)
        else:
            os.close(os.open(path, os.O_RDONLY))
        seen[name] = "opened"
    except OSError as exc:
        seen[name] = exc.strerror
'''


def child(tmp_path: Path, body: str) -> list[str]:
    script = tmp_path / "child.py"
    script.write_text(HONEST + textwrap.dedent(body))
    return [sys.executable, str(script)]


def launch(tmp_path: Path, body: str, *options: str, env: dict | None = None) -> tuple[dict, dict]:
    """verifier.confine run directly on a Python program; (the launcher's report, what the program printed)."""
    script = tmp_path / "probe.py"
    script.write_text(textwrap.dedent(body) + "\nimport json; print('SEEN ' + json.dumps(seen))\n")
    work = tmp_path / "work"
    work.mkdir(mode=0o700, exist_ok=True)
    read_fd, write_fd = os.pipe()
    cmd = [sys.executable, "-m", "verifier.confine", f"--report-fd={write_fd}", f"--own={work}", *options, "--",
           sys.executable, str(script)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=work, pass_fds=(write_fd,),
                          env=env or scrubbed_env())
    os.close(write_fd)
    with os.fdopen(read_fd) as f:
        report = json.loads(f.readline() or "{}")
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("SEEN ")), "")
    assert line, (done.returncode, done.stderr[-1500:])
    return report, json.loads(line.removeprefix("SEEN "))


@needs_uid
def test_the_program_runs_as_the_unprivileged_uid(tmp_path):
    res = run_sandboxed(child(tmp_path, '''
        chan.send({"ids": [os.getresuid(), os.getresgid(), os.getgroups()]})'''), {}, timeout_s=30)
    assert res.message == {"ids": [[UID] * 3, [UID] * 3, []]}, res.stderr[-800:]
    assert confinement()["uid"] == UID
    assert f"unprivileged uid: {UID}" in "; ".join(res.isolation)
    assert not [m for m in res.isolation_missing if m.startswith("unprivileged uid")]


@needs_uid
def test_a_directory_the_uid_cannot_search_is_shown_only_in_part(tmp_path):
    # the program lies under a mode-0700 directory of root's (as a pyenv interpreter under /root does)
    closed = tmp_path / "closed"
    (closed / "lib").mkdir(parents=True)
    closed.chmod(0o700)
    (closed / "sibling.txt").write_text("not for the sandbox")
    script = closed / "lib" / "child.py"
    script.write_text(HONEST + textwrap.dedent('''
        sibling = os.path.join(os.path.dirname(os.path.dirname(__file__)), "sibling.txt")
        chan.send({"uid": os.getuid(), "sibling": os.path.exists(sibling)})'''))
    res = run_sandboxed([sys.executable, str(script)], {}, timeout_s=30)
    assert res.message == {"uid": UID, "sibling": False}, res.stderr[-800:]
    assert os.stat(closed).st_mode & 0o777 == 0o700   # untouched outside


@needs_uid
def test_an_unreadable_pythonpath_entry_keeps_uid_0_and_says_why(tmp_path):
    private = tmp_path / "private-lib"
    private.mkdir()
    private.chmod(0o700)
    res = run_sandboxed(child(tmp_path, 'chan.send({"uid": os.getuid()})'), {}, timeout_s=30,
                        extra_env={"PYTHONPATH": os.pathsep.join([str(ROOT), str(private)])})
    assert res.message == {"uid": 0}, res.stderr[-800:]
    missing = [m for m in res.isolation_missing if m.startswith("unprivileged uid")]
    assert missing == [f"unprivileged uid (uid 0: {private} is not readable by uid {UID})"], res.isolation_missing
    assert not res.isolation_complete
    assert any(n.startswith("unprivileged uid: NOT in force") and str(private) in n for n in res.isolation)
    # the rest of the confinement still holds: uid 0 with every capability dropped
    assert any(n.startswith("user: uid 0") for n in res.isolation)


def _linked_interpreter(tmp_path: Path, closed: str) -> tuple[list[str], Path]:
    """A venv-like link checkout/bin/python to this interpreter, with `closed` (a part of it) mode 0700."""
    checkout = tmp_path / "checkout"
    (checkout / "bin").mkdir(parents=True)
    (checkout / "bin" / "python").symlink_to(sys.executable)
    (tmp_path / closed).chmod(0o700)
    script = tmp_path / "child.py"
    script.write_text(HONEST + 'chan.send({"uid": os.getuid()})\n')
    return [str(checkout / "bin" / "python"), str(script)], checkout


@needs_uid
def test_an_interpreter_linked_from_under_a_closed_directory_runs_as_the_uid(tmp_path):
    # the link's own directory is searchable; the directory above it (a checkout of mode 0700) is not
    argv, _ = _linked_interpreter(tmp_path, "checkout")
    res = run_sandboxed(argv, {}, timeout_s=30)
    assert res.message == {"uid": UID}, res.stderr[-800:]


@needs_uid
def test_an_interpreter_in_a_closed_directory_is_named_in_the_reason(tmp_path):
    argv, checkout = _linked_interpreter(tmp_path, "checkout/bin")
    res = run_sandboxed(argv, {}, timeout_s=30)
    assert res.message == {"uid": 0}, res.stderr[-800:]
    assert f"unprivileged uid (uid 0: {checkout / 'bin'} is not searchable by uid {UID} (needed for " \
           f"{checkout / 'bin' / 'python'}))" in res.isolation_missing, res.isolation_missing


@needs_uid
def test_the_fallback_gives_the_sandboxs_directories_back(tmp_path):
    private = tmp_path / "private-lib"
    private.mkdir(mode=0o700)
    private.chmod(0o700)
    res = run_sandboxed(child(tmp_path, '''
        open("scratch.txt", "w").write("x")
        chan.send({"uid": os.getuid(), "cwd_owner": os.stat(".").st_uid})'''), {}, timeout_s=30,
        extra_env={"PYTHONPATH": os.pathsep.join([str(ROOT), str(private)])})
    assert res.message == {"uid": 0, "cwd_owner": 0}, res.stderr[-800:]


@needs_uid
def test_the_init_is_out_of_reach_of_the_unprivileged_program(tmp_path):
    report, seen = launch(tmp_path, INIT_PROBE)
    assert report["uid"] == UID and report["init"].startswith("not dumpable")
    assert seen == {"environ": "Permission denied", "mem": "Permission denied", "maps": "Permission denied",
                    "cwd": "Permission denied"}


@needs_uid
def test_a_non_dumpable_init_is_out_of_reach_of_a_program_of_its_own_uid(tmp_path):
    # --uid=0: the fallback's case, both of uid 0 without capabilities; only the init's PR_SET_DUMPABLE 0
    # stands between them (without it, the program read /proc/1/environ and /proc/1/mem)
    report, seen = launch(tmp_path, INIT_PROBE, "--uid=0")
    assert report["uid"] == 0 and report["capabilities"] == "none"
    assert seen == {"environ": "Permission denied", "mem": "Permission denied", "maps": "Permission denied",
                    "cwd": "Permission denied"}


@needs_uid
def test_compile_caches_are_the_sandboxs_own_and_kgens_stay_as_they_were(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "users-triton-cache"))
    (tmp_path / "users-triton-cache").mkdir()
    before = {p: os.stat(p) for p in [tmp_path / "users-triton-cache"] + [CACHE_ROOT / d for d in ("triton",)]
              if p.exists()}
    res = run_sandboxed(child(tmp_path, '''
        caches = {k: os.environ[k] for k in ("TRITON_CACHE_DIR", "TORCH_EXTENSIONS_DIR", "CUPY_CACHE_DIR")}
        for d in caches.values():
            open(os.path.join(d, "entry"), "w").write("x")
        chan.send({"caches": caches, "cwd": os.getcwd()})'''), {}, timeout_s=30)
    assert res.message is not None, res.stderr[-800:]
    assert all(d.startswith(res.message["cwd"] + os.sep) for d in res.message["caches"].values())
    for path, st in before.items():
        now = os.stat(path)
        assert (now.st_uid, now.st_gid, now.st_mode) == (st.st_uid, st.st_gid, st.st_mode), path
    assert not (tmp_path / "users-triton-cache" / "entry").exists()


@needs_uid
def test_the_callers_directory_is_lent_and_given_back(tmp_path):
    here = tmp_path / "exchange"
    here.mkdir(mode=0o700)
    kgens = here / "kgens.txt"
    kgens.write_text("kgen's")
    res = run_sandboxed(child(tmp_path, f'''
        outcome = {{}}
        for name, act in (("create", lambda: open({str(here / "out.txt")!r}, "w").write("x")),
                          ("rewrite", lambda: open({str(kgens)!r}, "a").write("x")),
                          ("remove", lambda: os.unlink({str(kgens)!r}))):
            try:
                act()
                outcome[name] = "done"
            except OSError as exc:
                outcome[name] = exc.strerror
        chan.send(outcome)'''), {}, timeout_s=30, cwd=here)
    assert res.message == {"create": "done", "rewrite": "Permission denied", "remove": "Operation not permitted"}, \
        res.stderr[-800:]
    assert (here / "out.txt").read_text() == "x" and kgens.read_text() == "kgen's"   # kgen reads it back
    st = os.stat(here)
    assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (os.geteuid(), os.getegid(), 0o700)


def test_closed_ancestors_are_the_outermost_the_uid_cannot_search():
    base = Path(tempfile.mkdtemp(prefix="kgen-closed-"))   # under /tmp: every directory above it searchable
    try:
        base.chmod(0o755)
        outer = base / "a"
        inner = outer / "b" / "c"
        inner.mkdir(parents=True)
        for d in (outer, outer / "b"):
            d.chmod(0o700)
        owner, group = os.stat(outer).st_uid, os.stat(outer).st_gid
        assert confine.closed_ancestors([str(inner / "f")], owner + 1, group + 1) == [str(outer)]
        assert confine.closed_ancestors([str(inner / "f")], owner, group) == []
    finally:
        shutil.rmtree(base)


def test_without_root_the_uid_is_kgens_own_and_reported_missing():
    from verifier.sandbox import confinement_notes

    notes, missing = confinement_notes({"uid": 0, "user_namespace": True, "capabilities": "none",
                                        "uid_problem": "kgen's own uid 1000: kgen is not root"})
    assert "unprivileged uid (kgen's own uid 1000: kgen is not root)" in missing
    assert any(n.startswith("unprivileged uid: NOT in force (kgen's own uid 1000") for n in notes)


@pytest.mark.gpu
@needs_uid
def test_cuda_and_a_triton_kernel_work_as_the_unprivileged_uid(tmp_path):
    # the driver's nodes are 0666; Triton compiles into the sandbox's own cache (its launcher stub too)
    res = run_sandboxed(child(tmp_path, '''
        import torch, triton, triton.language as tl

        @triton.jit
        def twice(x_ptr, n, BLOCK: tl.constexpr):
            i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n) * 2, mask=i < n)

        x = torch.ones(1000, device="cuda")
        twice[(4,)](x, 1000, BLOCK=256)
        cache = os.environ["TRITON_CACHE_DIR"]
        chan.send({"uid": os.getuid(), "sum": float(x.sum()), "cached": len(os.listdir(cache)),
                   "cache_in_cwd": cache.startswith(os.getcwd() + os.sep)})'''), {}, timeout_s=300)
    assert res.message is not None, res.stderr[-1500:]
    assert (res.message["uid"], res.message["sum"], res.message["cache_in_cwd"]) == (UID, 2000.0, True)
    assert res.message["cached"] > 0
    # the unprivileged uid held; a host may still lack another confinement of its own (the H200 machine
    # delegates no pids controller: "pids cap"), which is not what this test is about
    assert "unprivileged uid" not in res.isolation_missing, res.isolation_missing
