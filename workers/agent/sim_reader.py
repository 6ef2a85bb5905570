"""The node agent's simulator backend: NVML as ``podmedic sim`` shows it, over HTTP.

``SimNvmlReader`` has the ``NvmlReader`` interface (devices, ``wait_xids``, ``read_all``) but
reads ``GET <sim>/sim/v1/nodes/<node>/nvml``: the node's GPUs, the XID events since the last
call (an event set registered at start sees only later XIDs, as with NVML), and the readings
NVML would answer now. So ``podmedic up`` and the demo run the same agent, translator and
poster that a GPU node runs, and a fault on a GPU that no pod holds is seen.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
import urllib.error
import urllib.request
from typing import Any

from workers.agent.readings import DeviceInfo, Reading, XidEvent

log = logging.getLogger(__name__)

MAX_WAIT_MS = 10_000  # the simulator holds an answer at most this long (podmedic_sim/nvml_view.py)
_RETRY_S = 0.25


class SimUnavailable(Exception):
    """The simulator cannot be read, or has no GPUs on the node; the message says which."""


def _get(url: str, timeout_s: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout_s) as resp:
        return json.loads(resp.read())


def sim_nodes(sim_url: str) -> list[str]:
    """Every simulated node that has NVIDIA GPUs (``GET /sim/v1/nvml``)."""
    try:
        return [str(n) for n in _get(f"{sim_url.rstrip('/')}/sim/v1/nvml")["nodes"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise SimUnavailable(f"cannot list the simulator's GPU nodes at {sim_url}: {exc}") from None


def _time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


class SimNvmlReader:
    """One simulated node's GPUs, read as NVML would show them."""

    def __init__(self, sim_url: str, node: str) -> None:
        self.node = node
        self._url = f"{sim_url.rstrip('/')}/sim/v1/nodes/{node}/nvml"
        try:
            body = _get(self._url)
        except urllib.error.HTTPError as exc:
            raise SimUnavailable(f"node {node}: the simulator answered {exc.code}: {exc.read().decode()[:200]}") \
                from None
        except (OSError, ValueError) as exc:
            raise SimUnavailable(f"cannot read the simulator at {self._url}: {exc}") from None
        self.devices = [DeviceInfo(index=int(g["index"]), uuid=str(g["uuid"]), name=str(g["name"]),
                                   pci_bus_id=str(g["pci_bus_id"])) for g in body["gpus"]]
        self._since = int(body["next"])  # like an event set: XIDs from registration on
        self._failing = False

    def _read(self, wait_ms: int = 0) -> dict[str, Any] | None:
        try:
            body: dict[str, Any] = _get(f"{self._url}?since={self._since}&wait_ms={wait_ms}",
                                        timeout_s=5.0 + wait_ms / 1000)
        except (OSError, ValueError) as exc:
            if not self._failing:
                log.warning("node %s: reading the simulator failed (%s); retrying", self.node, exc)
            self._failing = True
            return None
        if self._failing:
            log.info("node %s: reading the simulator again", self.node)
        self._failing = False
        return body

    def wait_xids(self, timeout_ms: int) -> list[XidEvent]:
        """XID events within ``timeout_ms`` (blocking): the simulator answers as soon as one arrives, as
        ``nvmlEventSetWait`` does; an unreadable simulator is retried until the time is up."""
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            left_ms = max(0, min(int((deadline - time.monotonic()) * 1000), MAX_WAIT_MS))
            body = self._read(left_ms)
            if body is not None and body["xids"]:
                self._since = int(body["next"])
                return [XidEvent(index=int(x["index"]), xid=int(x["xid"]), at=_time(str(x["at"])))
                        for x in body["xids"]]
            left = deadline - time.monotonic()
            if left <= 0:
                return []
            if body is None:
                time.sleep(min(_RETRY_S, left))

    def read_all(self, at: dt.datetime) -> list[Reading]:
        """One reading per GPU (none while the simulator cannot be read)."""
        body = self._read()
        if body is None:
            return []
        uuids = {int(g["index"]): str(g["uuid"]) for g in body["gpus"]}
        out = []
        for r in body["readings"]:
            index = int(r["index"])
            if r.get("lost"):
                out.append(Reading(index=index, at=at, lost=True, uuid=uuids.get(index)))
                continue
            out.append(Reading(index=index, at=at, ecc_corrected=r.get("ecc_corrected"),
                               ecc_uncorrected=r.get("ecc_uncorrected"), temperature_c=r.get("temperature_c"),
                               slowdown=tuple(r["slowdown"]) if r.get("slowdown") is not None else None,
                               uuid=uuids.get(index)))
        return out

    def close(self) -> None:
        """Nothing to free (the NVML reader's interface)."""
