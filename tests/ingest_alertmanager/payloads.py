"""Realistic Alertmanager webhook payloads over NVIDIA dcgm-exporter metrics."""

from __future__ import annotations

import copy
from typing import Any

# The labels dcgm-exporter puts on every GPU series (as scraped by Prometheus), plus the
# alert rule's own `alertname`/`severity`.
DCGM_LABELS = {
    "DCGM_FI_DRIVER_VERSION": "570.124.06",
    "Hostname": "gpu-node-07",
    "UUID": "GPU-5b0c1f7e-8d2a-4c55-9c1e-2f1a7b3c9d10",
    "device": "nvidia3",
    "gpu": "3",
    "instance": "10.42.7.19:9400",
    "job": "nvidia-dcgm-exporter",
    "modelName": "NVIDIA H100 80GB HBM3",
    "pci_bus_id": "00000000:4C:00.0",
    "severity": "critical",
}


def alert(name: str, status: str = "firing", labels: dict[str, str] | None = None,
          annotations: dict[str, str] | None = None, fingerprint: str = "4f2a9c1e0b7d3e55",
          starts: str = "2025-03-14T09:26:53.589Z", ends: str = "0001-01-01T00:00:00Z") -> dict[str, Any]:
    """One alert as Alertmanager sends it."""
    return {
        "status": status,
        "labels": {**DCGM_LABELS, "alertname": name, **(labels or {})},
        "annotations": annotations if annotations is not None else {"summary": f"{name} on gpu-node-07 GPU 3"},
        "startsAt": starts,
        "endsAt": ends,
        "generatorURL": "http://prometheus.monitoring:9090/graph?g0.expr=DCGM_FI_DEV_XID_ERRORS",
        "fingerprint": fingerprint,
    }


def payload(*alerts: dict[str, Any]) -> dict[str, Any]:
    """A webhook body (version 4) holding ``alerts``."""
    status = "firing" if any(a.get("status") == "firing" for a in alerts) else "resolved"
    return copy.deepcopy({
        "version": "4",
        "groupKey": '{}/{severity="critical"}:{alertname="GPUXidError"}',
        "truncatedAlerts": 0,
        "status": status,
        "receiver": "podmedic",
        "groupLabels": {"alertname": alerts[0]["labels"]["alertname"] if alerts else ""},
        "commonLabels": {"severity": "critical"},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager.monitoring:9093",
        "alerts": list(alerts),
    })


XID_79 = alert("GPUXidError", labels={"err_code": "79", "err_msg": "GPU has fallen off the bus"},
               annotations={"summary": "XID 79 on gpu-node-07 GPU 3", "value": "79"})
TEMPERATURE = alert("GPUHighTemperature", labels={"gpu": "0", "device": "nvidia0"},
                    annotations={"summary": "GPU 0 is hot", "value": "93"}, fingerprint="9e1d2c3b4a5f6071")
TEMPERATURE_RESOLVED = alert("GPUHighTemperature", status="resolved", labels={"gpu": "0", "device": "nvidia0"},
                             annotations={"summary": "GPU 0 is hot", "value": "93"}, fingerprint="9e1d2c3b4a5f6071",
                             ends="2025-03-14T09:41:53.589Z")
