"""The OpenAI-compatible proposer and everything only it needs: prompts, reply parsing, prices.

    from agent.proposers.openai import OpenAIConfig, OpenAIProposer
    proposer = OpenAIProposer(OpenAIConfig(model="gpt-4.1"))

`proposer.py` asks the endpoint (retries, `n` samples, tokens and cost);
`prompting.py` renders the system and round prompts from `prompts/*.md` under
a size budget; `replies.py` turns a reply into a candidate source or a repair
message; `pricing.py` is USD per million tokens per model (`KGEN_PRICES`
overrides it). Nothing outside this package imports these three.
"""

__all__ = ["DEFAULT_BASE_URL", "OpenAIConfig", "OpenAIProposer"]


def __getattr__(name: str):
    # NOTE: imported on first use, so that `python -m agent.proposers.openai.prompting` loads that module once
    if name in __all__:
        from agent.proposers.openai import proposer

        return getattr(proposer, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
