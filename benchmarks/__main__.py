"""``python -m benchmarks``: the benchmark commands (dev-only; run from a checkout)."""

import sys

from benchmarks.cli import main

sys.exit(main())
