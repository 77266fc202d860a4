"""`python -m agent ...` is the same as the `kgen` console script."""

from agent.cli import entry

entry()
