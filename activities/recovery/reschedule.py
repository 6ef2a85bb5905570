"""Reschedule rungs: evict through the Eviction API and verify the replacement.

``same_node`` puts the replacement on the pod's node (its image is there: no pull), on another device:

- **Pods a controller replaces** (a Job's or JobSet's, a StatefulSet's or LeaderWorkerSet's): a
  placement hold pins the replacement to the node through podmedic's admission webhook
  (``same_node.py``), proven by a dry-run probe before anything is evicted. When the probe fails,
  a Job template's opt-in preference is the fallback: a preferred node affinity on a label
  ``prefer.podmedic.io/<name>`` that podmedic sets on the node for the time of the rung. Either way
  the note says which. Recovered means the replacement verified and the workload's own status
  running whole (``workload_status.py``).
- **Bare pods**: nobody recreates them, so podmedic does, from the pod's spec, gated until the old
  pod is gone, preferring the node; a retry finds the replacement it made.

``any_node`` does the same without the node. A PodDisruptionBudget that blocks the eviction (429)
is retried every ``eviction.retry_s`` with a note and a pod Event each time, until
``eviction.max_wait_s``; then the rung fails with the budget's reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from temporalio import activity

from activities.claim_cache import ReservedClaims
from activities.heartbeat import beat
from activities.notice import event_body
from activities.recovery import placement, room
from activities.recovery.same_node import SameNodeHold
from activities.recovery.verify import Verification, poll
from activities.recovery.workload_status import await_whole, others_line, restart_counts, workload_pods
from podmedic.domain import spares
from podmedic.domain.base import Obj
from podmedic.domain.models import PodKey
from podmedic.domain.placement_holds import identity_of
from podmedic.domain.steps import REPLACED_BY_CONTROLLER, PodNoticeInput, RecoverInput, RecoveryResult
from podmedic.kube import podview
from podmedic.kube.gateway import Conflict, KubeError
from podmedic.kube.loop_calls import LoopCalls

# Controllers that make a new pod for an evicted one (JobSets run Jobs, LeaderWorkerSets StatefulSets).
REPLACING_CONTROLLERS = ("Job", "StatefulSet")


class Rescheduler:
    """One reschedule attempt (``same_node`` or ``any_node``) of one pod."""

    def __init__(self, api: LoopCalls, inp: RecoverInput, action: str, claims: ReservedClaims) -> None:
        self.api, self.inp, self.action = api, inp, action
        self.claims = claims
        self.notes: list[str] = []
        self.selector = ""  # the labels of the pod's place in its workload (``_owned``)
        self.waiting = "not looked yet"  # the candidates the last look found wanting (``_replacement``)
        self.spare: str | None = None  # the warm spare the replacement goes to, its own node having no room

    async def _result(self, verified: bool, detail: str, pod: Obj | None = None) -> RecoveryResult:
        ref = podview.pod_ref(pod) if pod is not None else self.inp.pod
        same = ref.node == self.inp.pod.node if pod is not None else None
        devices = sorted(d.resource_id for d in (await self.claims.device_health(pod)).devices) if pod else []
        return RecoveryResult(verified=verified, action=self.action, pod=ref, same_node=same, devices=devices,
                              detail=detail, notes=self.notes)

    async def attempt(self) -> RecoveryResult:
        """Prepare the replacement's placement, evict, verify; clean up what was prepared."""
        inp = self.inp
        pod = await self.api.get_pod(inp.pod.namespace, inp.pod.name)
        if pod is not None and pod["metadata"].get("uid") != inp.pod.uid:
            pod = None
        owner = placement.controller_of(pod) if pod is not None else (("Job", inp.pod.job) if inp.pod.job else None)
        if owner is not None and owner[0] not in REPLACING_CONTROLLERS:
            return await self._result(False, f"pod is controlled by a {owner[0]} ({owner[1]}): podmedic "
                                             "reschedules pods of Jobs (JobSets), StatefulSets (LeaderWorkerSets) "
                                             "and bare pods")
        node = inp.pod.node if self.action == "same_node" else None
        if node:
            why_not = await room.short_on_own_node(self.api, self.claims, inp, pod)
            if why_not and owner is not None and pod is not None:
                self.spare = await room.warm_spare(self.api, self.claims, inp, pod)
            if why_not and self.spare is None:
                return await self._result(False, why_not + ("; no warm spare of its pool has room" if owner else ""))
            if why_not:
                self.notes.append(f"{why_not}: moving it to warm spare {self.spare} instead")
                node = self.spare
        elif inp.move_off and owner is not None and pod is not None:
            self.spare = node = await room.warm_spare(self.api, self.claims, inp, pod)
            if node is not None:
                self.notes.append(f"{inp.pod.node} is going away: moving {inp.pod.name} to warm spare {node}")
        if owner is None:
            if pod is None:
                return await self._result(False, "bare pod is gone before podmedic could copy its spec")
            return await self._bare(pod, node)
        return await self._owned(pod, node)

    # -- eviction ----------------------------------------------------------------------
    async def _evict(self) -> str | None:
        """Evict, retrying while a PodDisruptionBudget blocks; ``None`` once evicted, else why not."""
        inp, policy = self.inp, self.inp.eviction
        started = time.monotonic()
        tries = 0
        while True:
            tries += 1
            try:
                blocked = await self.api.try_evict(inp.pod.namespace, inp.pod.name, inp.pod.uid)
            except Conflict as err:  # the pod is still there: not evicted, try again like a blocked one
                blocked = str(err)
            if blocked is None:
                if tries > 1:
                    self.notes.append(f"eviction of {inp.pod.name} allowed on try {tries}")
                return None
            waited = time.monotonic() - started
            if waited + policy.retry_s > policy.max_wait_s:
                why = f"eviction blocked for {waited:.0f}s ({tries} tries, max_wait_s {policy.max_wait_s:g}): {blocked}"
                self.notes.append(why)
                return why
            note = f"eviction of {inp.pod.name} blocked (try {tries}): {blocked}; retrying in {policy.retry_s:g}s"
            self.notes.append(note)
            await self._tell(note, tries)
            # Heartbeat through the wait: retry_s may be longer than the heartbeat timeout.
            until = time.monotonic() + policy.retry_s
            while (left := until - time.monotonic()) > 0:
                beat("eviction blocked", tries)
                await asyncio.sleep(min(left, 1.0))

    async def _tell(self, message: str, tries: int) -> None:
        """A Warning Event on the pod, so `kubectl describe` shows why it is still there."""
        try:
            pod = await self.api.get_pod(self.inp.pod.namespace, self.inp.pod.name)
        except KubeError:
            return  # best effort, as below
        if pod is None:
            return
        ref = self.inp.pod
        notice = PodNoticeInput(incident_id=self.inp.incident_id, reason="PodmedicEvictionBlocked", message=message,
                                pod=PodKey(namespace=ref.namespace, name=ref.name, uid=ref.uid))
        # One Event per try (key): a retried activity rewrites the same one (Conflict). The Event
        # only explains the wait: failing to write it must not fail the eviction it explains.
        with contextlib.suppress(KubeError):
            await self.api.create_event(self.inp.pod.namespace, event_body(
                notice, self.inp.pod.uid, f"{self.inp.request_id}/evict/{tries}"))

    # -- pods a controller replaces -------------------------------------------------------
    async def _owned(self, pod: Obj | None, node: str | None) -> RecoveryResult:
        inp = self.inp
        identity = identity_of(pod) if pod is not None else {}
        self.selector = ",".join(f"{k}={v}" for k, v in sorted(identity.items())) or \
            f"batch.kubernetes.io/job-name={inp.pod.job}"
        details = activity.info().heartbeat_details
        others: dict[str, int] | None = None  # the workload's other pods' restarts, when known from the start
        if details and isinstance(details[0], list):
            known = set(details[0])
        else:
            # Pods that existed with the affected one are not replacements; later ones are. Creation is
            # stamped to the second (metav1.Time): a replacement made within the affected pod's first
            # second reads as one that existed with it, and is not found.
            owned = await self._owned_pods()
            known = {p["metadata"]["uid"] for p in owned
                     if not p["metadata"].get("creationTimestamp", "") > inp.pod.created} | {inp.pod.uid}
            if pod is not None:
                others = restart_counts(await workload_pods(self.api, pod) or owned)
                others.pop(inp.pod.uid, None)
        hold = SameNodeHold(self.api, inp, pod) if node else None
        label = None
        if hold is not None and node and pod is not None:
            why_not = await hold.place(node, [spares.SPARE_TOLERATION] if self.spare else [])
            if why_not is None:
                self.notes.append(f"replacement held on {node} (podmedic's admission webhook pins pods labelled "
                                  f"{self.selector}; a dry-run probe came back pinned)")
            else:
                self.notes.append(f"same node not held: {why_not}; falling back to a preference")
                label = placement.prefer_label_key(pod) if pod is not None else None
                if label is None:
                    self.notes.append("the pod template has no preferred node affinity on a prefer.podmedic.io/ "
                                      "label: the replacement's node is left to the scheduler")
        if label and node:
            await self._label(node, label, True)
        found = None
        try:
            if pod is not None:
                blocked = await self._evict()
                if blocked:
                    return await self._result(False, blocked)
            check = Verification(inp.verify_progress)
            found = await poll(lambda: self._replacement(check, known), inp.timeout_s, inp.poll_s,
                               sorted(known), "replacement")
            if found is not None:
                workload, why = await await_whole(self.api, found, inp.timeout_s, inp.poll_s)
                if why is not None:
                    return await self._result(False, f"replacement {found['metadata']['name']} Ready, but {workload} "
                                                     f"not running whole within {inp.timeout_s:g}s: {why}", found)
                if workload:
                    self.notes.append(f"{workload} running whole again (its status)")
                if others:  # a note only: a read that fails does not undo a verified recovery
                    try:
                        after = restart_counts(await self._workload_pods(found))
                        self.notes.append(others_line(workload or "its workload", others, after))
                    except KubeError as err:
                        self.notes.append(f"what became of the workload's other pods: not read ({err})")
        finally:
            if label and node:
                await self._label(node, label, False)
            if hold is not None:
                self.notes.extend(await hold.release(verified=found is not None))
        if found is None:
            seen = "" if check.ready_seen else f" (last seen: {self.waiting})"
            return await self._result(False, check.failure(inp.timeout_s, "replacement") + seen)
        return await self._attributed(found, replaced_before=pod is None, progress=check.progress_note(found))

    async def _attributed(self, found: Obj, replaced_before: bool, progress: str) -> RecoveryResult:
        """The verified result, named for what happened: the Job controller replaced a pod that was gone
        before podmedic evicted it; a ``same_node`` reschedule whose replacement the scheduler put on
        another node counts as ``any_node``, never as the same node."""
        name, landed = found["metadata"]["name"], found["spec"].get("nodeName")
        same = podview.pod_ref(found).node == self.inp.pod.node
        placed = f"{name} Ready on {landed} ({'same node' if same else 'another node'}); {progress}"
        if replaced_before:
            result = await self._result(True, f"replaced by its Job controller (the pod was gone before podmedic "
                                              f"evicted it): {placed}", found)
            return result.model_copy(update={"action": REPLACED_BY_CONTROLLER})
        if self.spare is not None and landed == self.spare:
            why = "is going away" if self.inp.move_off else "had no free healthy device"
            self.notes.append(f"moved to warm spare {landed}: {self.inp.pod.node} {why}")
            return (await self._result(True, f"replacement {placed}, a warm spare", found)).model_copy(
                update={"action": "any_node"})
        if self.action == "same_node" and not same:
            self.notes.append(f"same_node asked for {self.inp.pod.node}; the scheduler placed {name} on {landed}: "
                              "counted as another node")
            return (await self._result(True, f"replacement {placed}", found)).model_copy(
                update={"action": "any_node"})
        return await self._result(True, f"replacement {placed}", found)

    async def _owned_pods(self) -> list[Obj]:
        return await self.api.list_pods(self.inp.pod.namespace, self.selector)

    async def _workload_pods(self, pod: Obj) -> list[Obj]:
        return await workload_pods(self.api, pod) or await self._owned_pods()

    async def _replacement(self, check: Verification, known: set[str]) -> Obj | None:
        """The replacement as ``check`` takes it (``Verification.offer``), once one is there."""
        waiting: list[str] = []
        for pod in await self._owned_pods():
            if pod["metadata"].get("uid") in known:
                continue
            name = f"{pod['metadata']['name']} on {pod['spec'].get('nodeName') or 'no node'}"
            if not podview.is_ready(pod):
                waiting.append(f"{name} not Ready")
            elif not podview.devices_healthy(pod):
                waiting.append(f"{name} with devices not all Healthy")
            elif self.inp.device in (await self.claims.device_health(pod)).devices:
                waiting.append(f"{name} holding the failed device")
            else:
                return check.offer(pod)
        # Why the rung is still waiting, for its failure: no replacement at all reads otherwise the same.
        self.waiting = "; ".join(waiting) or "no new pod"
        return check.offer(None)

    async def _label(self, node: str, key: str, on: bool) -> None:
        """Set (or remove, if still ours) the node label the Job template prefers."""
        value = placement.label_value(self.inp.incident_id)
        if on:
            await self.api.patch_node_metadata(node, {key: value}, {
                placement.CHANGED_BY: self.inp.incident_id,
                placement.REASON: f"{key}: same-node replacement of {self.inp.pod.namespace}/{self.inp.pod.name}",
            })
            return
        found = await self.api.get_node(node)
        if found is not None and (found["metadata"].get("labels") or {}).get(key) == value:
            await self.api.patch_node_metadata(node, {key: None}, {})

    # -- bare pods ---------------------------------------------------------------------
    async def _bare(self, pod: Obj, node: str | None) -> RecoveryResult:
        inp = self.inp
        name = placement.replacement_name(inp.pod.name, inp.request_id)
        reason = (f"{self.action} replacement of {inp.pod.name}: device {inp.device.resource_id} failed"
                  + (f"; prefers node {node}" if node else ""))
        body = placement.replacement_pod(pod, name, node, inp.incident_id, reason)
        try:
            made = await self.api.create_pod(inp.pod.namespace, body)
        except Conflict:
            existing = await self.api.get_pod(inp.pod.namespace, name)
            if existing is None or podview.annotations_of(existing).get(placement.CHANGED_BY) != inp.incident_id:
                return await self._result(False, f"a pod named {name} exists and is not podmedic's replacement")
            made = existing
        uid = made["metadata"]["uid"]
        self.notes.append(f"replacement {name} created, gated until {inp.pod.name} is gone")
        blocked = await self._evict()
        if blocked:
            await self.api.delete_pod(inp.pod.namespace, name, uid)
            return await self._result(False, blocked + f"; replacement {name} deleted")
        gone = await poll(self._old_gone, inp.timeout_s, inp.poll_s, "old pod")
        if gone is None:
            return await self._result(False, f"{inp.pod.name} still terminating after {inp.timeout_s:g}s")
        await remove_own_gate(self.api, inp.pod.namespace, name)
        check = Verification(inp.verify_progress)
        found = await poll(lambda: self._ready(check, name, uid), inp.timeout_s, inp.poll_s, "replacement")
        if found is None:
            return await self._result(False, check.failure(inp.timeout_s, f"replacement {name}"))
        where = "same node" if found["spec"].get("nodeName") == inp.pod.node else "another node"
        return await self._result(True, f"bare pod recreated as {name}, Ready on {found['spec'].get('nodeName')} "
                                        f"({where}); {check.progress_note(found)}", found)

    async def _old_gone(self) -> bool | None:
        """``True`` once the old pod is gone (or replaced under its name), else ``None``: ``poll``'s answer."""
        old = await self.api.get_pod(self.inp.pod.namespace, self.inp.pod.name)
        return True if old is None or old["metadata"].get("uid") != self.inp.pod.uid else None

    async def _ready(self, check: Verification, name: str, uid: str) -> Obj | None:
        pod = await self.api.get_pod(self.inp.pod.namespace, name)
        if pod is None or pod["metadata"].get("uid") != uid:
            return check.offer(None)
        return check.offer(pod if podview.is_ready(pod) and podview.devices_healthy(pod) else None)


async def remove_own_gate(api: LoopCalls, namespace: str, name: str) -> None:
    """Remove podmedic's scheduling gate from the pod, and no other controller's.

    ``schedulingGates`` merge by name (``patchStrategy:"merge" patchMergeKey:"name"`` on
    ``PodSpec.SchedulingGates`` in k8s.io/api core/v1/types.go): a patch listing the remaining
    gates would leave podmedic's in place whenever another gate is there too. The delete
    directive removes exactly podmedic's gate; a pod without it is left alone.
    """
    pod = await api.get_pod(namespace, name)
    present = ((pod or {}).get("spec") or {}).get("schedulingGates") or []
    if pod is not None and any(g.get("name") == placement.GATE for g in present):
        gate = {"name": placement.GATE, "$patch": "delete"}
        await api.patch_pod(namespace, name, {"spec": {"schedulingGates": [gate]}})
