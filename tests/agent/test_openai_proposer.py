"""The LLM proposer against a real HTTP server on loopback (tests/agent/openai_server.py); the client is not mocked."""

import dataclasses
import socket
import time

import pytest

from agent.proposers.openai.pricing import Price, Prices
from agent.proposers.openai.prompting import render_messages
from agent.analysis import Analysis
from agent.proposers.base import AttemptSummary, ProposeContext, ProposerError
from agent.proposers.openai import OpenAIConfig, OpenAIProposer

TASK_SOURCE = "import torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n        return x.relu()\n"
CANDIDATE = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    pass\n"
REPLY = f"A Triton ReLU:\n\n```python\n{CANDIDATE}```\n"
# as a user's KGEN_PRICES file gives it: a local endpoint is billed only at the user's own prices
PRICES = Prices({"scripted-model": Price(input_per_mtok=2.0, output_per_mtok=8.0)}, own=frozenset({"scripted-model"}))


def context(n: int = 1, **overrides) -> ProposeContext:
    fields = dict(task_name="relu", task_source=TASK_SOURCE, backend="triton", analysis=Analysis(), round=1, n=n)
    fields.update(overrides)
    return ProposeContext(**fields)


def proposer_for(server, **overrides) -> OpenAIProposer:
    options = dict(model="scripted-model", base_url=server.base_url, backoff_s=0.01, max_backoff_s=0.05,
                   timeout_s=5.0, prices=PRICES)
    options.update(overrides)
    return OpenAIProposer(OpenAIConfig(**options))


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_code_in_the_reply_becomes_the_source(api_key, openai_server):
    server = openai_server([REPLY])
    [proposal] = proposer_for(server).propose(context())
    assert proposal.source == CANDIDATE
    assert proposal.repair == ""
    assert proposal.response == REPLY


def test_reply_without_code_is_a_proposal_with_a_repair(api_key, openai_server):
    server = openai_server(["I think tiling would help."])
    [proposal] = proposer_for(server).propose(context())
    assert proposal.source is None
    assert "no ```python block" in proposal.repair


def test_rendered_prompt_is_sent_and_recorded(api_key, openai_server):
    server = openai_server([REPLY])
    ctx = context(history=[AttemptSummary(1, "compile_error", "bad kernel", None, None, feedback="error: NEEDLE-42")])
    [proposal] = proposer_for(server).propose(ctx)
    assert server.requests[0].body["messages"] == render_messages(ctx)
    assert TASK_SOURCE.strip() in proposal.prompt
    assert "NEEDLE-42" in proposal.prompt


def test_rate_limited_twice_then_served(api_key, openai_server):
    server = openai_server([{"status": 429, "retry_after": "0"}, {"status": 429}, REPLY])
    [proposal] = proposer_for(server).propose(context())
    assert proposal.source == CANDIDATE
    assert len(server.requests) == 3


def test_retry_after_is_honoured_up_to_the_cap(api_key, openai_server):
    server = openai_server([{"status": 429, "retry_after": "3600"}, REPLY])
    start = time.monotonic()
    [proposal] = proposer_for(server, max_backoff_s=0.2).propose(context())
    elapsed = time.monotonic() - start
    assert proposal.source == CANDIDATE
    assert 0.2 <= elapsed < 3.0


def test_server_errors_forever_raise_after_max_retries(api_key, openai_server):
    server = openai_server([{"status": 500, "body": "upstream model crashed"}] * 10)
    with pytest.raises(ProposerError) as raised:
        proposer_for(server, max_retries=2).propose(context())
    message = str(raised.value)
    assert len(server.requests) == 3
    assert server.base_url in message
    assert "HTTP 500" in message and "upstream model crashed" in message
    assert api_key not in message


def test_client_error_is_not_retried(api_key, openai_server):
    server = openai_server([{"status": 404, "body": "model 'scripted-model' does not exist"}, REPLY])
    with pytest.raises(ProposerError, match="does not exist"):
        proposer_for(server).propose(context())
    assert len(server.requests) == 1


def test_used_up_quota_is_not_retried(api_key, openai_server):
    server = openai_server([{"status": 429, "code": "insufficient_quota", "body": "You exceeded your quota"}, REPLY])
    with pytest.raises(ProposerError, match="quota"):
        proposer_for(server).propose(context())
    assert len(server.requests) == 1


def test_closed_port_raises_naming_the_endpoint(api_key):
    url = closed_port_url()
    with pytest.raises(ProposerError) as raised:
        OpenAIProposer(OpenAIConfig(model="m", base_url=url, backoff_s=0.01, max_retries=1)).propose(context())
    assert url in str(raised.value)
    assert "APIConnectionError" in str(raised.value)


def test_dropped_connection_is_retried(api_key, openai_server):
    server = openai_server([{"drop": True}, REPLY])
    [proposal] = proposer_for(server).propose(context())
    assert proposal.source == CANDIDATE
    assert len(server.requests) == 2


def test_timeout_is_retried(api_key, openai_server):
    server = openai_server([{"reply": REPLY, "delay_s": 1.0}, REPLY])
    [proposal] = proposer_for(server, timeout_s=0.3).propose(context())
    assert proposal.source == CANDIDATE
    assert len(server.requests) == 2


def test_n_samples_in_one_request_when_supported(api_key, openai_server):
    server = openai_server([{"reply": [REPLY, "no code", REPLY]}])
    proposals = proposer_for(server).propose(context(n=3))
    assert len(server.requests) == 1
    assert server.requests[0].body["n"] == 3
    assert [p.source is not None for p in proposals] == [True, False, True]


def test_n_refused_falls_back_to_parallel_single_requests(api_key, openai_server):
    server = openai_server([{"reply": REPLY, "delay_s": 0.3}] * 3, supports_n=False)
    proposals = proposer_for(server).propose(context(n=3))
    assert [p.source for p in proposals] == [CANDIDATE] * 3
    singles = server.requests[1:]
    assert server.requests[0].body["n"] == 3          # the refused request
    assert len(singles) == 3 and all("n" not in r.body for r in singles)
    assert server.max_in_flight > 1                   # they overlapped


def test_refused_n_is_not_asked_again(api_key, openai_server):
    server = openai_server([REPLY] * 4, supports_n=False)
    proposer = proposer_for(server)
    proposer.propose(context(n=2))
    proposer.propose(context(n=2))
    assert [r.body.get("n") for r in server.requests] == [2, None, None, None, None]


def test_fewer_choices_are_topped_up_with_single_requests(api_key, openai_server):
    server = openai_server([{"reply": [REPLY]}, REPLY, REPLY])
    proposals = proposer_for(server).propose(context(n=3))
    assert len(proposals) == 3
    assert len(server.requests) == 3


def test_refused_max_tokens_becomes_max_completion_tokens(api_key, openai_server):
    server = openai_server([REPLY], rejects=("max_tokens",))
    [proposal] = proposer_for(server, max_tokens=1234).propose(context())
    assert proposal.source == CANDIDATE
    assert server.requests[-1].body["max_completion_tokens"] == 1234
    assert "max_tokens" not in server.requests[-1].body


def test_refused_temperature_is_left_out(api_key, openai_server):
    server = openai_server([REPLY], rejects=("temperature",))
    [proposal] = proposer_for(server).propose(context())
    assert proposal.source == CANDIDATE
    assert "temperature" not in server.requests[-1].body


def test_tokens_and_cost_accumulate(api_key, openai_server):
    usage = {"prompt_tokens": 1000, "completion_tokens": 300}
    server = openai_server([{"reply": [REPLY, REPLY], "usage": usage}, {"reply": REPLY, "usage": usage}])
    proposer = proposer_for(server)
    first = proposer.propose(context(n=2))
    second = proposer.propose(context(n=1))
    assert [p.prompt_tokens for p in first + second] == [500, 500, 1000]
    assert [p.completion_tokens for p in first + second] == [150, 150, 300]
    assert proposer.prompt_tokens == 2000 and proposer.completion_tokens == 600
    expected = 2 * (1000 * 2.0 + 300 * 8.0) / 1e6
    assert proposer.cost_usd == pytest.approx(expected)
    assert sum(p.cost_usd for p in first + second) == pytest.approx(expected)


def test_unknown_model_costs_zero_with_a_note(api_key, openai_server):
    server = openai_server([{"reply": REPLY, "usage": {"prompt_tokens": 1000, "completion_tokens": 300}}])
    proposer = proposer_for(server, model="my-local-coder")
    [proposal] = proposer.propose(context())
    assert proposal.cost_usd == 0.0 and proposer.cost_usd == 0.0
    assert proposal.prompt_tokens == 1000
    assert "unknown price" in proposal.note


def test_key_goes_in_the_authorization_header_only(api_key, openai_server):
    server = openai_server([REPLY])
    proposer = proposer_for(server)
    [proposal] = proposer.propose(context())
    assert server.requests[0].authorization == f"Bearer {api_key}"
    assert api_key not in repr(proposal)
    assert all(api_key not in str(value) for value in dataclasses.asdict(proposal).values())
    assert api_key not in repr(proposer) + repr(proposer.config) + repr(vars(proposer))


def test_missing_key_is_refused_up_front_for_openais_endpoint(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ProposerError, match="OPENAI_API_KEY"):
        OpenAIProposer(OpenAIConfig(model="gpt-4.1"))


def test_a_local_server_needs_no_key(openai_server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    server = openai_server([REPLY])
    proposer = OpenAIProposer(OpenAIConfig(model="m", base_url=server.base_url))
    [proposal] = proposer.propose(context())
    assert proposal.source
    assert server.requests[0].authorization == "Bearer no-key"


def test_a_missing_piece_of_the_http_stack_is_refused_up_front(api_key, monkeypatch):
    # as on a GPU machine whose carried wheels lacked truststore: the first request died mid-run
    import openai

    def broken_client(**kwargs):
        raise ModuleNotFoundError("No module named 'truststore'", name="truststore")

    monkeypatch.setattr(openai, "OpenAI", broken_client)
    with pytest.raises(ProposerError, match="cannot load its HTTP stack.*truststore"):
        OpenAIProposer(OpenAIConfig(model="m", base_url="http://127.0.0.1:9/v1"))


def test_base_url_falls_back_to_the_environment(api_key, openai_server, monkeypatch):
    server = openai_server([REPLY])
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    [proposal] = OpenAIProposer(OpenAIConfig(model="m", prices=PRICES)).propose(context())
    assert proposal.source == CANDIDATE
    assert len(server.requests) == 1


def test_exhausted_script_is_a_clear_server_error(api_key, openai_server):
    server = openai_server([])
    with pytest.raises(ProposerError, match="script exhausted"):
        proposer_for(server, max_retries=0).propose(context())


def test_a_local_model_named_like_an_openai_one_is_not_billed_at_openais_rate(api_key, openai_server):
    from agent.proposers.openai.pricing import load_prices

    usage = {"prompt_tokens": 1000, "completion_tokens": 300}
    server = openai_server([{"reply": REPLY, "usage": usage}])
    proposer = OpenAIProposer(OpenAIConfig(model="gpt-4.1", base_url=server.base_url, prices=load_prices()))
    [proposal] = proposer.propose(context())
    assert proposal.cost_usd == 0.0 and "unknown price" in proposal.note
    official = OpenAIProposer(OpenAIConfig(model="gpt-4.1", prices=load_prices()))
    assert official.price is not None and official.price.input_per_mtok > 0
