"""The one adapter that imports ``kubernetes``: a narrow gateway to the cluster.

Everything podmedic reads or changes in a cluster goes through ``KubeGateway``, so the
RBAC it needs is visible in one place, and API errors become the few exception types of
``podmedic/kube/errors.py``, which Temporal retry policies name by class. The connection is
``core.py``'s; list/watch, proxy and exec are ``streams.py``'s.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

from podmedic.domain.base import Obj
from podmedic.kube import api_requests as requests
from podmedic.kube.core import translate as _translate
from podmedic.kube.core import user_agent
from podmedic.kube.errors import (
    BadRequest,
    Conflict,
    Forbidden,
    InvalidObject,
    KubeError,
    NotFound,
    NotServed,
    ProxyTimeout,
    ServerError,
    Throttled,
)
from podmedic.kube.holds import HoldCalls
from podmedic.kube.leases import LeaseCalls
from podmedic.kube.loop_calls import LoopCalls
from podmedic.kube.pool_nodes import of_pool
from podmedic.kube.streams import StreamCalls

# The errors are defined in podmedic/kube/errors.py and imported from here by callers.
__all__ = ["BadRequest", "Conflict", "Forbidden", "InvalidObject", "KubeError", "KubeGateway", "NotFound", "NotServed",
           "Obj", "ProxyTimeout", "ServerError", "Throttled", "user_agent"]


class KubeGateway(StreamCalls, LeaseCalls, HoldCalls):
    """Thread-safe, synchronous access to the API calls podmedic makes (run it in a thread); ``aio`` has
    an incident's per-run calls as coroutines."""

    @property
    def aio(self) -> LoopCalls:
        """This gateway's per-incident calls awaited on the event loop (``podmedic/kube/loop_calls.py``)."""
        return LoopCalls(self)

    # -- reads -------------------------------------------------------------------------------
    def list_claims(self) -> list[Obj]:
        """Every ResourceClaim in the cluster."""
        items: list[Obj] = self._read_request(requests.list_claims())["items"]
        return items

    def list_slices(self, field_selector: str = "") -> list[Obj]:
        """ResourceSlices (drivers publish device taints there), all or by ``field_selector``: an API
        server supports only ``metadata.name``, ``spec.nodeName`` and ``spec.driver`` on them
        (kubernetes/api ``resource/v1/types.go``, ``ResourceSliceSelector*``); any other field is 400."""
        items: list[Obj] = self._read_request(requests.list_slices(field_selector))["items"]
        return items

    def pool_node(self, driver: str, pool: str) -> str | None:
        """The node of a node-local pool (``podmedic/kube/pool_nodes.py``): known, or read from its slices
        now; ``None`` for a network-attached pool or one no slice publishes."""
        if (node := self.pool_nodes.get(driver, pool)) is not None:
            return node
        self.pool_nodes.learn(self.pool_slices(driver, pool))
        return self.pool_nodes.get(driver, pool)

    def pool_slices(self, driver: str, pool: str) -> list[Obj]:
        """The ResourceSlices of one pool (``PoolNodes.slice_selector``)."""
        return of_pool(self.list_slices(self.pool_nodes.slice_selector(driver, pool)), pool)

    def learn_pools(self) -> int:
        """Learn the node of every node-local pool from all ResourceSlices, a page at a time; how many
        slices named one."""
        return sum(self.pool_nodes.learn(page) for page, _ in self.list_pages("resourceslices"))

    def get_pod(self, namespace: str, name: str, *, fresh: bool = False) -> Obj | None:
        """A pod, or ``None`` if it is gone: from the pod cache when it holds the pod (``start_caches``),
        unless ``fresh`` asks the API server."""
        if not fresh and self.pods is not None and (cached := self.pods.get(namespace, name)) is not None:
            return cached
        try:
            return self._read_request(requests.get_pod(namespace, name))
        except NotFound:
            return None

    def get_owner(self, api_version: str, plural: str, namespace: str, name: str) -> Obj | None:
        """A pod's owner (a Job, JobSet, StatefulSet, LeaderWorkerSet, ...: any namespaced kind, by its
        ownerReference's apiVersion), or ``None`` if it is gone."""
        group, _, version = api_version.rpartition("/")
        what = f"get {plural}.{group or 'core'} {namespace}/{name}"
        try:
            if not group:
                return self._read(what, self.core.read_namespaced_pod, name, namespace)
            return self._read(what, self.custom.get_namespaced_custom_object, group, version, namespace, plural, name)
        except NotFound:
            return None

    def list_pods(self, namespace: str, label_selector: str) -> list[Obj]:
        """Pods in ``namespace`` matching ``label_selector`` (from the pod cache when it is current)."""
        if self.pods is not None and (cached := self.pods.matching(namespace, label_selector)) is not None:
            return cached
        items: list[Obj] = self._read(
            f"list pods {namespace} {label_selector}", self.core.list_namespaced_pod, namespace,
            label_selector=label_selector,
        )["items"]
        return items

    def list_pods_on_node(self, node: str) -> list[Obj]:
        """Pods of every namespace bound to ``node`` (field selector ``spec.nodeName``; from the pod cache
        when it is current)."""
        if self.pods is not None and (cached := self.pods.on_node(node)) is not None:
            return cached
        items: list[Obj] = self._read(f"list pods on {node}", self.core.list_pod_for_all_namespaces,
                                      field_selector=f"spec.nodeName={node}")["items"]
        return items

    def get_taint_rule(self, name: str, *, fresh: bool = False) -> Obj | None:
        """A DeviceTaintRule, or ``None`` (also when the cluster serves none): from the rule cache when it
        holds the rule (``start_caches``), unless ``fresh`` asks the API server (a write over a cached
        version answered 409 Conflict)."""
        if not fresh and self.rules is not None and (cached := self.rules.get("", name)) is not None:
            return cached
        try:
            return self._read_request(requests.get_taint_rule(self.taint_rule_version(), name))
        except (NotFound, NotServed):
            return None

    # -- writes ------------------------------------------------------------------------------
    def patch_pod_annotations(self, namespace: str, name: str, annotations: dict[str, str | None], *,
                              resource_version: str | None = None) -> Obj:
        """Merge-patch annotations (``None`` removes one); with ``resource_version``, only over that version
        of the pod (else ``Conflict``: the API server's optimistic concurrency for a patch naming it)."""
        return self._request(requests.annotate_pod(namespace, name, annotations, resource_version))

    def create_taint_rule(self, body: Obj) -> Obj:
        """Create a DeviceTaintRule (in the version the cluster serves); raises ``Conflict`` if the name
        exists, ``NotServed`` if the cluster serves no DeviceTaintRule."""
        return self._request(requests.create_taint_rule(self.taint_rule_version(), body))

    def delete_taint_rule(self, name: str) -> None:
        """Delete a DeviceTaintRule; a missing one is fine."""
        with contextlib.suppress(NotFound, NotServed):
            self._request(requests.delete_taint_rule(self.taint_rule_version(), name))

    def patch_taint_rule(self, name: str, body: Obj) -> Obj:
        """Merge-patch a DeviceTaintRule; put ``metadata.resourceVersion`` in ``body`` to get
        ``Conflict`` when someone changed it since it was read."""
        return self._request(requests.patch_taint_rule(self.taint_rule_version(), name, body))

    def delete_taint_rule_if_unchanged(self, name: str, resource_version: str) -> None:
        """Delete a DeviceTaintRule only if it is still at ``resource_version`` (``Conflict``
        otherwise); a missing one is fine."""
        with contextlib.suppress(NotFound, NotServed):
            self._request(requests.delete_taint_rule(self.taint_rule_version(), name, resource_version))

    def get_node(self, name: str) -> Obj | None:
        """A Node, or ``None``."""
        try:
            return self._read_request(requests.get_node(name))
        except NotFound:
            return None

    def list_nodes(self, label_selector: str = "") -> list[Obj]:
        """Every Node, or those ``label_selector`` selects."""
        items: list[Obj] = self._read_request(requests.list_nodes(label_selector))["items"]
        return items

    def patch_node(self, name: str, body: Obj) -> Obj:
        """Merge-patch a Node (cordon, taints, annotations); a ``metadata.resourceVersion`` in
        ``body`` makes a concurrent change a ``Conflict``."""
        return self._request(requests.patch_node(name, body))

    def create_event(self, namespace: str, body: Obj) -> None:
        """Record a Kubernetes Event."""
        self._request(requests.create_event(namespace, body))

    def get_claim(self, namespace: str, name: str, *, fresh: bool = False) -> Obj | None:
        """A ResourceClaim, or ``None`` if it is gone: from the claim cache when it holds the claim, unless
        ``fresh`` asks the API server."""
        if not fresh and self.claims is not None and (cached := self.claims.get(namespace, name)) is not None:
            return cached
        try:
            return self._read(f"get resourceclaim {namespace}/{name}", self.resource.read_namespaced_resource_claim,
                              name, namespace)
        except NotFound:
            return None

    # -- recovery: in-place restart and reschedule (activities/recovery/) -------------------
    def patch_pod(self, namespace: str, name: str, body: Obj) -> Obj:
        """Patch a pod (strategic merge; ``None`` removes a field)."""
        return self._request(requests.patch_pod(namespace, name, body))

    def delete_pod(self, namespace: str, name: str, uid: str, grace_s: float | None = None) -> None:
        """Delete the pod with this UID (within ``grace_s`` when given, else its own grace period); a missing
        or replaced one is fine."""
        with contextlib.suppress(NotFound, Conflict):
            self._request(requests.delete_pod(namespace, name, uid, grace_s))

    def try_evict(self, namespace: str, name: str, uid: str) -> str | None:
        """Evict through the Eviction API; ``None`` when evicted (or already gone), else why a
        PodDisruptionBudget blocks it (429), with the budget's own words."""
        body: Any = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace},
                     "deleteOptions": {"preconditions": {"uid": uid}}}
        try:
            self._send(self.core.create_namespaced_pod_eviction, name, namespace, body)
        except ApiException as exc:
            if exc.status == 404 or (exc.status == 409 and not self._still_there(namespace, name, uid)):
                return None  # gone, or replaced: the UID precondition no longer matches
            if exc.status == 409:
                # A conflict while the same pod is still there (a write race in the API server):
                # not evicted; a retryable error, never "evicted" (the rung would wait for a
                # replacement that cannot come).
                raise _translate(exc, f"evict pod {namespace}/{name}") from exc
            if exc.status != 429:
                raise _translate(exc, f"evict pod {namespace}/{name}") from exc
            try:
                status = json.loads(exc.body or "{}")
            except ValueError:
                status = {}
            causes = [c.get("message", "") for c in (status.get("details") or {}).get("causes") or []]
            return "; ".join([status.get("message") or "eviction refused (429)", *filter(None, causes)])
        except (OSError, urllib3.exceptions.HTTPError) as exc:  # urllib3 gave up its retries
            raise ServerError(f"evict pod {namespace}/{name}: {exc}") from exc
        return None

    def _still_there(self, namespace: str, name: str, uid: str) -> bool:
        """Whether the pod ``uid`` still exists and is not being deleted."""
        pod = self.get_pod(namespace, name)
        meta = (pod or {}).get("metadata") or {}
        return meta.get("uid") == uid and not meta.get("deletionTimestamp")

    def patch_node_metadata(self, name: str, labels: dict[str, str | None],
                            annotations: dict[str, str | None]) -> Obj:
        """Merge-patch a node's labels and annotations (``None`` removes one)."""
        return self.patch_node(name, {"metadata": {"labels": labels, "annotations": annotations}})

    def list_taint_rules(self, label_selector: str = "") -> list[Obj]:
        """Every DeviceTaintRule, or those ``label_selector`` selects (none when the cluster serves none)."""
        try:
            version = self.taint_rule_version()
        except NotServed:
            return []
        items: list[Obj] = self._read_request(requests.list_taint_rules(version, label_selector))["items"]
        return items
