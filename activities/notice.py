"""Notices on pods: a Kubernetes Event and annotations saying what podmedic saw and did.

The Event's name derives from the incident and reason (for step notices: the incident's
run and step), so a retried activity finds the Event it wrote instead of writing a second.
Step notices link to the incident in the Temporal UI when the worker knows the UI's
address (env ``PODMEDIC_UI_URL``; ``podmedic up`` sets it).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import urllib.parse

from temporalio import activity

from activities.base import KubeActivities
from activities.heartbeat import kept_alive
from podmedic.domain.base import Obj
from podmedic.domain.incident import StepNotice, StepNoticeResult
from podmedic.domain.steps import PodNoticeInput, PodNoticeResult
from podmedic.kube import podview
from podmedic.kube.gateway import Conflict, KubeGateway, NotFound
from podmedic.settings.groups import TemporalTarget

COMPONENT = "podmedic"
INCIDENT_URL = "podmedic.io/incident-url"


def incident_url(ui_base: str, namespace: str, workflow_id: str, run_id: str) -> str:
    """The incident's page in the Temporal UI (the workflow id holds slashes: encoded)."""
    wid = urllib.parse.quote(workflow_id, safe="")
    return f"{ui_base.rstrip('/')}/namespaces/{urllib.parse.quote(namespace, safe='')}/workflows/{wid}/{run_id}/history"


def event_body(inp: PodNoticeInput, pod_uid: str, key: str | None = None) -> Obj:
    """The core/v1 Event about the pod (name stable per ``key``, default incident and reason)."""
    digest = hashlib.sha256((key or f"{inp.incident_id}/{inp.reason}").encode()).hexdigest()[:12]
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

    def __init__(self, kube: KubeGateway) -> None:
        super().__init__(kube)
        # Read once: the settings are the process's and do not change; reading them (environment and
        # files) at every step showed in the worker's profile.
        self.ui_url = TemporalTarget.load().ui_url

    async def _notice(self, inp: PodNoticeInput, key: str | None = None) -> PodNoticeResult:
        pod = await self.api.get_pod(inp.pod.namespace, inp.pod.name)
        if pod is None or (inp.pod.uid and pod["metadata"].get("uid") != inp.pod.uid):
            return PodNoticeResult(pod_found=False, event_recorded=False)
        annotations = {podview.INCIDENT: inp.incident_id, **inp.annotations}
        current = pod["metadata"].get("annotations") or {}
        # An incident's later steps find the pod annotated by its first: a write that changes nothing is skipped.
        if any(current.get(key) != value for key, value in annotations.items()):
            with contextlib.suppress(NotFound):
                await self.api.patch_pod_annotations(inp.pod.namespace, inp.pod.name, dict(annotations))
        # Conflict: an earlier attempt of this activity already wrote this Event.
        with contextlib.suppress(Conflict):
            await self.api.create_event(inp.pod.namespace, event_body(inp, pod["metadata"].get("uid", ""), key))
        return PodNoticeResult(pod_found=True, event_recorded=True)

    @activity.defn(name="notify_pod")
    async def notify_pod(self, inp: PodNoticeInput) -> PodNoticeResult:
        """Record an Event on the pod and annotate it with the incident."""
        return await kept_alive(self._notice(inp))

    async def _step(self, notice: StepNotice, namespace: str) -> StepNoticeResult:
        ui = self.ui_url
        url = incident_url(ui, namespace, notice.incident_id, notice.run_id) if ui else ""
        message = f"{notice.message}; see {url}" if url else notice.message
        result = StepNoticeResult()
        known = set(notice.annotated)
        key = f"{notice.incident_id}#{notice.run_id}/{notice.step}"
        for pod in notice.pods:
            inp = PodNoticeInput(incident_id=notice.incident_id, pod=pod, reason=notice.reason, message=message,
                                 warning=notice.warning, annotations={INCIDENT_URL: url} if url else {})
            found = await self._event_only(inp, key) if pod in known and pod.uid else \
                (await self._notice(inp, key=key)).pod_found
            (result.recorded if found else result.gone).append(f"{pod.namespace}/{pod.name}")
        return result

    async def _event_only(self, inp: PodNoticeInput, key: str) -> bool:
        """The Event for a pod an earlier step of this run found and annotated: no read, no annotation
        (a pod deleted since gets it too: an Event names its pod by uid, and is harmless)."""
        try:
            with contextlib.suppress(Conflict):  # an earlier attempt of this activity wrote it
                await self.api.create_event(inp.pod.namespace, event_body(inp, inp.pod.uid, key))
        except NotFound:  # its namespace is gone, and the pod with it
            return False
        return True

    @activity.defn(name="notify_step")
    async def notify_step(self, notice: StepNotice) -> StepNoticeResult:
        """One Event per affected pod for one step of an incident (idempotent), linking the UI."""
        return await kept_alive(self._step(notice, activity.info().namespace))
