"""Pods' ``status.containerStatuses[].allocatedResourcesStatus`` (KEP-4680) as health events.

A device reported Unhealthy or Unknown, or back to Healthy after that, is a transition and
becomes one ``DeviceHealthEvent`` (Unknown too: the incident applies the driver's grace
period). A healthy device coming into view is not news. The source remembers only the
devices last seen not Healthy, per pod; that memory travels with the cursor, so a device
that healed while the ingest was down is still reported Healthy after the restart.
"""

from __future__ import annotations

import datetime as dt
import logging
import re

from podmedic.domain.base import Obj
from podmedic.domain.models import DeviceHealthEvent, DeviceRef, Health, PodKey
from podmedic.ingest.sources.cursor import Memory
from podmedic.ingest.sources.watch_loop import Change, ClusterSource, Observation
from podmedic.kube import podview

log = logging.getLogger("podmedic.ingest.pod_status")
_CODE = re.compile(r"(?i)\bxid\s*[:=#]?\s*(\d+)")

Reported = dict[str, tuple[str, str]]  # resourceID -> (health, message), devices not Healthy


def code_from(message: str) -> int | None:
    """An XID code named in a health message (``XID 79 ...``), if any."""
    match = _CODE.search(message)
    return int(match.group(1)) if match else None


class PodStatusSource(ClusterSource):
    """Turns allocatedResourcesStatus transitions into ``DeviceHealthEvent``s."""

    name = "pod-status"
    kind = "pods"

    _unhealthy: dict[str, Reported]  # pod UID -> its devices not Healthy

    def change(self, kind: str, obj: Obj) -> Change:
        """Events for every device whose reported health changed in this pod."""
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        if not uid:
            return Change()
        if kind == "DELETED":
            return Change(apply=lambda: self._forget(uid))
        before = self._unhealthy.get(uid, {})
        after: Reported = {}
        events: list[Observation] = []
        for rid, (health, message) in podview.device_statuses(obj).items():
            if health is not Health.HEALTHY:
                after[rid] = (health.value, message)
            if before.get(rid) == (health.value, message) or (health is Health.HEALTHY and rid not in before):
                continue  # no change, or a healthy device coming into view
            event = self._event(obj, rid, health, message)
            if event is not None:
                events.append(event)
        return Change(events, apply=lambda: self._remember(uid, after))

    def _event(self, pod: Obj, rid: str, health: Health, message: str) -> DeviceHealthEvent | None:
        meta = pod.get("metadata") or {}
        try:
            device = DeviceRef.parse(rid)
        except ValueError as exc:
            log.warning("pod %s/%s: %s", meta.get("namespace"), meta.get("name"), exc)
            return None
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
            self._unhealthy[uid] = reported
        else:
            self._unhealthy.pop(uid, None)

    def _forget(self, uid: str) -> None:
        self._unhealthy.pop(uid, None)

    def missing(self, listed: list[Obj]) -> Change:
        """Pods gone while the watch was away: forget them (their devices' incidents go on)."""
        present = {(o.get("metadata") or {}).get("uid") for o in listed}
        gone = [uid for uid in self._unhealthy if uid not in present]

        def forget() -> None:
            for uid in gone:
                self._forget(uid)

        return Change(apply=forget)

    def memory(self) -> Memory:
        """``{"pods": {uid: {resourceID: [health, message]}}}``, devices not Healthy only."""
        return {"pods": {uid: {rid: list(v) for rid, v in devs.items()} for uid, devs in self._unhealthy.items()}}

    def restore(self, memory: Memory) -> None:
        """Take back ``memory()`` as saved with the cursor."""
        pods = memory.get("pods") or {}
        self._unhealthy = {str(uid): {str(rid): (str(v[0]), str(v[1])) for rid, v in devs.items()}
                           for uid, devs in pods.items() if isinstance(devs, dict)}
