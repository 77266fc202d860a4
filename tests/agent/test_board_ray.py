"""`kgen leaderboard --executor ray` on a real local Ray cluster: same rows as local, GPU actors, faults, the key.

One cluster for the module (4 CPUs, 2 fake GPUs, no dashboard): on this CPU
machine each actor owns a fake GPU (Ray sets its CUDA_VISIBLE_DEVICES) and
verifies under the Triton interpreter. The cluster starts while this process
holds an API key, as a user's driver would; a watcher thread reads every GPU
actor's own account of itself (its environment, /proc/PID/environ, every
argument it was sent) while the boards run. The boards are the heuristic
proposer over tasks/suite-small.txt (four tasks) or its softmax alone.

    .venv/bin/python -m pytest tests/agent/test_board_ray.py -q       # about 4 minutes here
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agent.board.files import load_board
from agent.board.records import FINISHED_RUN, INTERRUPTED, LeaderboardError
from agent.cli import main
from agent.store import Store

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tasks" / "suite-small.txt"
SECRET = f"sk-kgen-ray-test-{secrets.token_hex(8)}"


def kgen(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def board_argv(suite: Path, results: Path, name: str, *extra: str) -> list[str]:
    return ["leaderboard", str(suite), "--name", name, "--results", str(results), "--device", "cpu",
            "--proposer", "heuristic", "--max-iters", "2", *extra]


def one_task_suite(folder: Path) -> Path:
    """softmax alone: the fault and Ctrl-C tests need one task's loop, and each task costs time here."""
    folder.mkdir(parents=True, exist_ok=True)
    suite = folder / "one.txt"
    suite.write_text(f"{ROOT / 'tasks' / 'softmax.py'}\n")
    return suite


@contextlib.contextmanager
def holding_the_key():
    """This process holds an API key (and a token) for the block, as a user's driver does."""
    saved = {n: os.environ.get(n) for n in ("OPENAI_API_KEY", "KGEN_TEST_TOKEN")}
    os.environ["OPENAI_API_KEY"] = SECRET
    os.environ["KGEN_TEST_TOKEN"] = SECRET
    try:
        yield
    finally:
        for n, v in saved.items():
            if v is None:
                os.environ.pop(n, None)
            else:
                os.environ[n] = v


class Watcher:
    """Reads every live GPU actor's describe() (and its /proc environ) while a board runs; can kill one."""

    def __init__(self, kill_when_busy_with: str | None = None):
        self.seen: dict[str, dict] = {}
        self.killed: str | None = None
        self.kill_when = kill_when_busy_with
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> "Watcher":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _watch(self) -> None:
        import ray

        from agent.board.ray import INSPECT, NAMESPACE

        while not self._stop.wait(0.3):
            for entry in ray.util.list_named_actors(all_namespaces=True):
                if entry.get("namespace") != NAMESPACE:
                    continue
                try:
                    actor = ray.get_actor(entry["name"], namespace=NAMESPACE)
                    info = ray.get(actor.describe.options(concurrency_group=INSPECT).remote(), timeout=20)
                except Exception:   # noqa: BLE001 - it ended between the listing and the call
                    continue
                try:
                    info["proc_environ"] = Path(f"/proc/{info['pid']}/environ").read_bytes().decode(errors="replace")
                except OSError:
                    info["proc_environ"] = ""
                self.seen[entry["name"]] = info
                if self.kill_when and self.killed is None and info["busy"] == self.kill_when:
                    ray.kill(actor)
                    self.killed = entry["name"]


@pytest.fixture(scope="module")
def cluster():
    """A local Ray cluster for the module, started while this process holds the key; its GCS address."""
    pytest.importorskip("ray", reason="Ray is not installed (pip install 'kgen[ray]')")
    import ray

    from agent.board.ray import connect

    with holding_the_key():
        connect(None, num_cpus=4, num_gpus=2, include_dashboard=False, object_store_memory=80 * 1024 * 1024)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


@pytest.fixture(scope="module")
def local_board(tmp_path_factory):
    results = tmp_path_factory.mktemp("local") / "results"
    code, _, err = kgen(*board_argv(SUITE, results, "small", "--workers", "2"))
    assert code == 0, err
    return results


@pytest.fixture(scope="module")
def ray_board(cluster, tmp_path_factory):
    """The same board through --executor ray: (results, exit code, stderr, what the actors said of themselves)."""
    results = tmp_path_factory.mktemp("ray") / "results"
    with holding_the_key(), Watcher() as watcher:
        code, _, err = kgen(*board_argv(SUITE, results, "small", "--executor", "ray", "--ray-address", cluster))
    return results, code, err, watcher.seen


def rows_of(results: Path, name: str = "small"):
    return {r.task: r for r in load_board(results, name).rows}


@pytest.mark.slow
def test_a_ray_board_gives_the_local_boards_rows(local_board, ray_board):
    results, code, err, _ = ray_board
    assert code == 0, err
    figures = lambda rows: {t: (r.status, r.correct, r.attempts) for t, r in rows.items()}   # noqa: E731
    assert figures(rows_of(results)) == figures(rows_of(local_board))


@pytest.mark.slow
def test_two_loops_per_gpu_run_four_tasks_at_once_on_two_gpus(ray_board):
    lines = ray_board[2].splitlines()
    started = [i for i, line in enumerate(lines) if ": started on the Ray cluster (loop " in line]
    finished = [i for i, line in enumerate(lines) if ": succeeded" in line or ": failed" in line]
    assert len(started) == 4 and all(" of 4)" in lines[i] for i in started)
    assert max(started) < min(finished), "a task waited for another's loop to end"


@pytest.mark.slow
def test_the_actors_leave_no_exchange_directory_behind(ray_board):
    # ray.kill is a SIGKILL: the pool first has each actor stop its warm candidate process and remove its files
    from verifier.judge import exchange_root

    _, code, err, seen = ray_board
    assert code == 0, err
    pids = {info["pid"] for info in seen.values()}
    assert pids
    left = [p.name for p in Path(exchange_root()).glob("kgen-exchange-*")
            if any(f".{pid}-" in p.name for pid in pids)]
    assert left == []


def test_each_ray_row_names_the_node_and_gpu_it_ran_on(ray_board):
    results = ray_board[0]
    for row in rows_of(results).values():
        assert "GPU " in row.worker and row.worker.split(" GPU")[0], row.worker
    assert "| where |" in (results / "leaderboards" / "small" / "leaderboard.md").read_text()


@pytest.mark.slow
def test_two_actors_own_different_gpus(ray_board):
    seen = ray_board[3]
    assert len(seen) >= 2
    assert len({tuple(i["gpu_ids"]) for i in seen.values()}) >= 2
    assert len({i["cuda_visible_devices"] for i in seen.values()}) >= 2
    assert all(i["cuda_visible_devices"] for i in seen.values())


@pytest.mark.slow
def test_the_key_reaches_no_actor(ray_board):
    seen = ray_board[3]
    assert seen and all(i["received"] for i in seen.values())
    assert any(any(r.startswith("verify(") for r in i["received"]) for i in seen.values())
    for info in seen.values():
        assert SECRET not in json.dumps(info["env"]) and "OPENAI_API_KEY" not in info["env"]
        assert SECRET not in info["proc_environ"], "the actor's process started with the key"
        assert not any(SECRET in r for r in info["received"])


@pytest.mark.slow
def test_an_actor_started_with_the_key_scrubs_it(cluster):
    import ray

    from agent.board.ray import GpuActor

    env = {"OPENAI_API_KEY": SECRET, "HF_TOKEN": SECRET, "KGEN_PLAIN": "kept"}
    actor = ray.remote(GpuActor).options(num_gpus=0, num_cpus=0, runtime_env={"env_vars": env}).remote("driver")
    try:
        info = ray.get(actor.describe.remote(), timeout=120)
    finally:
        ray.kill(actor)
    assert SECRET not in json.dumps(info["env"])
    assert set(info["scrubbed"]) >= {"OPENAI_API_KEY", "HF_TOKEN"}
    assert info["env"].get("KGEN_PLAIN") == "kept"


@pytest.mark.slow
def test_a_killed_actor_is_a_crashed_attempt_and_the_board_finishes(cluster, tmp_path):
    suite = one_task_suite(tmp_path)
    results = tmp_path / "results"
    with Watcher(kill_when_busy_with="verify") as watcher:
        code, _, err = kgen(*board_argv(suite, results, "killed", "--executor", "ray", "--ray-address", cluster))
    assert watcher.killed is not None, "no actor was seen verifying"
    assert code == 0, err
    assert all(r.status in FINISHED_RUN for r in rows_of(results, "killed").values())
    store = Store(results)
    crashed = [a for run in store.list_runs() for a in store.load_attempts(run.run_id) if a.status == "crashed"]
    assert len(crashed) == 1
    host = watcher.seen[watcher.killed]["host"]
    assert crashed[0].reason.startswith(f"the GPU actor on {host} GPU ") and " died: " in crashed[0].reason
    assert len(watcher.seen) >= 3, "the lost actor was not replaced"


@pytest.mark.slow
def test_ctrl_c_stops_a_ray_board_and_its_name_resumes_it(cluster, tmp_path):
    suite = one_task_suite(tmp_path)
    results = tmp_path / "results"
    argv = board_argv(suite, results, "stopped", "--executor", "ray", "--ray-address", cluster)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["PYTHONPATH"] = str(ROOT)
    log = tmp_path / "driver.log"
    with open(log, "w") as out:
        driver = subprocess.Popen([sys.executable, "-m", "agent", *argv], cwd=ROOT, env=env, stdout=out,
                                  stderr=subprocess.STDOUT)
    jobs = results / "leaderboards" / "stopped" / "jobs"
    try:
        deadline = time.monotonic() + 180
        while not list(jobs.glob("*.started.json")) and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert driver.poll() is None, log.read_text()
        driver.send_signal(signal.SIGINT)
        code = driver.wait(timeout=120)
    finally:
        if driver.poll() is None:
            driver.kill()
    assert code == 130, log.read_text()
    stopped = rows_of(results, "stopped")
    interrupted = [t for t, r in stopped.items() if r.status == INTERRUPTED]
    assert interrupted, {t: r.status for t, r in stopped.items()}
    runs_before = {r.task: r.run_id for r in Store(results).list_runs()}

    code, _, err = kgen(*board_argv(suite, results, "stopped", "--executor", "ray", "--ray-address", cluster))
    assert code == 0, err
    resumed = rows_of(results, "stopped")
    assert all(r.status in FINISHED_RUN for r in resumed.values())
    for task in interrupted:   # continued, not started again
        if task in runs_before:
            assert resumed[task].run_id == runs_before[task]
    assert len(Store(results).list_runs()) == len(resumed)


@pytest.mark.slow
def test_an_accelerator_type_the_cluster_lacks_is_refused_at_once(cluster, tmp_path):
    code, _, err = kgen(*board_argv(SUITE, tmp_path / "results", "typed", "--executor", "ray", "--ray-address",
                                    cluster, "--accelerator-type", "B300"))
    assert code == 2 and "--accelerator-type B300: no live node" in err


def test_without_ray_the_error_says_how_to_install_it(monkeypatch):
    from agent.board.ray import import_ray

    monkeypatch.setitem(sys.modules, "ray", None)   # `import ray` raises ImportError
    with pytest.raises(LeaderboardError, match=r"pip install 'kgen\[ray\]'"):
        import_ray()


def test_ray_flags_without_the_ray_executor_are_refused(tmp_path):
    code, _, err = kgen(*board_argv(SUITE, tmp_path / "results", "x", "--ray-address", "auto"))
    assert code == 2 and "need --executor ray" in err


def test_secret_names_are_keys_tokens_secrets_credentials_and_openai_settings():
    from agent.board.ray import secret_names

    env = {"OPENAI_BASE_URL": "u", "AWS_SECRET_ACCESS_KEY": "s", "HF_TOKEN": "t", "PATH": "/bin",
           "CUDA_VISIBLE_DEVICES": "0", "GOOGLE_APPLICATION_CREDENTIALS": "c", "RAY_AUTH_TOKEN": "r"}
    assert secret_names(env) == ["AWS_SECRET_ACCESS_KEY", "GOOGLE_APPLICATION_CREDENTIALS", "HF_TOKEN",
                                 "OPENAI_BASE_URL", "RAY_AUTH_TOKEN"]


class _Answer:
    """An actor method's .remote() that answers at once (check_models' own logic, without a cluster)."""

    def __init__(self, value):
        self.value = value

    def remote(self, *args):
        return self.value


def test_actors_on_two_gpu_models_are_refused():
    from agent.board.ray import ActorPool, Slot

    class Ray:
        @staticmethod
        def get(refs, timeout=None):
            return list(refs)

    pool = ActorPool.__new__(ActorPool)   # its actors made by hand: two nodes, two GPU models
    pool.ray, pool._lock = Ray(), threading.Lock()
    pool.slots = [Slot(type("A", (), {"machine": _Answer(("cuda", gpu))})(), {"host": h, "gpu_ids": ["0"]})
                  for h, gpu in (("a", "NVIDIA H100 80GB HBM3"), ("b", "NVIDIA H200"))]
    with pytest.raises(LeaderboardError, match=r"more than one device \(NVIDIA H100 80GB HBM3, NVIDIA H200\).*"
                                               r"--accelerator-type"):
        pool.check_models("auto")
    pool.slots = pool.slots[1:]
    assert pool.check_models("auto") == ("cuda", "NVIDIA H200") and pool.model == "NVIDIA H200"
