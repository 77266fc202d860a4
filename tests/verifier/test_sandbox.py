"""The sandbox: one adversarial test per property it promises."""

import os
import shutil
import subprocess
import sys
import tempfile
import time
import textwrap
from pathlib import Path

import pytest

from processes import alive as _alive, running
from verifier.sandbox import (MAX_TASKS, PRIVATE_CACHE_DIR, Sandbox, _limits, _memory_cap_bytes, _v2_controllers,
                             cgroup_v2, confinement, drops_uid, file_confinement, network_isolation, run_sandboxed)

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
    # the unprivileged uid's compile caches are the sandbox's own, in its directory
    own = [PRIVATE_CACHE_DIR] if drops_uid() and confinement().get("pid_namespace") else []
    assert "kgen-sandbox-" in cwd and sorted(res.message["listing"]) == sorted(own + ["scratch.txt"])
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


@pytest.mark.skipif(not file_confinement()[0], reason="mount namespaces not available here")
@pytest.mark.skipif(not os.access("/dev/shm", os.W_OK), reason="no writable /dev/shm here")
def test_a_callers_directory_under_dev_shm_is_bound_into_the_private_one(tmp_path):
    # the judge's exchange directory lies on /dev/shm where it can: writable inside, the rest of the host's unseen
    import tempfile
    from pathlib import Path

    exchange = tempfile.mkdtemp(prefix="kgen-test-exchange-", dir="/dev/shm")
    neighbour = tempfile.mkdtemp(prefix="kgen-test-neighbour-", dir="/dev/shm")
    try:
        res = run_sandboxed(child(tmp_path, f'''
            open(os.path.join({exchange!r}, "out.t"), "w").write("x")
            chan.send({{"listing": sorted(os.listdir("/dev/shm")), "neighbour": os.path.exists({neighbour!r})}})'''),
            {}, timeout_s=30, cwd=Path(exchange))
        assert res.message == {"listing": [os.path.basename(exchange)], "neighbour": False}, res.stderr[-800:]
        assert open(os.path.join(exchange, "out.t")).read() == "x"
    finally:
        shutil.rmtree(exchange, ignore_errors=True)
        shutil.rmtree(neighbour, ignore_errors=True)


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


# ---- the OS confinement (verifier/confine.py, verifier/seccomp.py): one test per mechanism

needs_confinement = pytest.mark.skipif(not confinement().get("pid_namespace"),
                                       reason=f"no OS confinement here: {confinement().get('problems')}")


def _status_fields(text: str) -> dict[str, str]:
    return {k: v.strip() for k, v in (line.split(":", 1) for line in text.splitlines() if ":" in line)}


@needs_confinement
def test_child_has_its_own_pid_namespace_without_kgen_in_proc(tmp_path):
    res = run_sandboxed(child(tmp_path, '''
        chan.send({"pid": os.getpid(), "ppid": os.getppid(),
                   "proc": sorted(int(p) for p in os.listdir("/proc") if p.isdigit())})'''), {}, timeout_s=30)
    assert res.message is not None, res.stderr[-800:]
    assert res.message["pid"] <= 3 and res.message["ppid"] == 1
    assert os.getpid() not in res.message["proc"] and res.message["proc"][0] == 1
    assert any(note.startswith("pid namespace: own") for note in res.isolation)


@needs_confinement
def test_child_has_no_capabilities_and_cannot_override_file_permissions(tmp_path):
    res = run_sandboxed(child(tmp_path, '''
        open("locked", "w").write("x")
        os.chmod("locked", 0)
        try:
            open("locked").read()
            outcome = "read"
        except PermissionError:
            outcome = "refused"
        chan.send({"status": open("/proc/self/status").read(), "uid": os.getuid(), "outcome": outcome})'''),
        {}, timeout_s=30)
    fields = _status_fields(res.message["status"])
    for name in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(fields[name], 16) == 0, (name, fields[name])
    assert res.message["outcome"] == "refused"   # uid 0 without CAP_DAC_OVERRIDE is bound by the mode bits
    assert any(note.startswith("user: uid") for note in res.isolation)


@needs_confinement
def test_no_new_privs_and_seccomp_filter_are_set(tmp_path):
    res = run_sandboxed(child(tmp_path, 'chan.send({"status": open("/proc/self/status").read()})'), {}, timeout_s=30)
    fields = _status_fields(res.message["status"])
    assert fields["NoNewPrivs"] == "1"
    assert fields["Seccomp"] == "2"


DENIED_CALLS = '''
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def errname(ret):
    return "ok" if ret >= 0 else errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))
calls = {
    "unshare": lambda: libc.unshare(0x10000000),                   # CLONE_NEWUSER
    "setns": lambda: libc.setns(0, 0),
    "ptrace": lambda: libc.ptrace(16, 1, None, None),               # PTRACE_ATTACH to init
    "mount": lambda: libc.mount(b"none", b"/mnt", b"tmpfs", 0, None),
    "pidfd_open": lambda: libc.syscall(434, 1, 0),
    "keyctl": lambda: libc.syscall(KEYCTL_NR, 0, 0, 0, 0, 0),
    "bpf": lambda: libc.syscall(BPF_NR, 0, None, 0),
    "perf_event_open": lambda: libc.syscall(PERF_NR, None, 0, -1, -1, 0),
    "clone3": lambda: libc.syscall(435, None, 0),
}
result = {name: errname(call()) for name, call in calls.items()}
'''


def _denied_calls_child(tmp_path):
    from verifier import seccomp

    col = 0 if seccomp.machine() == "x86_64" else 1
    nr = {n: seccomp.SYSCALLS[n][col] for n in ("keyctl", "bpf", "perf_event_open")}
    body = DENIED_CALLS.replace("KEYCTL_NR", str(nr["keyctl"])).replace("BPF_NR", str(nr["bpf"])) \
        .replace("PERF_NR", str(nr["perf_event_open"]))
    return child(tmp_path, body + 'chan.send(result)')


@needs_confinement
def test_denied_syscalls_fail_with_eperm(tmp_path):
    res = run_sandboxed(_denied_calls_child(tmp_path), {}, timeout_s=30)
    assert res.message is not None, res.stderr[-800:]
    expected = {name: "EPERM" for name in res.message}
    expected["clone3"] = "ENOSYS"   # so that glibc falls back to clone(), whose flags the filter reads
    assert res.message == expected


@needs_confinement
def test_a_profiler_keeps_perf_event_open(tmp_path):
    res = run_sandboxed(_denied_calls_child(tmp_path), {}, timeout_s=30, profiler=True)
    assert res.message is not None, res.stderr[-800:]
    assert res.message["perf_event_open"] != "EPERM" and res.message["ptrace"] == "EPERM"


@needs_confinement
def test_processes_and_threads_still_start_inside(tmp_path):
    res = run_sandboxed(child(tmp_path, '''
        import subprocess, threading
        out = subprocess.run(["sh", "-c", "echo forked && ls /proc | grep -c '^[0-9]'"], capture_output=True,
                             text=True).stdout.split()
        seen = []
        t = threading.Thread(target=seen.append, args=("thread",))
        t.start(); t.join()
        chan.send({"out": out, "seen": seen})'''), {}, timeout_s=30)
    assert res.message is not None, res.stderr[-800:]
    assert res.message["out"][0] == "forked" and res.message["seen"] == ["thread"]


@needs_confinement
def test_run_and_dev_are_private(tmp_path):
    res = run_sandboxed(child(tmp_path, '''
        chan.send({"run": os.listdir("/run"), "dev": sorted(os.listdir("/dev"))})'''), {}, timeout_s=30)
    assert res.message is not None, res.stderr[-800:]
    assert res.message["run"] == []
    assert {"null", "zero", "urandom", "shm"} <= set(res.message["dev"])
    assert not [d for d in res.message["dev"] if d.startswith(("sd", "vd", "nvme", "loop", "mem", "kmsg"))]


@needs_confinement
def test_a_named_unix_socket_under_tmp_is_out_of_reach(tmp_path):
    import socket
    import tempfile
    import threading

    path = os.path.join(tempfile.gettempdir(), f"kgen-test-{os.getpid()}.sock")   # where tmux and agents keep theirs
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(1)
    server.settimeout(10)
    got = []

    def accept():
        try:
            got.append(server.accept())
        except OSError:
            pass   # closed at the end of the test, nothing having connected

    threading.Thread(target=accept, daemon=True).start()
    try:
        res = run_sandboxed(child(tmp_path, f'''
            import socket
            try:
                s = socket.socket(socket.AF_UNIX)
                s.connect({path!r})
                outcome = "connected"
            except OSError as exc:
                outcome = exc.strerror
            a, b = socket.socketpair()   # what multiprocessing needs stays
            a.send(b"x")
            chan.send({{"outcome": outcome, "pair": b.recv(1).decode()}})'''), {}, timeout_s=30)
    finally:
        server.close()
        os.unlink(path)
    assert res.message == {"outcome": "Connection refused", "pair": "x"}, res.stderr[-800:]
    assert got == []


@needs_confinement
def test_child_status_is_passed_through_the_launcher(tmp_path):
    aborted = run_sandboxed(child(tmp_path, 'import signal; os.kill(os.getpid(), signal.SIGABRT)'), {}, timeout_s=30)
    killed = run_sandboxed(child(tmp_path, 'import signal; os.kill(os.getpid(), signal.SIGKILL)'), {}, timeout_s=30)
    exited = run_sandboxed(child(tmp_path, 'sys.exit(3)'), {}, timeout_s=30)
    assert (aborted.returncode, killed.returncode, exited.returncode) == (-6, -9, 3)


def test_isolation_notes_name_what_is_missing(tmp_path):
    res = run_sandboxed(child(tmp_path, 'chan.send({})'), {}, timeout_s=30, isolate_network=False,
                        confine_files=False)
    assert not res.isolation_complete
    assert {"pid namespace", "seccomp", "network", "files"} <= set(res.isolation_missing)


@needs_confinement
def test_isolation_is_complete_where_everything_held(tmp_path):
    res = run_sandboxed(child(tmp_path, 'chan.send({})'), {}, timeout_s=30)
    assert res.isolation_complete == (res.isolation_missing == [])
    assert not [n for n in res.isolation if "NOT" in n and n.split(":")[0] in ("pid namespace", "user", "seccomp",
                                                                                "no_new_privs", "network", "files")]


@pytest.mark.skipif(not cgroup_v2(), reason="/sys/fs/cgroup is not cgroup v2 (unified) here")
def test_cgroup_v2_limits_are_written(tmp_path):
    res = run_sandboxed(child(tmp_path, 'chan.send({"cgroup": open("/proc/self/cgroup").read()})'), {},
                        timeout_s=30)
    notes = " ".join(res.isolation)
    if "pids cgroup v2" not in notes:
        pytest.skip(f"no writable cgroup v2 here: {notes}")
    assert "kgen-" in res.message["cgroup"]
    assert "memory cgroup v2" in notes


def test_cgroup_group_has_the_limits_and_is_removed():
    groups, _ = _limits()
    made = [g for g, _ in groups.values() if g is not None]
    if not made:
        pytest.skip(f"no writable cgroup here: {groups}")
    pids = groups["pids"][0]
    if pids is not None:
        assert pids.read("pids.max").strip() == str(MAX_TASKS)
    memory = groups["memory"][0]
    if memory is not None:
        name = "memory.max" if memory.version == 2 else "memory.limit_in_bytes"
        assert int(memory.read(name)) <= _memory_cap_bytes() + 4096
    for g in made:
        g.remove()
        assert not g.path.exists()


def test_memory_cap_kills_a_child_that_touches_too_much(tmp_path, monkeypatch):
    import verifier.sandbox as sandbox

    monkeypatch.setattr(sandbox, "MEMORY_FRACTION", 1e9 / (2 * sandbox._memory_cap_bytes()))   # a ~1 GB cap
    groups, _ = _limits()
    for g, _ in groups.values():
        if g is not None:
            g.remove()
    if groups["memory"][0] is None:
        pytest.skip(f"no writable memory cgroup here: {groups['memory'][1]}")
    res = run_sandboxed(child(tmp_path, '''
        hog = []
        for _ in range(40):
            hog.append(bytearray(100 << 20))   # touched: bytearray zero-fills
        chan.send({"survived": True})'''), {}, timeout_s=60)
    assert res.message is None and "used more than 1 GB of host memory" in res.limit, (res.limit, res.isolation)


@needs_confinement
@pytest.mark.skipif(not shutil.which("nvcc"), reason="no nvcc here")
def test_nvcc_compiles_inside_the_confinement(tmp_path):
    # compiling a CUDA candidate goes through nvcc's own subprocesses (cicc, ptxas, fatbinary, the host compiler)
    res = run_sandboxed(child(tmp_path, '''
        import subprocess
        open("k.cu", "w").write("__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\\n")
        done = subprocess.run(["nvcc", "-c", "k.cu", "-o", "k.o"], capture_output=True, text=True)
        chan.send({"rc": done.returncode, "err": done.stderr[-800:], "built": os.path.exists("k.o")})'''),
        {}, timeout_s=180)
    assert res.message is not None, res.stderr[-800:]
    assert res.message["rc"] == 0 and res.message["built"], res.message["err"]


@pytest.mark.gpu
@needs_confinement
def test_cuda_torch_and_cupy_work_inside_the_confinement(tmp_path):
    res = run_sandboxed(child(tmp_path, '''
        import torch
        a = torch.randn(256, 256, device="cuda")
        torch_ok = torch.allclose((a @ a).cpu(), a.cpu() @ a.cpu(), atol=1e-3, rtol=1e-3)
        import cupy
        k = cupy.RawKernel(r'extern "C" __global__ void twice(float* x) { x[threadIdx.x] *= 2.0f; }', "twice")
        x = cupy.ones(32, dtype=cupy.float32)
        k((1,), (32,), (x,))
        chan.send({"torch": bool(torch_ok), "cupy": float(x.sum()), "gpu": torch.cuda.get_device_name(),
                   "dev": sorted(os.listdir("/dev"))})'''), {}, timeout_s=300)
    assert res.message is not None, res.stderr[-1500:]
    assert res.message["torch"] and res.message["cupy"] == 64.0, res.message
    # every layer in force but a cgroup controller the host does not hand kgen (the H200 host keeps pids)
    lacking = {f"{c} cap" for c in ("pids", "memory")
               if cgroup_v2() and c not in _v2_controllers()}
    assert set(res.isolation_missing) <= lacking, (res.isolation_missing, lacking)


# ----------------------------------------------------------------------------------------------
# removing what a child left (verifier.cleanup)


@pytest.fixture
def shm_path(tmp_path):
    """A fresh directory in memory (/dev/shm), where the exchange directories live: the disk's metadata writes
    make a 5000-deep chain take 15 s there."""
    from verifier.cleanup import remove_tree

    if not (os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK)):
        yield tmp_path
        return
    path = Path(tempfile.mkdtemp(prefix="kgen-test-cleanup-", dir="/dev/shm"))
    yield path
    remove_tree(path)


def _chain(top, depth: int) -> None:
    fd = os.open(top, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        deeper = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = deeper
    os.close(fd)


def test_remove_tree_takes_a_chain_of_5000_directories(shm_path):
    from verifier.cleanup import remove_tree

    top = shm_path / "deep"
    top.mkdir()
    _chain(top, 5000)   # shutil.rmtree: RecursionError at ~1000
    done = remove_tree(top)
    assert done.done and done.removed == 5001 and not top.exists(), done


def test_remove_tree_removes_a_link_never_what_it_names(tmp_path):
    from verifier.cleanup import remove_tree

    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "keep.txt").write_text("kgen's")
    top = tmp_path / "left"
    (top / "a").mkdir(parents=True)
    (top / "a" / "to-dir").symlink_to(outside)
    (top / "a" / "to-file").symlink_to(outside / "keep.txt")
    (top / "a" / "to-sub").symlink_to(outside / "sub")
    done = remove_tree(top)
    assert done.done and not top.exists(), done
    assert (outside / "keep.txt").read_text() == "kgen's" and (outside / "sub").is_dir()
    link = tmp_path / "link-at-top"
    link.symlink_to(outside)
    assert remove_tree(link).done and not link.is_symlink() and (outside / "keep.txt").exists()


def test_remove_tree_removes_fifos_without_opening_them(tmp_path):
    from verifier.cleanup import remove_tree

    top = tmp_path / "left"
    top.mkdir()
    os.mkfifo(top / "fifo")   # opened, it would block until a writer came
    started = time.monotonic()
    done = remove_tree(top)
    assert done.done and not top.exists() and time.monotonic() - started < 5, done


REMOVE_AS_USER = """
import os, sys
sys.path.insert(0, sys.argv[2])
from verifier.cleanup import remove_tree   # first: the interpreter's own files may be root's alone (/root/.pyenv)
os.setgid(65534)
os.setuid(65534)
top = sys.argv[1]
os.makedirs(top + "/shut/inside/deeper")
open(top + "/shut/inside/file", "w").close()
os.chmod(top + "/shut/inside", 0)
os.chmod(top + "/shut", 0)
done = remove_tree(top)
print(done.done, os.path.exists(top), done.left)
"""


def test_remove_tree_opens_a_directory_of_mode_000(tmp_path):
    """Not root (here: root's process become uid 65534): its own directory of mode 000 is set to 0700, entered,
    emptied; as root the mode does not stop it."""
    from verifier.cleanup import remove_tree

    if os.geteuid() == 0:
        home = Path(tempfile.mkdtemp(prefix="kgen-test-mode000-"))   # /tmp: the pytest folder is root's 0700
        try:
            os.chown(home, 65534, 65534)
            done = subprocess.run([sys.executable, "-c", REMOVE_AS_USER, str(home / "top"),
                                   str(Path(__file__).resolve().parents[2])], capture_output=True, text=True,
                                  timeout=60)
            assert done.stdout.split()[:2] == ["True", "False"], (done.stdout, done.stderr[-800:])
        finally:
            remove_tree(home)
    top = tmp_path / "left"
    (top / "shut" / "inside").mkdir(parents=True)
    (top / "shut").chmod(0)
    done = remove_tree(top)
    assert done.done and not top.exists(), done


def test_remove_tree_never_raises_and_says_what_stayed(tmp_path):
    from verifier.cleanup import remove_tree

    assert remove_tree(tmp_path / "missing").done
    done = remove_tree("/")   # refused, not tried
    assert not done.done and done.left


def test_remove_soon_waits_a_bounded_time_and_the_cleaner_does_the_rest(shm_path):
    from verifier.cleanup import remove_soon, wait_for_cleaner

    top = shm_path / "flood"
    top.mkdir()
    fd = os.open(top, os.O_RDONLY)
    for i in range(100_000):
        os.close(os.open(str(i), os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
    for i in range(5000):
        os.mkdir(f"d{i}", dir_fd=fd)
    os.close(fd)
    started = time.monotonic()
    done = remove_soon(top, budget_s=0.05)
    assert time.monotonic() - started < 0.5 and done.unfinished, done
    assert wait_for_cleaner(timeout_s=60) and not top.exists()


def test_stale_directories_of_a_dead_kgen_are_swept(tmp_path):
    from verifier.cleanup import owned_prefix, stale_dirs

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    mine = tmp_path / (owned_prefix("kgen-exchange") + "live")
    theirs = tmp_path / (owned_prefix("kgen-exchange").replace(f".{os.getpid()}-", f".{pid}-") + "dead")
    young = tmp_path / (owned_prefix("kgen-exchange").replace(f".{os.getpid()}-", f".{pid}-") + "young")
    for d in (mine, theirs, young):
        d.mkdir()
    os.utime(theirs, (time.time() - 3600, time.time() - 3600))
    os.utime(mine, (time.time() - 3600, time.time() - 3600))
    assert stale_dirs(tmp_path) == [str(theirs)]
