"""`python -m agent ...` is the same as the `kgen` console script."""

import sys

from agent.cli import main

sys.exit(main())
