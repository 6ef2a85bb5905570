"""The requests the activities make one at a time, described once: path, query, body, content type.

The worker's activities send them on its event loop (``podmedic/kube/loop_http.py``); synchronous
callers (the CLI, the ingest, an activity's helper of several calls run in a thread) send the same
through the ``kubernetes`` client's connection (``GatewayCore._request``). Each is
described here once, in the shape the generated client sends (kubernetes-client/python 37,
``CoreV1Api.patch_namespaced_pod`` and ``ResourceV1Api``): a patch of a dict body is a strategic
merge patch, and podmedic's writes name ``fieldManager=podmedic``.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Any

FIELD_MANAGER = "podmedic"
JSON = "application/json"
STRATEGIC_MERGE = "application/strategic-merge-patch+json"
"""What the client sends a dict patch as (rest.py turns its first choice, a JSON patch, into this)."""
RESOURCE_GROUP = "resource.k8s.io"


@dataclass(frozen=True)
class ApiRequest:
    """One request to the API server, and what to call it in errors and logs (``what``)."""

    what: str
    method: str
    path: str
    query: tuple[tuple[str, str], ...] = ()
    body: Any = None
    content_type: str = JSON
    headers: tuple[tuple[str, str], ...] = ()

    def target(self) -> str:
        """The path with its query string, as sent."""
        return f"{self.path}?{urllib.parse.urlencode(self.query)}" if self.query else self.path


_MANAGED = (("fieldManager", FIELD_MANAGER),)


def _seg(value: str) -> str:
    return urllib.parse.quote(value, safe="")


def get_pod(namespace: str, name: str) -> ApiRequest:
    """``GET`` a pod."""
    return ApiRequest(f"get pod {namespace}/{name}", "GET", f"/api/v1/namespaces/{_seg(namespace)}/pods/{_seg(name)}")


def patch_pod(namespace: str, name: str, body: Any, what: str = "patch pod") -> ApiRequest:
    """Strategic-merge-patch a pod (``None`` removes a field)."""
    return ApiRequest(f"{what} {namespace}/{name}", "PATCH",
                      f"/api/v1/namespaces/{_seg(namespace)}/pods/{_seg(name)}", _MANAGED, body, STRATEGIC_MERGE)


def annotate_pod(namespace: str, name: str, annotations: dict[str, str | None],
                 resource_version: str | None = None) -> ApiRequest:
    """Merge annotations into a pod (``None`` removes one); with ``resource_version``, only over that version
    (else 409 Conflict: the API server's optimistic concurrency for a patch that names it)."""
    meta: dict[str, Any] = {"annotations": annotations}
    if resource_version:
        meta["resourceVersion"] = resource_version
    return patch_pod(namespace, name, {"metadata": meta}, "annotate pod")


def create_event(namespace: str, body: Any) -> ApiRequest:
    """``POST`` a core/v1 Event."""
    return ApiRequest(f"create event in {namespace}", "POST", f"/api/v1/namespaces/{_seg(namespace)}/events",
                      body=body)


def _rules(version: str) -> str:
    return f"/apis/{RESOURCE_GROUP}/{version}/devicetaintrules"


def get_taint_rule(version: str, name: str) -> ApiRequest:
    """``GET`` a DeviceTaintRule at ``version`` (``v1``, ``v1beta2``, ...)."""
    return ApiRequest(f"get devicetaintrule {name}", "GET", f"{_rules(version)}/{_seg(name)}")


def create_taint_rule(version: str, body: Any) -> ApiRequest:
    """``POST`` a DeviceTaintRule, its ``apiVersion`` set to ``version``'s."""
    name = body["metadata"]["name"]
    return ApiRequest(f"create devicetaintrule {name}", "POST", _rules(version), _MANAGED,
                      {**body, "apiVersion": f"{RESOURCE_GROUP}/{version}"})


def patch_taint_rule(version: str, name: str, body: Any) -> ApiRequest:
    """Strategic-merge-patch a DeviceTaintRule."""
    return ApiRequest(f"patch devicetaintrule {name}", "PATCH", f"{_rules(version)}/{_seg(name)}", _MANAGED, body,
                      STRATEGIC_MERGE)


def delete_taint_rule(version: str, name: str, resource_version: str | None = None) -> ApiRequest:
    """``DELETE`` a DeviceTaintRule; with ``resource_version``, only that version (a precondition: 409 if not)."""
    body = {"preconditions": {"resourceVersion": resource_version}} if resource_version else None
    return ApiRequest(f"delete devicetaintrule {name}", "DELETE", f"{_rules(version)}/{_seg(name)}", body=body)


def _listed(what: str, path: str, label_selector: str = "", field_selector: str = "") -> ApiRequest:
    query = (*((("labelSelector", label_selector),) if label_selector else ()),
             *((("fieldSelector", field_selector),) if field_selector else ()))
    return ApiRequest(" ".join(filter(None, (what, label_selector, field_selector))), "GET", path, query)


def list_taint_rules(version: str, label_selector: str = "") -> ApiRequest:
    """``GET`` every DeviceTaintRule, or those ``label_selector`` selects."""
    return _listed("list devicetaintrules", _rules(version), label_selector)


def list_slices(field_selector: str = "") -> ApiRequest:
    """``GET`` ResourceSlices (``resource.k8s.io/v1``), all or those ``field_selector`` selects."""
    return _listed("list resourceslices", f"/apis/{RESOURCE_GROUP}/v1/resourceslices", field_selector=field_selector)


def list_claims() -> ApiRequest:
    """``GET`` every ResourceClaim of every namespace (``resource.k8s.io/v1``)."""
    return _listed("list resourceclaims", f"/apis/{RESOURCE_GROUP}/v1/resourceclaims")


def list_pods(namespace: str, label_selector: str) -> ApiRequest:
    """``GET`` the pods of ``namespace`` that ``label_selector`` selects."""
    return _listed(f"list pods {namespace}", f"/api/v1/namespaces/{_seg(namespace)}/pods", label_selector)


def list_pods_on_node(node: str) -> ApiRequest:
    """``GET`` the pods of every namespace bound to ``node`` (field selector ``spec.nodeName``)."""
    return _listed("list pods", "/api/v1/pods", field_selector=f"spec.nodeName={node}")


def get_owner(api_version: str, plural: str, namespace: str, name: str) -> ApiRequest:
    """``GET`` a namespaced object by its ownerReference's ``apiVersion`` and its kind's plural (a Job,
    JobSet, StatefulSet, LeaderWorkerSet, ...)."""
    group, _, version = api_version.rpartition("/")
    base = f"/apis/{group}/{version}" if group else f"/api/{version}"
    return ApiRequest(f"get {plural}.{group or 'core'} {namespace}/{name}", "GET",
                      f"{base}/namespaces/{_seg(namespace)}/{plural}/{_seg(name)}")


def get_claim(namespace: str, name: str) -> ApiRequest:
    """``GET`` a ResourceClaim (``resource.k8s.io/v1``)."""
    return ApiRequest(f"get resourceclaim {namespace}/{name}", "GET",
                      f"/apis/{RESOURCE_GROUP}/v1/namespaces/{_seg(namespace)}/resourceclaims/{_seg(name)}")


def get_node(name: str) -> ApiRequest:
    """``GET`` a Node."""
    return ApiRequest(f"get node {name}", "GET", f"/api/v1/nodes/{_seg(name)}")


def list_nodes(label_selector: str = "") -> ApiRequest:
    """``GET`` every Node, or those ``label_selector`` selects."""
    return _listed("list nodes", "/api/v1/nodes", label_selector)


def patch_node(name: str, body: Any) -> ApiRequest:
    """Strategic-merge-patch a Node (``None`` removes a field)."""
    return ApiRequest(f"patch node {name}", "PATCH", f"/api/v1/nodes/{_seg(name)}", _MANAGED, body, STRATEGIC_MERGE)


def create_pod(namespace: str, body: Any) -> ApiRequest:
    """``POST`` a pod."""
    name = (body.get("metadata") or {}).get("name", "")
    return ApiRequest(f"create pod {namespace}/{name}", "POST", f"/api/v1/namespaces/{_seg(namespace)}/pods",
                      _MANAGED, body)


def probe_pod(namespace: str, body: Any) -> ApiRequest:
    """``POST`` a pod with ``dryRun=All``: admission (webhooks included) runs, nothing is stored."""
    name = body["metadata"].get("name") or body["metadata"].get("generateName", "")
    return ApiRequest(f"create pod {namespace}/{name} (dry run)", "POST", f"/api/v1/namespaces/{_seg(namespace)}/pods",
                      (("dryRun", "All"), *_MANAGED), body)


def evict_pod(namespace: str, name: str, uid: str) -> ApiRequest:
    """``POST`` an Eviction (policy/v1) of the pod with this UID: the API server deletes it unless a
    PodDisruptionBudget forbids it (429, the budget named in the Status's causes)."""
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace},
            "deleteOptions": {"preconditions": {"uid": uid}}}
    return ApiRequest(f"evict pod {namespace}/{name}", "POST",
                      f"/api/v1/namespaces/{_seg(namespace)}/pods/{_seg(name)}/eviction", body=body)


def _configmap(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{_seg(namespace)}/configmaps/{_seg(name)}"


def get_configmap(namespace: str, name: str) -> ApiRequest:
    """``GET`` a ConfigMap."""
    return ApiRequest(f"get configmap {namespace}/{name}", "GET", _configmap(namespace, name))


def patch_configmap(namespace: str, name: str, body: Any) -> ApiRequest:
    """Strategic-merge-patch a ConfigMap (``None`` removes a data key)."""
    return ApiRequest(f"patch configmap {namespace}/{name}", "PATCH", _configmap(namespace, name), _MANAGED, body,
                      STRATEGIC_MERGE)


def create_configmap(namespace: str, body: Any) -> ApiRequest:
    """``POST`` a ConfigMap."""
    return ApiRequest(f"create configmap {namespace}/{body['metadata']['name']}", "POST",
                      f"/api/v1/namespaces/{_seg(namespace)}/configmaps", _MANAGED, body)


def proxy_post(path: str, body: Any, headers: dict[str, str] | None = None,
               query: list[tuple[str, str]] | None = None) -> ApiRequest:
    """``POST`` through a proxy subresource (``/api/v1/namespaces/{ns}/pods/{name}:{port}/proxy/...`` or
    ``/api/v1/nodes/{node}/proxy/...``); ``body`` sent as JSON (none when ``None``)."""
    return ApiRequest(f"POST {path}", "POST", path, tuple(query or ()), body, JSON, tuple((headers or {}).items()))


def delete_pod(namespace: str, name: str, uid: str, grace_s: float | None = None) -> ApiRequest:
    """``DELETE`` the pod with this UID (a precondition: 409 if the pod of that name is another), within
    ``grace_s`` when given, else its own grace period."""
    body: dict[str, Any] = {"preconditions": {"uid": uid}}
    if grace_s is not None:
        body["gracePeriodSeconds"] = int(grace_s)
    return ApiRequest(f"delete pod {namespace}/{name}", "DELETE",
                      f"/api/v1/namespaces/{_seg(namespace)}/pods/{_seg(name)}", body=body)
