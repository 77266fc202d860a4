"""The optimize loop end to end: real verifier, real OpenAI proposer, a scripted endpoint on loopback.

Each test plays a short script of model replies through the loop on a tiny
task (y = 2x + 1 on 37 x 53 under the Triton interpreter) and checks what the
loop did with them: repairs, stopping, the store, checkpoint and resume.
Every verification is a fresh sandboxed process (~3 s here), so scripts are short.

    .venv/bin/python -m pytest tests/agent/test_graph.py -q
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from agent.config import OptimizeConfig
from agent.graph import optimize
from agent.proposers.base import Proposer
from agent.proposers.openai import OpenAIConfig, OpenAIProposer
from agent.store import Store
from verifier.verify import verify
from verifier.candidate import PRESTART_PHASE

PROFILER_FIXTURES = Path(__file__).resolve().parents[1] / "profiler" / "fixtures"

TASK = '''"""y = 2x + 1, fp32: the loop's test task."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0 + 1.0


def get_inputs():
    return [torch.randn(4096, 1024)]


def get_init_inputs():
    return []


def get_small_inputs():
    return [torch.randn(37, 53)]
'''

GOOD = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def affine_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, x * 2.0 + 1.0, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        affine_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y
'''
GOOD_SMALL_BLOCKS = GOOD.replace("1024", "256")
MISMATCH = GOOD.replace("x * 2.0 + 1.0, mask", "x * 2.0 + 1.5, mask")
SYNTAX_ERROR = GOOD.replace("def forward(self, x):", "def forward(self, x)")


def reply(code: str) -> str:
    return f"Here is the kernel.\n\n```python\n{code}```\n"


@pytest.fixture
def task_path(tmp_path) -> Path:
    path = tmp_path / "affine.py"
    path.write_text(TASK)
    return path


def make_config(tmp_path, **changes) -> OptimizeConfig:
    return OptimizeConfig(results_dir=str(tmp_path / "results"), device="cpu", **changes)


def make_proposer(server, **options) -> OpenAIProposer:
    return OpenAIProposer(OpenAIConfig(model="test-model", base_url=server.base_url, **options))


def user_prompt(request) -> str:
    return "\n".join(m["content"] for m in request.body["messages"] if m["role"] == "user")


def assert_no_key_under(root: Path, key: str) -> None:
    files = [p for p in root.rglob("*") if p.is_file()]
    assert files
    for path in files:
        assert key.encode() not in path.read_bytes(), f"API key found in {path}"


def test_compile_error_then_fix_succeeds(tmp_path, task_path, api_key, openai_server):
    server = openai_server([reply(SYNTAX_ERROR), reply(GOOD)])
    config = make_config(tmp_path)
    run = optimize(task_path, config, proposer=make_proposer(server))

    store = Store(config.results_dir)
    attempts = store.load_attempts(run.run_id)
    assert [a.status for a in attempts] == ["compile_error", "ok"]
    assert run.status == "succeeded" and run.best_attempt == 2
    assert "nothing was timed" in run.stop_reason
    assert store.best_source(run.run_id) == GOOD
    assert "not valid Python" in user_prompt(server.requests[1])     # the compiler's message went back
    assert_no_key_under(Path(config.results_dir), api_key)


def test_mismatch_feedback_reaches_the_next_prompt(tmp_path, task_path, api_key, openai_server):
    server = openai_server([reply(MISMATCH), reply(GOOD)])
    config = make_config(tmp_path)
    run = optimize(task_path, config, proposer=make_proposer(server))

    store = Store(config.results_dir)
    first = store.load_attempt(run.run_id, 1)
    assert first.status == "mismatch" and first.feedback
    second_prompt = user_prompt(server.requests[1])
    assert first.feedback.strip().splitlines()[0] in second_prompt
    assert "x * 2.0 + 1.5" in second_prompt                          # its code, for repair
    assert run.status == "succeeded"
    assert_no_key_under(Path(config.results_dir), api_key)


def fixture_diagnosis():
    from profiler.diagnose import diagnose
    from profiler.ncu import parse_raw_csv

    return diagnose(parse_raw_csv((PROFILER_FIXTURES / "softmax_raw.csv").read_text()))


def test_diagnosis_of_the_best_reaches_the_next_prompt(tmp_path, task_path, api_key, openai_server):
    # Without a GPU the loop stops at the first correct kernel; --keep-going asks for the whole budget.
    server = openai_server([reply(GOOD), reply(GOOD_SMALL_BLOCKS)])
    config = make_config(tmp_path, keep_going=True, max_iters=2)
    profiled = []

    def profile_fn(task, source):
        profiled.append(source)
        return fixture_diagnosis()

    run = optimize(task_path, config, proposer=make_proposer(server), profile_fn=profile_fn)

    store = Store(config.results_dir)
    assert [a.status for a in store.load_attempts(run.run_id)] == ["ok", "ok"]
    assert profiled == [GOOD]                                       # only a new best is profiled
    assert store.load_attempt(run.run_id, 1).profile.bound == "memory"
    assert "long_scoreboard" in user_prompt(server.requests[1])
    # untimed, the second correct kernel is no better than the first
    assert run.best_attempt == 1 and run.status == "succeeded"
    assert "--max-iters 2" in run.stop_reason
    [row] = [r for r in store.attempt_rows(run.run_id) if r["number"] == 1]
    assert row["top_stall"] == "long_scoreboard"


def test_replies_without_a_usable_kernel_are_repaired(tmp_path, task_path, api_key, openai_server):
    wrong_class = reply(GOOD.replace("class ModelNew", "class FastModel"))
    truncated = "```python\n" + GOOD[: len(GOOD) // 2]
    server = openai_server(["I would use a Triton kernel here.", wrong_class, truncated, reply(GOOD)])
    config = make_config(tmp_path)
    verified = []

    def counting_verify(task, source, cfg):
        verified.append(source)
        return verify(task, source, cfg)

    run = optimize(task_path, config, proposer=make_proposer(server), verify_fn=counting_verify)

    store = Store(config.results_dir)
    attempts = store.load_attempts(run.run_id)
    assert [a.status for a in attempts] == ["no_code", "no_code", "no_code", "ok"]
    assert verified == [GOOD]                                        # no reply without code was verified
    assert "no ```python block" in user_prompt(server.requests[1])
    assert "no class ModelNew" in user_prompt(server.requests[2])
    assert "cut off" in user_prompt(server.requests[3])
    assert store.attempt_text(run.run_id, 1, "response.md") == "I would use a Triton kernel here."
    assert run.status == "succeeded"


def test_rate_limits_are_retried(tmp_path, task_path, api_key, openai_server):
    server = openai_server([{"status": 429, "retry_after": "0"}, {"status": 429, "retry_after": "0"}, reply(GOOD)])
    config = make_config(tmp_path)
    run = optimize(task_path, config, proposer=make_proposer(server))
    assert len(server.requests) == 3
    assert run.status == "succeeded" and run.attempts == 1


def test_endpoint_down_fails_the_run_clearly(tmp_path, task_path, api_key, openai_server):
    server = openai_server([])
    proposer = make_proposer(server, max_retries=1, backoff_s=0.01)
    server.stop()                                                     # nothing listens on the port now
    config = make_config(tmp_path)
    run = optimize(task_path, config, proposer=proposer)

    assert run.status == "failed"
    assert run.stop_reason.startswith("the proposer failed:") and server.base_url in run.stop_reason
    stored = Store(config.results_dir).load_run(run.run_id)
    assert stored.status == "failed" and stored.attempts == 0
    assert api_key not in run.stop_reason


def test_interrupted_run_resumes_without_repeating_work(tmp_path, task_path, api_key, openai_server):
    server = openai_server([reply(MISMATCH), reply(SYNTAX_ERROR), reply(GOOD)])
    config = make_config(tmp_path)
    verified = []

    def interrupting_verify(task, source, cfg):
        verified.append(source)
        if len(verified) == 3:
            raise KeyboardInterrupt        # Ctrl-C while the third candidate is being checked
        return verify(task, source, cfg)

    run = optimize(task_path, config, proposer=make_proposer(server), verify_fn=interrupting_verify)
    assert run.status == "interrupted" and f"--resume {run.run_id}" in run.stop_reason
    assert len(server.requests) == 3 and run.attempts == 2

    resumed_verified = []

    def counting_verify(task, source, cfg):
        resumed_verified.append(source)
        return verify(task, source, cfg)

    resumed = optimize(None, config, resume=run.run_id, proposer=make_proposer(server), verify_fn=counting_verify)

    assert len(server.requests) == 3                                   # no LLM call repeated
    assert resumed_verified == [GOOD]                                  # attempts 1 and 2 were not re-verified
    assert resumed.run_id == run.run_id and resumed.status == "succeeded" and resumed.best_attempt == 3
    store = Store(config.results_dir)
    assert [a.status for a in store.load_attempts(run.run_id)] == ["mismatch", "compile_error", "ok"]
    with sqlite3.connect(store.index_path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM attempts WHERE run_id = ?", (run.run_id,)).fetchone()[0] == 3


def test_interrupted_round_keeps_its_finished_candidates(tmp_path, task_path, api_key, openai_server):
    # Two candidates in one round: the one verified before Ctrl-C is stored and not checked again.
    server = openai_server([{"reply": [reply(MISMATCH), reply(GOOD)]}])
    config = make_config(tmp_path, candidates=2)
    mismatch_checked = threading.Event()
    verified = []

    def interrupting_verify(task, source, cfg):
        verified.append(source)
        if source == GOOD:
            mismatch_checked.wait(60)
            time.sleep(0.5)                 # let the loop store the mismatch first
            raise KeyboardInterrupt
        result = verify(task, source, cfg)
        mismatch_checked.set()
        return result

    run = optimize(task_path, config, proposer=make_proposer(server), verify_fn=interrupting_verify)
    assert run.status == "interrupted"
    assert [a.status for a in Store(config.results_dir).load_attempts(run.run_id)] == ["mismatch"]

    resumed_verified = []

    def counting_verify(task, source, cfg):
        resumed_verified.append(source)
        return verify(task, source, cfg)

    resumed = optimize(None, config, resume=run.run_id, proposer=make_proposer(server), verify_fn=counting_verify)
    assert resumed_verified == [GOOD] and len(server.requests) == 1
    assert resumed.status == "succeeded" and resumed.best_attempt == 2


def test_finished_run_continues_with_a_larger_budget(tmp_path, task_path, api_key, openai_server):
    server = openai_server([reply(MISMATCH), reply(GOOD)])
    config = make_config(tmp_path, max_iters=1)
    run = optimize(task_path, config, proposer=make_proposer(server))
    assert run.status == "failed" and "--max-iters 1" in run.stop_reason and run.best_attempt is None

    resumed = optimize(None, config.replace(max_iters=2), resume=run.run_id, proposer=make_proposer(server))
    assert resumed.status == "succeeded" and resumed.best_attempt == 2 and resumed.rounds == 2
    assert len(server.requests) == 2


def test_token_budget_stops_the_loop(tmp_path, task_path, api_key, openai_server):
    usage = {"prompt_tokens": 900, "completion_tokens": 200}
    server = openai_server([{"reply": reply(MISMATCH), "usage": usage}, {"reply": reply(GOOD), "usage": usage}])
    config = make_config(tmp_path, budget_tokens=1000)
    run = optimize(task_path, config, proposer=make_proposer(server))
    assert run.status == "failed" and "token budget" in run.stop_reason
    assert run.prompt_tokens == 900 and run.completion_tokens == 200
    assert len(server.requests) == 1


def test_run_record_holds_the_resolved_proposer_not_the_key(tmp_path, task_path, api_key, openai_server):
    server = openai_server([reply(GOOD)])
    config = make_config(tmp_path)
    run = optimize(task_path, config, proposer=make_proposer(server))
    data = json.loads((Store(config.results_dir).run_dir(run.run_id) / "run.json").read_text())
    assert data["proposer"] == "openai" and data["model"] == "test-model"
    assert data["config"]["model"] == "test-model" and data["config"]["base_url"] == server.base_url
    assert api_key not in json.dumps(data)
    assert all(api_key not in json.dumps(r.body) for r in server.requests)


# ---- the loop's pre-started workers


def worker_processes() -> list[int]:
    """Live verifier workers started by this process."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z" and b"verifier.candidate" in cmdline:
            found.append(int(entry))
    return found


@pytest.fixture
def pools(monkeypatch) -> list:
    """Every WorkerPool the loop makes, held here: only their close() can have stopped their workers."""
    import verifier.verify as verify_mod

    made = []

    class HeldPool(verify_mod.WorkerPool):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(verify_mod, "WorkerPool", HeldPool)
    return made


def test_the_loop_verifies_on_prestarted_workers_and_leaves_none(tmp_path, task_path, api_key, openai_server,
                                                                    pools):
    server = openai_server([reply(MISMATCH), reply(GOOD)])
    config = make_config(tmp_path)
    run = optimize(task_path, config, proposer=make_proposer(server))
    attempts = Store(config.results_dir).load_attempts(run.run_id)
    assert [a.status for a in attempts] == ["mismatch", "ok"] and run.status == "succeeded"
    assert all(PRESTART_PHASE in a.verify.phases for a in attempts)
    assert len(pools) == 1 and worker_processes() == []


def test_no_worker_starts_before_the_analysis_is_done(tmp_path, task_path, api_key, openai_server, monkeypatch,
                                                     pools):
    # the analysis may time baselines on the GPU: no worker's start-up may run beside it
    import agent.graph

    real, during = agent.graph.analyze_task, []

    def analysis(*args, **kwargs):
        during.append(worker_processes())
        return real(*args, **kwargs)

    monkeypatch.setattr(agent.graph, "analyze_task", analysis)
    server = openai_server([reply(GOOD)])
    run = optimize(task_path, make_config(tmp_path), proposer=make_proposer(server))
    assert during == [[]] and run.status == "succeeded"
    [attempt] = Store(make_config(tmp_path).results_dir).load_attempts(run.run_id)
    assert PRESTART_PHASE in attempt.verify.phases      # started after the analysis, ahead of its job


class InterruptedProposer(Proposer):
    name = "interrupted"

    def propose(self, ctx):
        raise KeyboardInterrupt


def test_an_interrupted_loop_leaves_no_worker(tmp_path, task_path, pools):
    run = optimize(task_path, make_config(tmp_path), proposer=InterruptedProposer())
    assert run.status == "interrupted"
    assert len(pools) == 1 and worker_processes() == []


def test_an_injected_verify_fn_gets_no_pool(tmp_path, task_path, api_key, openai_server, pools):
    server = openai_server([reply(GOOD)])
    run = optimize(task_path, make_config(tmp_path), proposer=make_proposer(server), verify_fn=verify)
    assert run.status == "succeeded" and pools == []


def test_an_llm_kernel_sent_again_is_not_verified_again(tmp_path, task_path, api_key, openai_server):
    server = openai_server([reply(MISMATCH), reply(MISMATCH + "\n\n"), reply(GOOD)])
    config = make_config(tmp_path)
    verified = []

    def counting_verify(task, source, cfg):
        from verifier.verify import verify

        verified.append(source)
        return verify(task, source, cfg)

    run = optimize(task_path, config, proposer=make_proposer(server), verify_fn=counting_verify)
    attempts = Store(config.results_dir).load_attempts(run.run_id)
    assert [a.status for a in attempts] == ["mismatch", "mismatch", "ok"]
    assert len(verified) == 2                                   # attempt 2 repeats attempt 1 (trailing blank lines)
    assert any("the same source as attempt 1" in f for f in attempts[1].verify.flags)
    assert run.status == "succeeded"


CUDA_ADD = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
#include <torch/extension.h>
__global__ void affine_kernel(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * 2.0f + 1.0f;
}
torch::Tensor affine(torch::Tensor x) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    affine_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
module = load_inline(name="affine", cpp_sources="torch::Tensor affine(torch::Tensor x);", cuda_sources=source,
                     functions=["affine"])


class ModelNew(nn.Module):
    def forward(self, x):
        return module.affine(x)
'''


def test_a_kernel_not_checkable_here_stops_the_loop_and_is_never_sent_back_for_repair(
        tmp_path, task_path, api_key, openai_server, monkeypatch):
    from torch.utils import cpp_extension

    # a CPU build of torch without its CUDA headers: load_inline cannot be compiled, let alone run, here
    monkeypatch.setattr(cpp_extension, "include_paths", lambda *a, **k: [str(tmp_path)])
    server = openai_server([reply(CUDA_ADD), reply(GOOD)])
    config = make_config(tmp_path, backend="cuda", max_iters=3)
    run = optimize(task_path, config, proposer=make_proposer(server))
    [attempt] = Store(config.results_dir).load_attempts(run.run_id)
    assert attempt.status == "not_checkable", attempt.reason
    assert len(server.requests) == 1, "a second round asked the LLM to repair a kernel nothing was wrong with"
    assert "not checkable on this machine" in run.stop_reason and "no CUDA headers" in run.stop_reason


def test_a_rounds_load_inline_builds_are_handed_to_the_verifier_side_by_side(monkeypatch):
    # on a GPU a round's candidates are verified one at a time; their extension builds go first, together
    from types import SimpleNamespace

    from agent.graph import OptimizeLoop
    from verifier import inline_build
    from verifier.records import VerifyConfig

    seen = []
    monkeypatch.setattr(inline_build, "prebuild_round",
                        lambda sources, device, timeout_s: seen.append((sources, device, timeout_s)) or len(sources))
    loop = SimpleNamespace(verify_config=VerifyConfig(device="cpu", timeout_s=77))
    OptimizeLoop._prebuild(loop, [{"source": "first"}, {"source": "second"}])
    assert seen == [(["first", "second"], "cpu", 77)]
