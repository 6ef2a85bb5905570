"""Same node that holds: a placement hold, proven by a dry-run probe, for a controller's replacement.

Before a ``same_node`` reschedule evicts a pod its controller replaces (Job, JobSet, StatefulSet,
LeaderWorkerSet), it writes a hold (``podmedic/domain/placement_holds.py``) naming the pod's place
in its workload, the ranks recreated with it (kept off the node, so they leave its devices to the
replacement) and the node. podmedic's admission webhook turns the hold into a required node
affinity on the replacement. Whether that chain works (webhook registered, served, trusted, able to
read the hold) is proven before anything is evicted: a ``dryRun=All`` create of a pod with the
same labels runs admission exactly as the replacement's create will, and stores nothing. When the
probe comes back unpinned, or is refused, the rung falls back to a preference and says why.
"""

from __future__ import annotations

import copy
import time

from podmedic.domain.base import Obj
from podmedic.domain.placement_holds import PINNED_BY, Hold, group_of, hold_key, identity_of, pinned_to
from podmedic.domain.steps import RecoverInput
from podmedic.kube import podview
from podmedic.kube.gateway import KubeError
from podmedic.kube.loop_calls import LoopCalls

# A hold outlives the rung by this much at most: a worker that died mid-rung pins nothing for long.
EXPIRY_MARGIN_S = 120.0


def probe_body(pod: Obj) -> Obj:
    """A pod like ``pod`` for admission to look at: same labels and containers, no owner, no node."""
    meta, spec = pod["metadata"], copy.deepcopy(pod.get("spec") or {})
    for key in ("nodeName", "schedulingGates", "hostname", "subdomain"):
        spec.pop(key, None)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": f"{meta['name'][:40]}-podmedic-probe-",
                         "labels": dict(meta.get("labels") or {})},
            "spec": spec}


class SameNodeHold:
    """The hold of one ``same_node`` attempt: placed and proven, then released."""

    def __init__(self, api: LoopCalls, inp: RecoverInput, pod: Obj | None) -> None:
        """``pod`` ``None``: a retried attempt whose pod was evicted already; the hold an earlier attempt
        placed (same key) stays until its expiry and is only released here."""
        self.api, self.inp, self.pod = api, inp, pod
        self.labels = identity_of(pod) if pod is not None else {}
        self.key = hold_key(inp.request_id)
        self.placed = pod is None

    async def place(self, node: str, tolerations: list[dict[str, str]]) -> str | None:
        """Write the hold (the pinned pod gets ``tolerations`` too: a warm spare's) and probe admission;
        ``None`` when the replacement will be pinned, else why not."""
        inp = self.inp
        if self.pod is None or not self.labels:
            return "the pod carries no label its replacement will carry again (pod-name, job-name)"
        hold = Hold(namespace=inp.pod.namespace, labels=self.labels, group=group_of(self.pod), node=node,
                    incident_id=inp.incident_id,
                    reason=f"{'warm-spare' if tolerations else 'same-node'} replacement of {inp.pod.name}: "
                           f"device {inp.device.resource_id} failed",
                    expires_at=time.time() + inp.timeout_s + inp.eviction.max_wait_s + EXPIRY_MARGIN_S,
                    tolerations=tolerations)
        await self.api.put_hold(inp.pod.namespace, self.key, hold.model_dump_json(), inp.incident_id)
        self.placed = True
        try:
            probed = await self.api.probe_pod(inp.pod.namespace, probe_body(self.pod))
        except KubeError as err:
            return f"the admission probe (a dry-run create) was refused: {err}"
        if pinned_to(probed) != node:
            return ("a dry-run pod came back without podmedic's pin: the admission webhook is not registered, "
                    "not reachable or not trusted (podmedic admission, deploy/kustomize/base/admission.yaml; "
                    "failurePolicy Ignore lets pods through unpinned)")
        return None

    async def release(self, verified: bool) -> list[str]:
        """Drop the hold; when the rung failed, delete pinned replacements still Pending, so the controller
        makes them again free to go elsewhere. What was done, as notes."""
        if not self.placed:
            return []
        await self.api.drop_hold(self.inp.pod.namespace, self.key)
        if verified or not self.labels:
            return []
        return await self._unpin_pending()

    async def _unpin_pending(self) -> list[str]:
        notes = []
        selector = ",".join(f"{k}={v}" for k, v in sorted(self.labels.items()))
        for pod in await self.api.list_pods(self.inp.pod.namespace, selector):
            meta = pod["metadata"]
            if podview.annotations_of(pod).get(PINNED_BY) == self.inp.incident_id and \
                    not (pod.get("spec") or {}).get("nodeName"):
                await self.api.delete_pod(self.inp.pod.namespace, meta["name"], meta.get("uid", ""))
                notes.append(f"deleted {meta['name']}, pinned to {self.inp.pod.node} and still Pending: its "
                             "controller makes it again, unpinned")
        return notes
