"""The Alertmanager mapping: how an alert's labels name a DRA device, and what each alertname means.

Set in the ingest settings (``alertmanager:``) and documented in docs/detection.md. The
defaults fit Prometheus rules over NVIDIA dcgm-exporter metrics: the node in ``Hostname``
(or ``kubernetes_node``, ``node``, ``instance``), the GPU index in ``gpu``. An alertname in
``maintenance`` announces a node's maintenance instead, its deadline in an annotation.
"""

from __future__ import annotations

import re
import string
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

_PLACE = re.compile(r"^(label|annotation):\S+$")
_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class AlertRule(BaseModel):
    """What a firing alert of one alertname means. A resolved alert always means Healthy."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    health: Literal["Unhealthy", "Unknown"] = Field("Unhealthy", description="Health a firing alert reports.")
    reason: str = Field("", description="Reason of the event; empty: the alertname.")
    code: int | None = Field(None, description="A fixed code (e.g. an XID) for every alert of this name.")
    code_from: list[str] = Field(
        default_factory=list,
        description="Where the code is read, first present wins: `label:<name>` or `annotation:<name>`.",
    )
    metric: str | None = Field(
        None, description="Degradation metric the alert's value feeds (a key of detection.degradation)."
    )
    value_from: list[str] = Field(
        default_factory=lambda: ["annotation:value"],
        description="Where the metric's value is read (an annotation rendered from `{{ $value }}`).",
    )

    @field_validator("code_from", "value_from")
    @classmethod
    def _places(cls, places: list[str]) -> list[str]:
        for place in places:
            if not _PLACE.match(place):
                raise ValueError(f"{place!r} is not `label:<name>` or `annotation:<name>`")
        return places


class MaintenanceRule(BaseModel):
    """An alertname that announces a node's maintenance: where its deadline is. Resolved: over or withdrawn."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    deadline_from: list[str] = Field(
        default_factory=lambda: ["annotation:deadline", "label:deadline"],
        description="Where the deadline is read, first present wins: Unix seconds or an RFC 3339 time.",
    )

    @field_validator("deadline_from")
    @classmethod
    def _places(cls, places: list[str]) -> list[str]:
        return AlertRule._places(places)


_CODE_PLACES = ["label:xid", "label:err_code", "annotation:xid", "annotation:err_code"]


def _default_rules() -> dict[str, AlertRule]:
    xid_places = [*_CODE_PLACES, "annotation:value"]
    return {
        "GPUXidError": AlertRule(code_from=xid_places),
        "GPUFallenOffBus": AlertRule(reason="fallen-off-bus", code=79),
        "GPUEccUncorrectable": AlertRule(reason="ecc-uncorrectable"),
        "GPURowRemapFailure": AlertRule(reason="row-remap-failure"),
        "GPUHighTemperature": AlertRule(metric="temperature_c"),
        "GPUEccCorrectableHigh": AlertRule(metric="ecc_correctable_per_hour"),
        "GPURetiredPagesHigh": AlertRule(metric="retired_pages"),
        "GPUThrottling": AlertRule(metric="throttle_s"),
        "GPUNVLinkErrors": AlertRule(metric="nvlink_errors_per_hour"),
    }


class AlertmanagerMapping(BaseModel):
    """How alerts' labels become a device and what each alertname means (docs/detection.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    node_labels: list[str] = Field(
        default_factory=lambda: ["Hostname", "kubernetes_node", "node", "instance"],
        description="Labels naming the node, first present wins; a `:port` suffix is stripped.",
    )
    driver_label: str | None = Field("podmedic_driver", description="Label naming the DRA driver, if present.")
    driver: str = Field("gpu.nvidia.com", min_length=1, description="Driver when the label is absent.")
    pool_template: str = Field("{node}", description="DRA pool; fields: any label, `node`, `driver`.")
    device_template: str = Field("gpu-{gpu}", description="DRA device; `gpu` is dcgm-exporter's GPU index label.")
    rules: dict[str, AlertRule] = Field(default_factory=_default_rules, description="Rules by alertname.")
    default_rule: AlertRule | None = Field(
        default_factory=lambda: AlertRule(code_from=list(_CODE_PLACES)),
        description="Rule for alertnames not in `rules`; null skips them.",
    )
    ignore: list[str] = Field(default_factory=list, description="Alertnames that are never an event.")
    maintenance: dict[str, MaintenanceRule] = Field(
        default_factory=lambda: {"NodeMaintenanceScheduled": MaintenanceRule()},
        description="Alertnames that announce a node's maintenance (not a device fault), by alertname.",
    )

    @field_validator("pool_template", "device_template")
    @classmethod
    def _template(cls, template: str) -> str:
        try:
            parts = list(string.Formatter().parse(template))
        except ValueError as exc:
            raise ValueError(f"{template!r} is not a valid template: {exc}") from exc
        for _, name, spec, conversion in parts:
            # Plain names only: attribute or index access would reach into Python objects.
            if name is not None and (not _FIELD.match(name) or spec or conversion):
                raise ValueError(f"{template!r}: `{{{name}}}` must be a plain label name such as {{gpu}}")
        return template
