"""The LLM proposer: asks any OpenAI-compatible chat endpoint for candidate kernels.

OpenAI, vLLM, SGLang, Ollama and the like all serve POST /v1/chat/completions.
Each round renders the prompt (prompting.py), asks for `ctx.n` samples
in one request with the `n` parameter, and parses each reply into a candidate
(replies.py). Endpoints that reject `n` or return fewer choices get the
rest as parallel single requests; one that rejects `max_tokens` (OpenAI's
reasoning models) gets `max_completion_tokens`, one that rejects `temperature`
gets the model's default.

Retries are this module's own (the client's are turned off, so they can be
tested): 429, 5xx, timeouts and dropped connections are retried with
exponential backoff, honouring Retry-After up to a cap; after the last retry,
or on any other error, `ProposerError` says which endpoint failed and how.

The API key is read from OPENAI_API_KEY when a round starts and handed to the
client for that round only: it is not kept in the config, the proposer, a
proposal, a prompt record or an error message.

    OPENAI_API_KEY=... python -m agent.proposers.openai.proposer TASK.py --model gpt-4o [--base-url URL]
"""

from __future__ import annotations

import email.utils
import os
import random
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from agent.proposers.openai.prompting import messages_markdown, render_messages
from agent.proposers.openai.pricing import Prices, load_prices
from agent.proposers.base import Proposal, ProposeContext, Proposer, ProposerError
from agent.proposers.openai.replies import parse_reply

API_KEY_ENV = "OPENAI_API_KEY"
BASE_URL_ENV = "OPENAI_BASE_URL"
DEFAULT_BASE_URL = "https://api.openai.com/v1"

# Request parameters an endpoint may refuse, each with what to do instead.
_ADAPTABLE = ("n", "max_tokens", "temperature")
_PARAM_IN_MESSAGE = re.compile(r"['\"`](n|max_tokens|temperature)['\"`]|\b(n|max_tokens|temperature) must be")


@dataclass(frozen=True)
class OpenAIConfig:
    """How to reach the endpoint and what to ask it for."""

    model: str
    base_url: str | None = None     # None: OPENAI_BASE_URL, else OpenAI's own
    timeout_s: float = 120.0        # per request
    max_retries: int = 4            # retries after the first request, per request
    backoff_s: float = 1.0          # wait before the first retry; doubles with each retry
    max_backoff_s: float = 30.0     # cap on any one wait, a server's Retry-After included
    temperature: float = 0.7
    max_tokens: int = 16384         # per reply; reasoning models spend some of it thinking
    max_parallel: int = 8           # concurrent requests when samples are fetched one by one
    budget_chars: int = 24000       # prompt size limit, characters (prompting.py)
    prices: Prices = field(default_factory=load_prices, repr=False)   # KGEN_PRICES when set

    @property
    def resolved_base_url(self) -> str:
        return self.base_url or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL


@dataclass
class Completion:
    """One chat-completions response, reduced to what a round needs."""

    replies: list[tuple[str, str]]   # (text, finish_reason) per choice
    prompt_tokens: int
    completion_tokens: int
    usage_reported: bool             # False when the endpoint sent no usage (counted as 0)


class _NRejected(Exception):
    """The endpoint refused n > 1; the caller fetches samples one by one."""


NO_KEY = "no-key"   # sent to an endpoint other than OpenAI's when no key is set: local servers check none


def _api_key(base_url: str = DEFAULT_BASE_URL) -> str:
    """The key from the environment; OpenAI's own endpoint needs one, a local server (vLLM, Ollama) does not."""
    key = os.environ.get(API_KEY_ENV, "")
    if not key:
        if base_url.rstrip("/") != DEFAULT_BASE_URL:
            return NO_KEY
        raise ProposerError(
            f"{API_KEY_ENV} is not set: export it before running the LLM proposer on OpenAI's endpoint "
            "(a local server given with --base-url or OPENAI_BASE_URL needs none)"
        )
    return key


def _redact(text: str) -> str:
    """The text with the API key, should an endpoint echo it, replaced by ***."""
    key = os.environ.get(API_KEY_ENV, "")
    return text.replace(key, "***") if len(key) >= 4 else text


def _rejected_param(err) -> str | None:
    """Which request parameter a 400 response refused, when it is one kgen can do without."""
    if getattr(err, "param", None) in _ADAPTABLE:
        return err.param
    match = _PARAM_IN_MESSAGE.search(str(getattr(err, "message", err)))
    return (match.group(1) or match.group(2)) if match else None


def _retry_after_s(err) -> float | None:
    """The wait a 429/503 response asks for (Retry-After, or OpenAI's retry-after-ms), in seconds."""
    response = getattr(err, "response", None)
    if response is None:
        return None
    headers = response.headers
    try:
        if "retry-after-ms" in headers:
            return float(headers["retry-after-ms"]) / 1000
        if "retry-after" in headers:
            value = headers["retry-after"]
            try:
                return float(value)
            except ValueError:
                when = email.utils.parsedate_to_datetime(value)
                return when.timestamp() - time.time()
    except (TypeError, ValueError):
        return None
    return None


def _describe(err: Exception) -> str:
    """One line naming what went wrong: HTTP status and body, or the connection's own error."""
    import openai

    if isinstance(err, openai.APIStatusError):
        body = err.body if isinstance(err.body, dict) else {}
        return f"HTTP {err.status_code}: {body.get('message') or err.message}"
    cause = f" ({type(err.__cause__).__name__}: {err.__cause__})" if err.__cause__ else ""
    return f"{type(err).__name__}: {err}{cause}"


def _split(total: int, parts: int) -> list[int]:
    """total split into `parts` integers that sum to it, the remainder on the first ones."""
    share, extra = divmod(total, parts)
    return [share + (1 if i < extra else 0) for i in range(parts)]


class OpenAIProposer(Proposer):
    """Candidates from an OpenAI-compatible chat-completions endpoint."""

    name = "openai"

    def __init__(self, config: OpenAIConfig):
        try:
            import openai
        except ImportError:
            raise ProposerError("the LLM proposer needs the openai package: pip install 'openai>=1.40'") from None
        self.config = config
        self.base_url = config.resolved_base_url
        _api_key(self.base_url)  # fail before the first round, not in the middle of a run
        try:
            # The client's HTTP stack is imported when a client is made (no request is sent): a missing
            # piece of it (seen: truststore, under httpx) fails here, before the run starts.
            openai.OpenAI(api_key="unused", base_url=self.base_url, max_retries=0).close()
        except ImportError as exc:
            raise ProposerError(f"the openai client cannot load its HTTP stack ({exc}): install kgen's "
                                "dependencies (pip install -e .), or carry that package's wheel") from None
        # NOTE: OpenAI's table prices OpenAI's endpoint only; elsewhere only what KGEN_PRICES names costs anything
        self.prices = config.prices.for_endpoint(self.base_url.rstrip("/") == DEFAULT_BASE_URL)
        self.price = self.prices.lookup(config.model)
        # Running totals over every request this proposer made, retries included.
        self.requests = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cost_usd = 0.0
        self._lock = threading.Lock()      # the totals and the adaptations below, shared by parallel requests
        self._n_supported = True
        self._omit_temperature = False
        self._tokens_param = "max_tokens"

    def __repr__(self) -> str:
        return f"OpenAIProposer(model={self.config.model!r}, base_url={self.base_url!r})"

    @property
    def price_note(self) -> str:
        if self.price is None:
            return f"unknown price for {self.config.model}: cost counted as 0 (set KGEN_PRICES)"
        return ""

    def propose(self, ctx: ProposeContext) -> list[Proposal]:
        import openai

        messages = render_messages(ctx, self.config.budget_chars)
        prompt = messages_markdown(messages)
        wanted = max(ctx.n, 1)
        with openai.OpenAI(
            api_key=_api_key(self.base_url), base_url=self.base_url, timeout=self.config.timeout_s, max_retries=0
        ) as client:
            proposals: list[Proposal] = []
            if wanted > 1 and self._n_supported:
                try:
                    proposals = self._proposals(self._complete(client, messages, wanted), prompt)
                except _NRejected:
                    with self._lock:
                        self._n_supported = False
            missing = wanted - len(proposals)
            if missing > 0:
                # NOTE: each single request is sent without `n`, which every endpoint accepts.
                with ThreadPoolExecutor(max_workers=min(missing, self.config.max_parallel)) as pool:
                    futures = [pool.submit(self._complete, client, messages, 1) for _ in range(missing)]
                    for future in futures:
                        proposals += self._proposals(future.result(), prompt)
        return proposals[:wanted]

    def _proposals(self, completion: Completion, prompt: str) -> list[Proposal]:
        """One proposal per choice; the request's tokens are shared out among them."""
        count = len(completion.replies)
        if count == 0:
            return []
        prompt_shares = _split(completion.prompt_tokens, count)
        completion_shares = _split(completion.completion_tokens, count)
        proposals = []
        for (text, finish), prompt_tokens, completion_tokens in zip(completion.replies, prompt_shares, completion_shares):
            source, repair = parse_reply(text)
            notes = [f"{self.config.model}, finish_reason {finish}"]
            if not completion.usage_reported:
                notes.append("the endpoint reported no token usage: counted as 0")
            if self.price_note:
                notes.append(self.price_note)
            proposals.append(Proposal(
                source=source,
                repair=repair,
                note="; ".join(notes),
                prompt=prompt,
                response=text,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                cost_usd=self.prices.cost_usd(self.config.model, prompt_tokens, completion_tokens),
            ))
        return proposals

    def _request_args(self, messages: list[dict], n: int) -> dict:
        args = {"model": self.config.model, "messages": messages, self._tokens_param: self.config.max_tokens}
        if not self._omit_temperature:
            args["temperature"] = self.config.temperature
        if n > 1:
            args["n"] = n
        return args

    def _adapt(self, param: str) -> bool:
        """Do without a refused parameter from now on; False when there is nothing left to change."""
        with self._lock:
            if param == "max_tokens" and self._tokens_param == "max_tokens":
                self._tokens_param = "max_completion_tokens"
                return True
            if param == "temperature" and not self._omit_temperature:
                self._omit_temperature = True
                return True
        return False

    def _wait_s(self, retry: int, err: Exception) -> float:
        asked = _retry_after_s(err)
        wait = asked if asked is not None else self.config.backoff_s * 2**retry
        # A little jitter, so parallel requests refused together do not all come back together.
        return min(max(wait, 0.0) * random.uniform(1.0, 1.1), self.config.max_backoff_s)

    def _fail(self, what: str, err: Exception) -> ProposerError:
        return ProposerError(_redact(f"{self.config.model} at {self.base_url}: {what}; last error: {_describe(err)}"))

    def _complete(self, client, messages: list[dict], n: int) -> Completion:
        """One chat completion, retried on rate limits, server errors and broken connections."""
        import openai

        retry = 0
        while True:
            try:
                with self._lock:
                    self.requests += 1
                response = client.chat.completions.create(**self._request_args(messages, n))
            except openai.BadRequestError as err:
                param = _rejected_param(err)
                if param == "n" and n > 1:
                    raise _NRejected() from None
                if param is not None and self._adapt(param):
                    continue
                raise self._fail("the endpoint refused the request", err) from None
            except openai.RateLimitError as err:
                if err.code == "insufficient_quota":
                    raise self._fail("the account's quota is used up", err) from None
                error = err
            except openai.APIStatusError as err:
                if err.status_code < 500 and err.status_code != 408:
                    raise self._fail("the endpoint refused the request", err) from None
                error = err
            except openai.APIConnectionError as err:   # timeouts and dropped connections too
                error = err
            except openai.OpenAIError as err:          # a reply the client could not read
                raise self._fail("the endpoint's reply could not be read", err) from None
            else:
                return self._account(response)
            if retry >= self.config.max_retries:
                raise self._fail(f"no reply after {retry + 1} requests", error) from None
            time.sleep(self._wait_s(retry, error))
            retry += 1

    def _account(self, response) -> Completion:
        usage = response.usage
        prompt_tokens = (usage.prompt_tokens or 0) if usage else 0
        completion_tokens = (usage.completion_tokens or 0) if usage else 0
        with self._lock:
            self.prompt_tokens += prompt_tokens
            self.completion_tokens += completion_tokens
            self.cost_usd += self.prices.cost_usd(self.config.model, prompt_tokens, completion_tokens)
        replies = [(choice.message.content or "", choice.finish_reason or "") for choice in response.choices or []]
        return Completion(replies, prompt_tokens, completion_tokens, usage_reported=usage is not None)


def _main() -> int:
    import argparse
    from pathlib import Path

    from agent.analysis import Analysis

    parser = argparse.ArgumentParser(description="Ask an OpenAI-compatible endpoint for one round of candidates.")
    parser.add_argument("task", type=Path)
    parser.add_argument("--model", required=True)
    parser.add_argument("--base-url", default=None)
    parser.add_argument("--backend", choices=("triton", "cuda"), default="triton")
    parser.add_argument("-n", type=int, default=1, help="samples")
    args = parser.parse_args()
    proposer = OpenAIProposer(OpenAIConfig(model=args.model, base_url=args.base_url))
    ctx = ProposeContext(
        task_name=args.task.stem, task_source=args.task.read_text(), backend=args.backend,
        analysis=Analysis(), round=1, n=args.n,
    )
    for i, proposal in enumerate(proposer.propose(ctx), 1):
        print(f"--- sample {i}: {proposal.note}")
        print(proposal.source if proposal.source is not None else f"no candidate: {proposal.repair}")
    print(f"--- {proposer.prompt_tokens} prompt + {proposer.completion_tokens} completion tokens, ${proposer.cost_usd:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
