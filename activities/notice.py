"""Notices on pods: a Kubernetes Event and annotations saying what podmedic saw and did.

The Event's name derives from the incident and reason, so a retried activity finds the
Event it wrote instead of writing a second one.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib

from temporalio import activity

from activities import podview
from activities.base import KubeActivities
from activities.kube import Conflict, NotFound, Obj
from podmedic.steps import PodNoticeInput, PodNoticeResult

COMPONENT = "podmedic"


def event_body(inp: PodNoticeInput, pod_uid: str) -> Obj:
    """The core/v1 Event about the pod (name stable per incident and reason)."""
    digest = hashlib.sha256(f"{inp.incident_id}/{inp.reason}".encode()).hexdigest()[:12]
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{inp.pod.name[:200]}.podmedic-{digest}", "namespace": inp.pod.namespace,
                     "annotations": {podview.INCIDENT: inp.incident_id}},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": inp.pod.namespace,
                           "name": inp.pod.name, "uid": pod_uid},
        "reason": inp.reason,
        "message": f"{inp.message} (incident {inp.incident_id})"[:1024],
        "type": "Warning" if inp.warning else "Normal",
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }


class NoticeActivities(KubeActivities):
    """Pod Events and annotations, idempotent."""

    def _notice(self, inp: PodNoticeInput) -> PodNoticeResult:
        pod = self.kube.get_pod(inp.pod.namespace, inp.pod.name)
        if pod is None or (inp.pod.uid and pod["metadata"].get("uid") != inp.pod.uid):
            return PodNoticeResult(pod_found=False, event_recorded=False)
        annotations = {podview.INCIDENT: inp.incident_id, **inp.annotations}
        with contextlib.suppress(NotFound):
            self.kube.patch_pod_annotations(inp.pod.namespace, inp.pod.name, dict(annotations))
        # Conflict: an earlier attempt of this activity already wrote this Event.
        with contextlib.suppress(Conflict):
            self.kube.create_event(inp.pod.namespace, event_body(inp, pod["metadata"].get("uid", "")))
        return PodNoticeResult(pod_found=True, event_recorded=True)

    @activity.defn(name="notify_pod")
    async def notify_pod(self, inp: PodNoticeInput) -> PodNoticeResult:
        """Record an Event on the pod and annotate it with the incident."""
        return await self.run(self._notice, inp)
