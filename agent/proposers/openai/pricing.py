"""What LLM tokens cost: a small price table in USD per million tokens.

The built-in table holds list prices of a few common OpenAI models. A JSON
file overrides or extends it, named by `load_prices(path)` or by the
`KGEN_PRICES` environment variable:

    {"gpt-4o": {"input": 2.5, "output": 10.0},
     "Qwen/Qwen2.5-Coder-32B-Instruct": {"input": 0, "output": 0}}

A model missing from the table costs 0 and `Prices.lookup` returns None, so
callers can say the price is unknown rather than claim it was free.

    python -m agent.proposers.openai.pricing [prices.json]   # print the table in effect
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

PRICES_ENV = "KGEN_PRICES"


@dataclass(frozen=True)
class Price:
    """The price of one model."""

    input_per_mtok: float    # USD per 1M prompt tokens
    output_per_mtok: float   # USD per 1M completion tokens

    def cost_usd(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input_per_mtok + completion_tokens * self.output_per_mtok) / 1e6


# List prices (USD per 1M tokens, standard tier) as published by OpenAI in 2025.
# NOTE: prices change; a run's cost is only as right as this table — override it with KGEN_PRICES.
DEFAULT_PRICES: dict[str, Price] = {
    "gpt-4o": Price(2.50, 10.00),
    "gpt-4o-mini": Price(0.15, 0.60),
    "gpt-4.1": Price(2.00, 8.00),
    "gpt-4.1-mini": Price(0.40, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.40),
    "o3": Price(2.00, 8.00),
    "o4-mini": Price(1.10, 4.40),
    "gpt-5": Price(1.25, 10.00),
    "gpt-5-mini": Price(0.25, 2.00),
    "gpt-5-nano": Price(0.05, 0.40),
}

# Dated snapshots ("gpt-4o-2024-08-06", "gpt-4-0613") cost what their family costs.
_SNAPSHOT_SUFFIX = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{4})$")


class PriceTableError(ValueError):
    """A price file that cannot be read or does not have the expected shape."""


@dataclass(frozen=True)
class Prices:
    """A price table: model name to `Price`."""

    table: Mapping[str, Price]
    own: frozenset[str] = frozenset()   # the names the user's own price file (KGEN_PRICES) set

    def for_endpoint(self, official: bool) -> "Prices":
        """The prices that apply at an endpoint: all of them at OpenAI's own, only the user's elsewhere (a
        local "gpt-4.1"-named model, or one a provider prefixes, is not billed at OpenAI's rate)."""
        if official:
            return self
        return Prices({name: price for name, price in self.table.items() if name in self.own}, self.own)

    def lookup(self, model: str) -> Price | None:
        """The model's price: exact name, then without a provider prefix or snapshot date; else None."""
        candidates = [model, model.rsplit("/", 1)[-1]]
        candidates += [_SNAPSHOT_SUFFIX.sub("", name) for name in candidates]
        for name in candidates:
            if name in self.table:
                return self.table[name]
        return None

    def cost_usd(self, model: str, prompt_tokens: int, completion_tokens: int) -> float:
        """What the tokens cost; 0 for a model whose price is unknown."""
        price = self.lookup(model)
        return price.cost_usd(prompt_tokens, completion_tokens) if price else 0.0


def read_price_file(path: str | Path) -> dict[str, Price]:
    """Parse a JSON price file: {model: {"input": usd_per_mtok, "output": usd_per_mtok}}."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise PriceTableError(f"{path}: cannot read the price table ({err})") from None
    if not isinstance(data, dict):
        raise PriceTableError(f"{path}: expected a JSON object of model -> {{\"input\": .., \"output\": ..}}")
    table = {}
    for model, entry in data.items():
        try:
            table[model] = Price(float(entry["input"]), float(entry["output"]))
        except (TypeError, KeyError, ValueError):
            raise PriceTableError(
                f"{path}: price of {model!r} must be {{\"input\": <USD per 1M tokens>, \"output\": <USD per 1M tokens>}}"
            ) from None
    return table


def load_prices(path: str | Path | None = None) -> Prices:
    """The built-in table, overridden by `path`, or by the file KGEN_PRICES names."""
    path = path or os.environ.get(PRICES_ENV)
    table = dict(DEFAULT_PRICES)
    own: dict[str, Price] = read_price_file(path) if path else {}
    table.update(own)
    return Prices(table, frozenset(own))


if __name__ == "__main__":
    prices = load_prices(sys.argv[1] if len(sys.argv) > 1 else None)
    for name, price in sorted(prices.table.items()):
        print(f"{name:40s} in ${price.input_per_mtok:8.3f}/Mtok   out ${price.output_per_mtok:8.3f}/Mtok")
