"""The two base types every room shares: a Kubernetes object as JSON, and a config section model."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

Obj = dict[str, Any]
"""A Kubernetes object (or any JSON object) as the API server serves it."""


class ConfigModel(BaseModel):
    """A section of a file an operator writes: unknown keys are refused (a typo is an error, not a
    silently ignored setting), and the loaded value is immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)
