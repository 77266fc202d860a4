"""Fixtures for the agent's tests: a scripted OpenAI-compatible server on loopback, and a fake API key."""

from __future__ import annotations

import pytest

from openai_server import ScriptedOpenAIServer

# Not a real key: a value distinctive enough that a leak into any text is easy to find.
TEST_API_KEY = "sk-test-kgen-7f3a9c1e5b"


@pytest.fixture
def api_key(monkeypatch) -> str:
    """OPENAI_API_KEY set to a test value; OPENAI_BASE_URL and KGEN_PRICES unset."""
    monkeypatch.setenv("OPENAI_API_KEY", TEST_API_KEY)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("KGEN_PRICES", raising=False)
    return TEST_API_KEY


@pytest.fixture
def openai_server():
    """A factory: openai_server(script, supports_n=True, rejects=()) -> a started server, stopped after the test."""
    servers = []

    def start(script, **options) -> ScriptedOpenAIServer:
        server = ScriptedOpenAIServer(script, **options).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
