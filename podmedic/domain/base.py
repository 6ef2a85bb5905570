"""The base types every room shares: a Kubernetes object as JSON, a config section model, and the
read-only mapping its sections hold."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, WrapSerializer

Obj = dict[str, Any]
"""A Kubernetes object (or any JSON object) as the API server serves it."""


class ConfigModel(BaseModel):
    """A section of a file an operator writes: unknown keys are refused (a typo is an error, not a
    silently ignored setting), and the loaded value is immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


V = TypeVar("V")


def _read_only(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(value))


FrozenMap = Annotated[Mapping[str, V], AfterValidator(_read_only), WrapSerializer(lambda v, dump: dump(dict(v)))]
"""A config section's mapping, read-only once loaded: a frozen model's dict could still be changed in
place, and a parsed policy is one instance shared by every incident of it (``policy_ref.unpack``). Give
the field ``validate_default=True`` so its default is read-only too."""
