"""The price table: built-in prices, snapshot names, overrides from a file, unknown models."""

import json

import pytest

from agent.proposers.openai.pricing import Price, Prices, PriceTableError, load_prices


def test_cost_is_per_million_tokens():
    prices = Prices({"m": Price(2.0, 8.0)})
    assert prices.cost_usd("m", 1_000_000, 500_000) == pytest.approx(2.0 + 4.0)


def test_dated_snapshot_and_provider_prefix_find_the_family_price():
    prices = Prices({"gpt-4o": Price(2.5, 10.0), "gpt-4o-mini": Price(0.15, 0.6)})
    assert prices.lookup("gpt-4o-2024-08-06") == Price(2.5, 10.0)
    assert prices.lookup("openai/gpt-4o-mini") == Price(0.15, 0.6)


def test_unknown_model_costs_nothing_and_has_no_price():
    prices = load_prices()
    assert prices.lookup("my-local-coder") is None
    assert prices.cost_usd("my-local-coder", 10_000, 10_000) == 0.0


def test_kgen_prices_file_overrides_and_extends(tmp_path, monkeypatch):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"gpt-4o": {"input": 1, "output": 2}, "local": {"input": 0.5, "output": 0.5}}))
    monkeypatch.setenv("KGEN_PRICES", str(path))
    prices = load_prices()
    assert prices.lookup("gpt-4o") == Price(1.0, 2.0)
    assert prices.lookup("local") == Price(0.5, 0.5)
    assert prices.lookup("gpt-4.1") is not None   # the built-in entries stay


def test_malformed_price_file_names_the_file(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"gpt-4o": {"in": 1}}))
    with pytest.raises(PriceTableError, match="prices.json"):
        load_prices(path)
