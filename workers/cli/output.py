"""kubectl's output flag for every command that prints objects: ``-o json|yaml|wide|name``.

One flag for every command, as kubectl has.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import yaml
from pydantic import BaseModel


def add_output_flag(p: argparse.ArgumentParser, formats: tuple[str, ...], default: str) -> None:
    """``-o/--output`` with ``formats`` (what the command prints without it: ``default``)."""
    p.add_argument("-o", "--output", choices=formats, default=None, metavar="FORMAT",
                   help=f"output format: {', '.join(formats)} (default: {default})")


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def render(value: Any, output: str) -> str:
    """``value`` (a model, a list of models, plain data) as JSON or YAML text, newline-terminated."""
    data = _plain(value)
    if output == "yaml":
        return str(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    return json.dumps(data, indent=2, default=str) + "\n"
