"""The ingest service: watches the cluster for unhealthy devices and opens incidents.

Source today: pods' ``status.containerStatuses[].allocatedResourcesStatus`` (KEP-4680),
watched from a full list onwards, relisting on 410 Gone. A device seen changing health is
delivered to its incident by signal-with-start, so restarts and replicas never open a
second incident for one device.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import re
import threading
from collections.abc import Callable

from temporalio.client import Client

from activities import podview
from activities.kube import KubeError, KubeGateway
from ingest.delivery import deliver_event
from podmedic.models import DeviceHealthEvent, DeviceRef, Health, PodKey
from podmedic.policy_file import PolicySet

log = logging.getLogger("podmedic.ingest")
_CODE = re.compile(r"(?i)\bxid\s*[:=#]?\s*(\d+)")

Emit = Callable[[DeviceHealthEvent], None]


def code_from(message: str) -> int | None:
    """An XID code named in a health message (``XID 79 ...``), if any."""
    match = _CODE.search(message)
    return int(match.group(1)) if match else None


class PodStatusSource:
    """Turns allocatedResourcesStatus transitions into ``DeviceHealthEvent``s."""

    def __init__(self, kube: KubeGateway) -> None:
        self.kube = kube
        self._last: dict[tuple[str, str], tuple[Health, str]] = {}

    def observe(self, pod: podview.Obj, emit: Emit, deleted: bool = False) -> None:
        """Emit an event for every device whose reported health changed in this pod."""
        meta = pod["metadata"]
        uid = meta.get("uid", "")
        if deleted:
            for key in [k for k in self._last if k[0] == uid]:
                del self._last[key]
            return
        for rid, (health, message) in podview.device_statuses(pod).items():
            key = (uid, rid)
            if self._last.get(key) == (health, message):
                continue
            first_sight = key not in self._last
            self._last[key] = (health, message)
            if first_sight and health is Health.HEALTHY:
                continue  # a healthy device coming into view is not news
            try:
                device = DeviceRef.parse(rid)
            except ValueError as exc:
                log.warning("pod %s/%s: %s", meta.get("namespace"), meta.get("name"), exc)
                continue
            emit(DeviceHealthEvent(
                device=device, health=health, node=(pod.get("spec") or {}).get("nodeName"),
                reason="allocatedResourcesStatus", code=code_from(message), message=message,
                source="pod-status", observed_at=dt.datetime.now(dt.UTC),
                event_id=f"pod-status/{uid}/{rid}/{health.value}/{message}",
                pod=PodKey(namespace=meta.get("namespace", ""), name=meta.get("name", ""), uid=uid),
            ))

    def run(self, emit: Emit, stop: threading.Event) -> None:
        """List, then watch from the list's resourceVersion; relist on 410; until ``stop``."""
        resource_version: str | None = None
        while not stop.is_set():
            try:
                if resource_version is None:
                    pods, resource_version = self.kube.list_pods_all()
                    for pod in pods:
                        self.observe(pod, emit)
                for kind, pod in self.kube.watch_pods(resource_version, timeout_s=30):
                    if stop.is_set():
                        return
                    resource_version = pod.get("metadata", {}).get("resourceVersion", resource_version)
                    if kind != "BOOKMARK":
                        self.observe(pod, emit, deleted=kind == "DELETED")
            except KubeError as exc:
                if exc.status == 410:
                    log.info("watch expired (410 Gone): relisting")
                    resource_version = None
                    continue
                log.warning("pod watch failed: %s; retrying in 2s", exc)
                stop.wait(2.0)


async def run_ingest(client: Client, kube: KubeGateway, policies: PolicySet, task_queue: str,
                     stop: asyncio.Event) -> None:
    """Run the pod-status source and deliver what it sees until ``stop`` is set."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[DeviceHealthEvent] = asyncio.Queue()
    halt = threading.Event()
    source = PodStatusSource(kube)
    thread = threading.Thread(
        target=source.run, args=(lambda e: loop.call_soon_threadsafe(queue.put_nowait, e), halt),
        name="pod-status-watch", daemon=True,
    )
    thread.start()
    log.info("ingest watching pods' allocatedResourcesStatus; delivering to task queue %r", task_queue)
    try:
        while not stop.is_set():
            try:
                event = await asyncio.wait_for(queue.get(), timeout=0.5)
            except TimeoutError:
                continue
            while True:
                try:
                    run_id = await deliver_event(client, event, policies, task_queue=task_queue)
                    break
                except Exception as exc:
                    log.warning("delivering %s failed (%s); retrying", event.event_id, exc)
                    await asyncio.sleep(1.0)
            if run_id:
                log.info("%s %s -> incident %s", event.device.resource_id, event.health.value, event.device.workflow_id)
    finally:
        halt.set()
