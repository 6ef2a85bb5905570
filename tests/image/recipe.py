"""deploy/image's modules, loaded from their files (they are scripts beside the Dockerfile, not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
IMAGE = ROOT / "deploy" / "image"


def load(name: str) -> ModuleType:
    """``deploy/image/<name>.py`` as a module (its siblings importable, as when it runs)."""
    if str(IMAGE) not in sys.path:
        sys.path.insert(0, str(IMAGE))
    spec = importlib.util.spec_from_file_location(f"podmedic_image_{name}", IMAGE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module
