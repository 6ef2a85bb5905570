"""Where benchmark results go: JSON under ``bench/results/``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RESULTS = Path("bench/results")


def write(results: dict[str, Any], path: Path) -> None:
    """Write ``results`` as indented JSON to ``path`` and say so."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2) + "\n")
    print(f"results written to {path}")


def read(path: Path) -> dict[str, Any] | None:
    """The results in ``path``, or None when there are none yet."""
    if not path.exists():
        return None
    found: dict[str, Any] = json.loads(path.read_text())
    return found
