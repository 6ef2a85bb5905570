"""What NVML on a simulated node would show: its GPUs, their XID events and their readings.

A real node agent learns of a GPU's faults from the NVIDIA driver, through NVML: XID critical
errors arrive on an event set (``nvmlEventSetWait``) from the moment the agent registered, and
counters (volatile ECC errors) and states (``NVML_ERROR_GPU_IS_LOST`` once a GPU fell off the
bus) are read on demand. This view gives the same to ``podmedic agent nvml --sim-url`` for every
GPU a simulated node publishes, whether a pod holds it or not (an idle GPU's fault is seen here
and nowhere in pod status).

``GET /sim/v1/nodes/{node}/nvml?since=<seq>`` answers the node's GPUs, their readings, the XID
events after sequence number ``since``, and ``next`` (the ``since`` for the next call). With
``wait_ms=<ms>`` (at most 10,000) it holds the answer until an XID after ``since`` arrives or that
time passes, as ``nvmlEventSetWait`` returns at once with an event ready and otherwise waits for one
up to its timeout: an agent learns of an XID when it happens, not at its next poll.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections import deque
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from podmedic_sim.devices import REPLACED, DeviceRegistry, DevKey, Fault
from podmedic_sim.store import Store

NVML_DRIVER = "gpu.nvidia.com"
"""The DRA driver whose devices NVML sees."""

GPU_IS_LOST_XIDS = frozenset({79})
"""XID 79 (fallen off the bus): NVML then answers NVML_ERROR_GPU_IS_LOST for the device."""

UNCORRECTED_ECC_XIDS = frozenset({48, 63, 64, 94, 95})
"""XIDs that come with an uncorrectable (double-bit) ECC error, so the volatile count rises
(NVIDIA XID catalog: 48 DBE, 63/64 row remapping, 94 contained, 95 uncontained ECC error)."""

_KEEP = 10_000  # XID events kept per node; an agent further behind than this missed some
MAX_WAIT_MS = 10_000


@dataclass
class _Xid:
    seq: int
    device: str
    xid: int
    at: str


class NvmlView:
    """Per node: an XID event log fed by device health changes, and counters like NVML's."""

    def __init__(self, store: Store, devices: DeviceRegistry) -> None:
        self._store = store
        self._devices = devices
        self._seq = 0
        self._xids: dict[str, deque[_Xid]] = {}
        self._uncorrected: dict[DevKey, int] = {}
        self._arrived: dict[str, asyncio.Event] = {}  # per node: set when an XID arrives, then replaced
        devices.health_listeners.append(self._on_health)

    def _on_health(self, key: DevKey, fault: Fault) -> None:
        if fault.reason == REPLACED:
            self._uncorrected.pop(key, None)  # a new GPU's volatile counters start at zero
        if key[0] != NVML_DRIVER or fault.health != "Unhealthy" or fault.code is None:
            return
        node = self._devices.node_of(key)
        if node is None:
            return
        self._seq += 1
        at = dt.datetime.fromtimestamp(fault.since, dt.UTC).isoformat().replace("+00:00", "Z")
        self._xids.setdefault(node, deque(maxlen=_KEEP)).append(_Xid(self._seq, key[2], fault.code, at))
        arrived = self._arrived.pop(node, None)
        if arrived is not None:
            arrived.set()
        if fault.code in UNCORRECTED_ECC_XIDS:
            self._uncorrected[key] = self._uncorrected.get(key, 0) + 1

    def gpus(self, node: str) -> list[dict[str, Any]]:
        """The node's GPUs in NVML index order, as the slice's attributes describe them."""
        out: list[dict[str, Any]] = []
        for info in self._devices.by_node.get(node, []):
            if info.driver != NVML_DRIVER:
                continue
            obj = self._store.find("resourceslices", None, info.name) or {}
            attributes = {d.get("name"): d.get("attributes") or {} for d in obj.get("spec", {}).get("devices", [])}
            for position, name in enumerate(info.devices):
                attrs = attributes.get(name, {})
                index = int(attrs.get("index", {}).get("int", position))
                out.append({
                    "index": index,
                    "device": name,
                    "uuid": attrs.get("uuid", {}).get("string", f"GPU-{node}-{name}"),
                    "name": attrs.get("model", {}).get("string", "NVIDIA GPU"),
                    "pci_bus_id": f"00000000:{0x18 + index:02X}:00.0",
                    "pool": info.pool,
                })
        return sorted(out, key=lambda g: int(g["index"]))

    def reading(self, gpu: dict[str, Any]) -> dict[str, Any]:
        """One GPU's readings now: what NVML would answer for it."""
        key = (NVML_DRIVER, str(gpu["pool"]), str(gpu["device"]))
        fault = self._devices.fault(key)
        lost = fault.health == "Unhealthy" and fault.code in GPU_IS_LOST_XIDS
        if lost:
            return {"index": gpu["index"], "lost": True}
        return {"index": gpu["index"], "lost": False, "ecc_corrected": 0,
                "ecc_uncorrected": self._uncorrected.get(key, 0), "temperature_c": 41.0, "slowdown": []}

    def answer(self, node: str, since: int) -> dict[str, Any]:
        """The body of ``GET /sim/v1/nodes/{node}/nvml?since=``."""
        gpus = self.gpus(node)
        index_of = {g["device"]: g["index"] for g in gpus}
        xids = [{"seq": x.seq, "index": index_of[x.device], "xid": x.xid, "at": x.at}
                for x in self._xids.get(node, ()) if x.seq > since and x.device in index_of]
        return {"node": node, "gpus": [{k: v for k, v in g.items() if k != "pool"} for g in gpus],
                "readings": [self.reading(g) for g in gpus], "xids": xids, "next": self._seq}

    async def handle(self, request: web.Request) -> web.Response:
        """``GET /sim/v1/nodes/{node}/nvml``: 404 for a node with no NVIDIA GPUs, 400 for a bad ``since`` or
        ``wait_ms``."""
        node = request.match_info["node"]
        numbers: dict[str, int] = {}
        for name, default in (("since", 0), ("wait_ms", 0)):
            try:
                numbers[name] = int(request.query.get(name, str(default)))
            except ValueError:
                return web.json_response({"error": f"{name}: not an integer: {request.query[name]!r}"}, status=400)
        if not 0 <= numbers["wait_ms"] <= MAX_WAIT_MS:
            return web.json_response({"error": f"wait_ms: {numbers['wait_ms']} is not between 0 and {MAX_WAIT_MS}"},
                                     status=400)
        body = self.answer(node, numbers["since"])
        if not body["gpus"]:
            return web.json_response({"error": f"node {node!r} has no {NVML_DRIVER} GPUs"}, status=404)
        if not body["xids"] and numbers["wait_ms"]:
            arrived = self._arrived.setdefault(node, asyncio.Event())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(numbers["wait_ms"] / 1000):
                    await arrived.wait()
            body = self.answer(node, numbers["since"])
        return web.json_response(body)

    def routes(self) -> list[web.RouteDef]:
        """``GET /sim/v1/nodes/{node}/nvml`` and ``GET /sim/v1/nvml`` (the nodes that have GPUs)."""

        async def nodes(request: web.Request) -> web.Response:
            names = sorted({i.node for i in self._devices.slices.values() if i.driver == NVML_DRIVER})
            return web.json_response({"nodes": names})

        return [web.get("/sim/v1/nodes/{node}/nvml", self.handle), web.get("/sim/v1/nvml", nodes)]
