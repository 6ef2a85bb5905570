"""Driver prepare failures: core/v1 Events ``FailedPrepareDynamicResources`` about pods.

The kubelet records this Warning when a DRA driver refuses to prepare a pod's devices, and
repeats it (the Event's ``count`` grows) on every retry. The driver's policy decides what
the message means (``podmedic.domain.classify.prepare_failure_is_device``):

- a device fault: one Unhealthy ``DeviceHealthEvent`` per device of the failing driver
  allocated to the pod (read from the pod's ResourceClaims' allocations);
- otherwise the pod's own configuration: one ``ConfigProblem``, which is reported on the
  pod once per pod instance and never taints a device.

Ids derive from the Event's UID, so the kubelet's repeats (count bumps of the same Event)
and replays after a restart never look like new failures.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections import OrderedDict
from pathlib import Path

from podmedic.domain.base import Obj
from podmedic.domain.classify import PREPARE_FAILURE, prepare_failure_is_device
from podmedic.domain.models import ConfigProblem, DeviceHealthEvent, DeviceRef, Health, PodKey
from podmedic.domain.policy_file import PolicySet
from podmedic.kube.gateway import KubeGateway
from podmedic.kube.podview import api_time
from podmedic.kube.resource_ids import claim_object_names
from workers.ingest.sources.cursor import Memory
from workers.ingest.sources.pod_status import code_from
from workers.ingest.sources.watch_loop import Change, ClusterSource, Observation

log = logging.getLogger("podmedic.ingest.prepare")
_DRIVER_IN_MESSAGE = re.compile(r"dynamic resources: ([a-z0-9]([-a-z0-9.]*[a-z0-9])?\.[a-z]+): ")
MAX_REMEMBERED = 10_000


def _when(event: Obj) -> dt.datetime:
    stamps = (event.get("lastTimestamp"), event.get("eventTime"), event.get("firstTimestamp"))
    return next((when for stamp in stamps if (when := api_time(stamp)) is not None), dt.datetime.now(dt.UTC))


def _past_prepare(pod: Obj) -> bool:
    """Whether the pod's devices were prepared since: a container ran, or the pod ended."""
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return True
    return any(c.get("containerID") or "running" in (c.get("state") or {}) or "terminated" in (c.get("state") or {})
               for c in status.get("containerStatuses") or [])


class PrepareFailureSource(ClusterSource):
    """Turns ``FailedPrepareDynamicResources`` Events into device events or config problems."""

    name = "prepare-failures"
    kind = "events"
    field_selector = f"reason={PREPARE_FAILURE}"

    _handled: OrderedDict[str, str]  # Event UID -> message already turned into observations

    def __init__(self, kube: KubeGateway, policies: PolicySet, *, state_dir: Path | None = None,
                 watch_timeout_s: int = 30, cursor_interval_s: float = 1.0,
                 backoff_s: tuple[float, float] = (1.0, 30.0)) -> None:
        self.policies = policies
        super().__init__(kube, state_dir=state_dir, watch_timeout_s=watch_timeout_s,
                         cursor_interval_s=cursor_interval_s, backoff_s=backoff_s)

    def change(self, kind: str, obj: Obj) -> Change:
        """Observations for a new (or newly worded) prepare failure; nothing for repeats."""
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        message = str(obj.get("message") or "")
        if kind == "DELETED" or not uid or obj.get("reason") != PREPARE_FAILURE:
            return Change()  # the field selector is the filter; this guards servers that ignore it
        if self._handled.get(uid) == message:
            return Change()  # the kubelet retrying: count and lastTimestamp moved, nothing else
        return Change(self._observe(obj, uid, message), apply=lambda: self._remember(uid, message))

    def _observe(self, event: Obj, uid: str, message: str) -> list[Observation]:
        about = event.get("involvedObject") or {}
        if about.get("kind", "Pod") != "Pod" or not about.get("name"):
            return []
        namespace, name = str(about.get("namespace") or "default"), str(about["name"])
        pod = self.kube.get_pod(namespace, name)
        if pod is None or (about.get("uid") and (pod.get("metadata") or {}).get("uid") != about["uid"]):
            log.info("prepare failure %s about %s/%s: the pod is gone or replaced", uid, namespace, name)
            return []
        if _past_prepare(pod):
            return []  # an old failure the kubelet got past since
        key = PodKey(namespace=namespace, name=name, uid=str(pod["metadata"].get("uid") or ""))
        node = (pod.get("spec") or {}).get("nodeName") or (event.get("source") or {}).get("host")
        devices = self._allocated(pod)
        drivers = sorted({d.driver for d in devices if d.driver in message}) or sorted({d.driver for d in devices})
        if not drivers:
            named = _DRIVER_IN_MESSAGE.search(message)
            drivers = [named.group(1) if named else "unknown"]
        observed = _when(event)
        out: list[Observation] = []
        for driver in drivers:
            if prepare_failure_is_device(message, self.policies.for_driver(driver)):
                out.extend(DeviceHealthEvent(
                    device=d, health=Health.UNHEALTHY, node=node, reason=PREPARE_FAILURE, code=code_from(message),
                    message=message, source="prepare-failure", observed_at=observed, pod=key,
                    event_id=f"prepare/{uid}/{d.resource_id}",
                ) for d in devices if d.driver == driver)
            elif not any(isinstance(o, ConfigProblem) for o in out):
                out.append(ConfigProblem(pod=key, driver=driver, node=node, reason=PREPARE_FAILURE, message=message,
                                         source="events", observed_at=observed, event_id=f"prepare/{uid}"))
        return out

    def _allocated(self, pod: Obj) -> list[DeviceRef]:
        """Devices allocated to the pod: its claims (``claim_object_names``) → their allocations."""
        namespace = pod["metadata"].get("namespace", "default")
        found: list[DeviceRef] = []
        for claim_name in dict.fromkeys(claim_object_names(pod)):
            claim = self.kube.get_claim(namespace, claim_name)
            results = (((claim or {}).get("status") or {}).get("allocation") or {}).get("devices") or {}
            for r in results.get("results") or []:
                try:
                    ref = DeviceRef(driver=r.get("driver", ""), pool=r.get("pool", ""), device=r.get("device", ""))
                except ValueError:
                    continue
                if ref not in found:
                    found.append(ref)
        return found

    def _remember(self, uid: str, message: str) -> None:
        self._handled[uid] = message
        self._handled.move_to_end(uid)
        while len(self._handled) > MAX_REMEMBERED:
            self._handled.popitem(last=False)

    def memory(self) -> Memory:
        """``{"events": {uid: message}}``: prepare failures already delivered."""
        return {"events": dict(self._handled)}

    def restore(self, memory: Memory) -> None:
        """Take back ``memory()`` as saved with the cursor."""
        self._handled = OrderedDict((str(k), str(v)) for k, v in (memory.get("events") or {}).items())
