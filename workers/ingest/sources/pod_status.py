"""Pods' ``status.containerStatuses[].allocatedResourcesStatus`` (KEP-4680) as health events.

A device reported Unhealthy or Unknown, or back to Healthy after that, is a transition and
becomes one ``DeviceHealthEvent`` (Unknown too: the incident applies the driver's grace
period). A healthy device coming into view is not news. The source remembers only the
devices last seen not Healthy, per pod; that memory travels with the cursor, so a device
that healed while the ingest was down is still reported Healthy after the restart.

The kubelet names a device by the driver's CDI ID when the driver gave one, so each entry is
resolved to its DRA device through the pod's ResourceClaim (``podmedic.kube.resource_ids``,
claims from a watch-fed ``ClaimIndex``). An entry that cannot be resolved is not dropped: it
becomes an ``UnresolvedDevice`` observation, reported on the pod, counted and logged. A device
plugin's device (an entry named after an extended resource such as ``nvidia.com/gpu``) becomes a
``PluginDevice`` observation for its node's incident.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from pathlib import Path

from podmedic.domain.base import Obj
from podmedic.domain.models import DeviceHealthEvent, DeviceRef, Health, PluginDevice, PodKey, UnresolvedDevice
from podmedic.kube.gateway import KubeGateway
from podmedic.kube.resource_ids import PluginEntry, Unresolved, pod_device_health
from podmedic.telemetry.metrics import metrics
from workers.ingest.sources.claim_index import ClaimIndex
from workers.ingest.sources.cursor import Memory
from workers.ingest.sources.watch_loop import Change, ClusterSource, Observation

log = logging.getLogger("podmedic.ingest.pod_status")
_CODE = re.compile(r"(?i)\bxid\s*[:=#]?\s*(\d+)")

Reported = dict[str, tuple[str, str]]  # device resourceID (or unresolved key) -> (health, message)


def code_from(message: str) -> int | None:
    """An XID code named in a health message (``XID 79 ...``), if any."""
    match = _CODE.search(message)
    return int(match.group(1)) if match else None


class PodStatusSource(ClusterSource):
    """Turns allocatedResourcesStatus transitions into ``DeviceHealthEvent``s."""

    name = "pod-status"
    kind = "pods"

    _reported: dict[str, Reported]  # pod UID -> its devices' last reported health (Healthy ones too)

    def __init__(self, kube: KubeGateway, *, claims: ClaimIndex | None = None, state_dir: Path | None = None,
                 watch_timeout_s: int = 30, cursor_interval_s: float = 1.0) -> None:
        self.claims = claims or ClaimIndex(kube.get_claim)
        self.unresolved = 0  # entries no device could be found for (also the podmedic_unresolved_devices metric)
        super().__init__(kube, state_dir=state_dir, watch_timeout_s=watch_timeout_s,
                         cursor_interval_s=cursor_interval_s)

    def change(self, kind: str, obj: Obj) -> Change:
        """Events for every device whose reported health changed in this pod."""
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        if not uid:
            return Change()
        if kind == "DELETED":
            return Change(apply=lambda: self._forget(uid))
        before = self._reported.get(uid, {})
        after: Reported = {}
        events: list[Observation] = []
        namespace = str(meta.get("namespace") or "")
        reported = pod_device_health(obj, lambda name: self.claims.get(namespace, name))
        seen: list[tuple[str, Health, str, DeviceRef | Unresolved | PluginEntry]] = [
            (device.resource_id, health, message, device) for device, (health, message) in reported.devices.items()]
        seen += [(f"unresolved:{u.entry}:{u.resource_id}", u.health, u.message, u) for u in reported.unresolved]
        seen += [(f"plugin:{p.resource}:{p.device_id}", p.health, p.message, p) for p in reported.plugin]
        for key, health, message, what in seen:
            after[key] = (health.value, message)
            if before.get(key) == (health.value, message) or (key not in before and health is not Health.UNHEALTHY):
                # No change, or a device coming into view Healthy or Unknown: the kubelet reports Unknown
                # for every device whose driver has not reported its health (pkg/kubelet/cm/dra/healthinfo.go,
                # getHealthInfo), so Unknown is news only as a change from what the pod showed before.
                continue
            if isinstance(what, DeviceRef):
                events.append(self._event(obj, what, health, message))
            elif isinstance(what, PluginEntry):
                events.append(self._plugin(obj, what))
            elif health is not Health.HEALTHY:  # the record of an unresolved entry is opened, never closed
                events.append(self._unresolved(obj, what))
        return Change(events, apply=lambda: self._remember(uid, after))

    def _unresolved(self, pod: Obj, what: Unresolved) -> UnresolvedDevice:
        meta = pod.get("metadata") or {}
        self.unresolved += 1
        metrics().unresolved_devices.add(1, {"source": self.name})
        log.warning("pod %s/%s: claim %s resourceID %r (%s) is %s but names no device podmedic can find: %s",
                    meta.get("namespace"), meta.get("name"), what.claim, what.resource_id, what.entry,
                    what.health.value, what.why)
        uid = str(meta.get("uid") or "")
        return UnresolvedDevice(
            pod=PodKey(namespace=meta.get("namespace", ""), name=meta.get("name", ""), uid=uid),
            node=(pod.get("spec") or {}).get("nodeName"), entry=what.entry, claim=what.claim,
            resource_id=what.resource_id, health=what.health, message=what.message, why=what.why,
            observed_at=dt.datetime.now(dt.UTC),
            event_id=f"pod-status/{uid}/{what.entry}/{what.resource_id}/{what.health.value}@"
                     f"{meta.get('resourceVersion') or ''}",
        )

    def _plugin(self, pod: Obj, entry: PluginEntry) -> PluginDevice | UnresolvedDevice:
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:  # the kubelet reports only pods bound to its node; kept rather than guessed
            return self._unresolved(pod, Unresolved(entry.resource, entry.device_id, None, entry.health,
                                                    entry.message, "a device-plugin device of a pod with no node"))
        return PluginDevice(
            pod=PodKey(namespace=meta.get("namespace", ""), name=meta.get("name", ""), uid=uid), node=node,
            resource=entry.resource, device_id=entry.device_id, health=entry.health, message=entry.message,
            observed_at=dt.datetime.now(dt.UTC),
            event_id=f"pod-status/{uid}/{entry.resource}/{entry.device_id}/{entry.health.value}@"
                     f"{meta.get('resourceVersion') or ''}",
        )

    def _event(self, pod: Obj, device: DeviceRef, health: Health, message: str) -> DeviceHealthEvent:
        meta = pod.get("metadata") or {}
        rid = device.resource_id
        uid = str(meta.get("uid") or "")
        # The pod's resourceVersion makes a replay of the same change carry the same id, and a
        # later flap of the same health a new one (the incident drops repeated ids).
        version = meta.get("resourceVersion") or ""
        return DeviceHealthEvent(
            device=device, health=health, node=(pod.get("spec") or {}).get("nodeName"),
            reason="allocatedResourcesStatus", code=code_from(message), message=message,
            source="pod-status", observed_at=dt.datetime.now(dt.UTC),
            event_id=f"pod-status/{uid}/{rid}/{health.value}@{version}",
            pod=PodKey(namespace=meta.get("namespace", ""), name=meta.get("name", ""), uid=uid),
        )

    def _remember(self, uid: str, reported: Reported) -> None:
        if reported:
            self._reported[uid] = reported
        else:
            self._reported.pop(uid, None)

    def _forget(self, uid: str) -> None:
        self._reported.pop(uid, None)

    def missing(self, listed: list[Obj]) -> Change:
        """Pods gone while the watch was away: forget them (their devices' incidents go on)."""
        present = {(o.get("metadata") or {}).get("uid") for o in listed}
        gone = [uid for uid in self._reported if uid not in present]

        def forget() -> None:
            for uid in gone:
                self._forget(uid)

        return Change(apply=forget)

    def memory(self) -> Memory:
        """``{"pods": {uid: {resourceID: [health, message]}}}``, every device reported."""
        return {"pods": {uid: {rid: list(v) for rid, v in devs.items()} for uid, devs in self._reported.items()}}

    def restore(self, memory: Memory) -> None:
        """Take back ``memory()`` as saved with the cursor."""
        pods = memory.get("pods") or {}
        self._reported = {str(uid): {str(rid): (str(v[0]), str(v[1])) for rid, v in devs.items()}
                           for uid, devs in pods.items() if isinstance(devs, dict)}
