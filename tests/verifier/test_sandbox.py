"""The sandbox: one adversarial test per property it promises."""

import os
import sys
import time
import textwrap

import pytest

from processes import alive as _alive, running
from verifier.sandbox import Sandbox, file_confinement, network_isolation, run_sandboxed

HONEST = '''
import json, os, sys
hello = json.loads(sys.stdin.readline())
from verifier.channel import ChildChannel
chan = ChildChannel(int(os.environ["KGEN_RESULT_FD"]), bytes.fromhex(hello["key"]))
'''


# A pre-started child: the key comes first, alone; `warm_up` runs before the job's line is read.
TWO_LINES = """
import json, os, sys
hello = json.loads(sys.stdin.readline())
assert "job" not in hello
{warm_up}
line = sys.stdin.readline()
if not line:
    sys.exit(0)
hello.update(json.loads(line))
from verifier.channel import ChildChannel
chan = ChildChannel(int(os.environ["KGEN_RESULT_FD"]), bytes.fromhex(hello["key"]))
"""


def child(tmp_path, body: str, *, warm_up: str = "") -> list[str]:
    script = tmp_path / "child.py"
    head = TWO_LINES.replace("{warm_up}", textwrap.dedent(warm_up)) if warm_up else HONEST
    script.write_text(head + textwrap.dedent(body))
    return [sys.executable, str(script)]


def test_signed_message_comes_back(tmp_path):
    res = run_sandboxed(child(tmp_path, 'chan.send({"status": "ok", "job": hello["job"]})'), {"x": 1}, timeout_s=30)
    assert res.message == {"status": "ok", "job": {"x": 1}}


def test_secrets_are_scrubbed_from_env(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-should-not-leak")
    monkeypatch.setenv("HF_TOKEN", "hf-should-not-leak")
    monkeypatch.setenv("DB_PASSWORD", "pw")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("KGEN_HARMLESS", "kept")
    res = run_sandboxed(child(tmp_path, 'chan.send({"env": dict(os.environ)})'), {}, timeout_s=30)
    env = res.message["env"]
    for name in ("OPENAI_API_KEY", "HF_TOKEN", "DB_PASSWORD", "OPENAI_BASE_URL"):
        assert name not in env
    assert "sk-test-should-not-leak" not in str(env)
    assert env["KGEN_HARMLESS"] == "kept"


def test_fresh_temporary_working_directory_removed_after(tmp_path):
    res = run_sandboxed(child(tmp_path, '''
        open("scratch.txt", "w").write("x")
        chan.send({"cwd": os.getcwd(), "listing": os.listdir(".")})'''), {}, timeout_s=30)
    cwd = res.message["cwd"]
    assert "kgen-sandbox-" in cwd and res.message["listing"] == ["scratch.txt"]
    assert not os.path.exists(cwd)


@pytest.mark.skipif(not network_isolation()[0], reason="unshare not available here")
def test_network_is_cut_off(tmp_path):
    res = run_sandboxed(child(tmp_path, '''
        import socket
        try:
            socket.create_connection(("1.1.1.1", 53), timeout=3)
            outcome = "connected"
        except OSError as exc:
            outcome = type(exc).__name__
        chan.send({"outcome": outcome})'''), {}, timeout_s=30)
    assert res.message["outcome"] != "connected"
    assert any("network: isolated" in note for note in res.isolation)


def _sleeper(tmp_path) -> str:
    """Child code that starts a long-lived grandchild carrying tmp_path in its command line (for running())."""
    return f'''
        import subprocess, sys
        p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", {str(tmp_path)!r}])
        print(p.pid, flush=True)'''


def test_timeout_kills_the_whole_process_group(tmp_path):
    res = run_sandboxed(child(tmp_path, _sleeper(tmp_path) + '''
        import time
        while True:
            time.sleep(1)'''), {}, timeout_s=3)
    assert res.timed_out and res.message is None
    assert res.stdout.split(), res.stderr[-800:]   # the grandchild had started
    time.sleep(0.2)
    assert running(str(tmp_path)) == []


def test_output_is_capped_and_drained(tmp_path):
    res = run_sandboxed(child(tmp_path, '''
        sys.stdout.write("x" * 5_000_000)
        sys.stdout.flush()
        chan.send({"done": True})'''), {}, timeout_s=60, output_cap_bytes=1000)
    assert res.message == {"done": True}
    assert len(res.stdout) == 1000 and res.stdout_dropped == 5_000_000 - 1000


def test_verdict_printed_to_stdout_is_not_a_verdict(tmp_path):
    res = run_sandboxed(child(tmp_path, 'print(\'{"status": "ok"}\')'), {}, timeout_s=30)
    assert res.message is None and "no result message" in res.channel_problem


def test_unsigned_write_to_the_channel_is_not_a_verdict(tmp_path):
    res = run_sandboxed(child(tmp_path, '''
        import json
        fake = json.dumps({"sig": "0" * 64, "payload": json.dumps({"status": "ok"})})
        os.write(int(os.environ["KGEN_RESULT_FD"]), fake.encode() + b"\\n")'''), {}, timeout_s=30)
    assert res.message is None and "0 correctly signed" in res.channel_problem


def test_second_message_voids_the_verdict(tmp_path):
    res = run_sandboxed(child(tmp_path, '''
        os.write(int(os.environ["KGEN_RESULT_FD"]), b'{"status": "ok"}\\n')
        chan.send({"status": "mismatch"})'''), {}, timeout_s=30)
    assert res.message is None


def test_child_exit_code_reported_without_message(tmp_path):
    res = run_sandboxed(child(tmp_path, 'os._exit(0)'), {}, timeout_s=30)
    assert res.returncode == 0 and res.message is None and not res.timed_out


@pytest.mark.skipif(not file_confinement()[0], reason="mount namespaces not available here")
def test_files_outside_its_directory_are_read_only(tmp_path):
    outside = tmp_path / "outside.txt"
    res = run_sandboxed(child(tmp_path, f'''
        outcome = {{}}
        for name, path in (("own", "scratch.txt"), ("outside", {str(outside)!r}),
                           ("project", os.path.join(os.environ["PYTHONPATH"].split(os.pathsep)[0], "kgen-probe"))):
            try:
                open(path, "w").write("x")
                outcome[name] = "written"
            except OSError as exc:
                outcome[name] = exc.strerror
        chan.send(outcome)'''), {}, timeout_s=30)
    assert res.message == {"own": "written", "outside": "Read-only file system", "project": "Read-only file system"}
    assert not outside.exists()
    assert any("files: read-only" in note for note in res.isolation)


@pytest.mark.skipif(not file_confinement()[0], reason="mount namespaces not available here")
def test_callers_directory_and_compile_caches_stay_writable(tmp_path):
    res = run_sandboxed(child(tmp_path, f'''
        open({str(tmp_path / "report.txt")!r}, "w").write("x")
        cache = os.path.join(os.environ["TRITON_CACHE_DIR"], "kgen-sandbox-test")
        open(cache, "w").write("x")
        os.remove(cache)
        chan.send({{"ok": True}})'''), {}, timeout_s=30, cwd=tmp_path)
    assert res.message == {"ok": True}, res.stderr[-800:]
    assert (tmp_path / "report.txt").read_text() == "x"


@pytest.mark.skipif(not file_confinement()[0], reason="mount namespaces not available here")
def test_dev_shm_is_private(tmp_path):
    res = run_sandboxed(child(tmp_path, '''
        open("/dev/shm/kgen-sandbox-test", "w").write("x")
        chan.send({"listing": os.listdir("/dev/shm")})'''), {}, timeout_s=30)
    assert res.message == {"listing": ["kgen-sandbox-test"]}
    assert not os.path.exists("/dev/shm/kgen-sandbox-test")


def test_child_runs_in_fresh_cgroups_where_writable(tmp_path):
    res = run_sandboxed(child(tmp_path, '''
        chan.send({"cgroups": open("/proc/self/cgroup").read()})'''), {}, timeout_s=30)
    notes = " ".join(res.isolation)
    if "pids cgroup" not in notes:
        pytest.skip("no writable pids cgroup here")
    lines = {line.split(":")[1]: line.split(":")[2] for line in res.message["cgroups"].splitlines()}
    assert "kgen-" in lines["pids"]
    if "memory cgroup" in notes:
        assert "kgen-" in lines["memory"]


def test_inductor_cache_is_the_sandboxs_own_whatever_the_parent_set(tmp_path, monkeypatch):
    # torch sets TORCHINDUCTOR_CACHE_DIR in a parent that touched inductor; under the read-only file
    # system a child that inherited it could not compile (torch.compile baselines failed that way)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "parents-inductor-cache"))
    res = run_sandboxed(child(tmp_path, '''
        cache = os.environ["TORCHINDUCTOR_CACHE_DIR"]
        os.makedirs(os.path.join(cache, "ab"))
        open(os.path.join(cache, "ab", "kernel.py"), "w").write("x")
        chan.send({"cache": cache, "cwd": os.getcwd()})'''), {}, timeout_s=30)
    assert res.message is not None, res.stderr[-800:]
    assert res.message["cache"].startswith(res.message["cwd"] + os.sep)
    assert not (tmp_path / "parents-inductor-cache").exists()


# ---- pre-started sandboxes


def test_prestarted_child_gets_its_job_after_the_key(tmp_path):
    argv = child(tmp_path, 'chan.send({"job": hello["job"], "warmed": warmed})', warm_up="warmed = True")
    with Sandbox(argv) as box:
        time.sleep(0.5)
        res = box.run({"x": 1}, timeout_s=30)
    assert res.message == {"job": {"x": 1}, "warmed": True}, res.stderr[-800:]
    assert res.prestarted_s >= 0.5


def test_prestarted_time_limit_counts_from_the_job(tmp_path):
    argv = child(tmp_path, '''
        import time
        time.sleep(1)
        chan.send({"done": True})''', warm_up="pass")
    with Sandbox(argv) as box:
        time.sleep(3)   # idle longer than the limit: it must not count against the job
        res = box.run({}, timeout_s=2.5)
    assert not res.timed_out and res.message == {"done": True}, res.stderr[-800:]
    assert res.wall_s < 2.5 <= res.prestarted_s


def test_prestarted_timeout_kills_the_whole_process_group(tmp_path):
    argv = child(tmp_path, _sleeper(tmp_path) + '''
        import time
        time.sleep(5)''', warm_up="pass")
    with Sandbox(argv) as box:
        time.sleep(1)
        started = time.monotonic()
        res = box.run({}, timeout_s=2)
    assert res.timed_out and res.message is None
    assert 2 <= time.monotonic() - started < 4.5
    assert res.stdout.split(), res.stderr[-800:]
    time.sleep(0.2)
    assert running(str(tmp_path)) == []


def _warm_up_with_grandchild(tmp_path) -> str:
    # the grandchild's pid goes to a file: nothing comes back from a child that never gets its job
    return f'''
        import subprocess, sys
        p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "grandchild", {str(tmp_path)!r}])
        open({str(tmp_path / "grandchild.pid")!r}, "w").write(str(p.pid))'''


def _started(box, tmp_path) -> tuple[int, str]:
    """The grandchild's host pid once the pre-started child has started it, and the child's working directory."""
    workdir = os.readlink(f"/proc/{box.pid}/cwd")
    pid_file = tmp_path / "grandchild.pid"
    for _ in range(200):
        if pid_file.exists() and pid_file.read_text():
            break
        time.sleep(0.05)
    return next(p for p in running(str(tmp_path)) if b"grandchild" in open(f"/proc/{p}/cmdline", "rb").read()), workdir


def _kgen_cgroups(pid: int) -> list[str]:
    """The directories of the fresh cgroups the sandbox put pid in (none where cgroups are not writable)."""
    found = []
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f.read().splitlines():
            _, controllers, path = line.split(":", 2)
            if "kgen-" in path:
                found.append(os.path.join("/sys/fs/cgroup", controllers, path.lstrip("/")))
    return found


def test_closed_unused_sandbox_leaves_nothing_behind(tmp_path):
    box = Sandbox(child(tmp_path, "", warm_up=_warm_up_with_grandchild(tmp_path)), cwd=tmp_path)
    grandchild, workdir = _started(box, tmp_path)
    assert "kgen-sandbox-" in workdir and _alive(box.pid) and _alive(grandchild)
    groups = _kgen_cgroups(box.pid)
    box.close()
    time.sleep(0.2)
    assert not _alive(box.pid) and not _alive(grandchild)
    assert not os.path.exists(workdir)
    assert groups == [] or not any(os.path.exists(g) for g in groups)
    assert not box.alive
    with pytest.raises(RuntimeError):
        box.run({}, timeout_s=5)


def test_dropped_unused_sandbox_leaves_nothing_behind(tmp_path):
    box = Sandbox(child(tmp_path, "", warm_up=_warm_up_with_grandchild(tmp_path)), cwd=tmp_path)
    grandchild, workdir = _started(box, tmp_path)
    pid = box.pid
    del box
    time.sleep(0.2)
    assert not _alive(pid) and not _alive(grandchild)
    assert not os.path.exists(workdir)


def test_prestarted_child_without_a_job_is_killed_after_the_idle_limit(tmp_path):
    with Sandbox(child(tmp_path, 'chan.send({"done": True})', warm_up="pass"), max_idle_s=0.5) as box:
        time.sleep(1.5)
        assert not box.alive and not _alive(box.pid)
        res = box.run({}, timeout_s=5)
    assert res.message is None and "got no job in time" in res.limit
