"""The one module that imports ``kubernetes``: a narrow gateway to the cluster.

Everything podmedic reads or changes in a cluster goes through ``KubeGateway``, so the
RBAC it needs is visible in one place, and API errors become the few exception types of
``podmedic/kube/errors.py``, which Temporal retry policies name by class.
"""

from __future__ import annotations

import contextlib
import copy
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from podmedic import __version__
from podmedic.domain.base import Obj
from podmedic.kube.errors import (
    Conflict,
    Forbidden,
    InvalidObject,
    KubeError,
    NotFound,
    ProxyTimeout,
    ServerError,
    Throttled,
    from_answer,
)

FIELD_MANAGER = "podmedic"
# Every request carries ``podmedic-<component>/<version>`` (``podmedic/<version>`` when no component is set),
# so API server audit logs and the simulator's recorder (podmedic_sim/audit.py) can tell who called.
USER_AGENT = "podmedic"
READ_RETRY_PAUSES_S = (0.1, 0.3)
"""Pauses between the tries of a read that met a 429 or a 5xx (``KubeGateway._read``)."""
POOL_CONNECTIONS = 48
"""Kept-alive connections to the API server: one per thread that calls it at once (the worker's
40 in ``activities/base.py``); the client's default, 5 per CPU, would open and drop the rest."""
# The errors are defined in podmedic/kube/errors.py and imported from here by callers.
__all__ = ["Conflict", "Forbidden", "InvalidObject", "KubeError", "KubeGateway", "NotFound", "Obj", "ProxyTimeout",
           "ServerError", "Throttled", "user_agent"]


def user_agent(component: str = "") -> str:
    """The User-Agent of ``component``'s requests: ``podmedic-worker/0.1.0``, or ``podmedic/0.1.0``."""
    return f"{USER_AGENT}-{component}/{__version__}" if component else f"{USER_AGENT}/{__version__}"


def _translate(exc: ApiException, what: str) -> KubeError:
    return from_answer(int(exc.status or 0), exc.body, exc.reason, what)


class KubeGateway:
    """Thread-safe, synchronous access to the API calls podmedic makes (run it in a thread)."""

    def __init__(self, kubeconfig: Path | None = None, *, timeout_s: float = 15.0, component: str = "") -> None:
        settings = client.Configuration()
        settings.connection_pool_maxsize = POOL_CONNECTIONS
        if kubeconfig is not None:
            config.load_kube_config(config_file=str(kubeconfig), client_configuration=settings)
        else:
            try:
                config.load_incluster_config(client_configuration=settings)
            except config.ConfigException:
                config.load_kube_config(client_configuration=settings)
        api_client = client.ApiClient(settings)
        self._api = api_client
        self._owns_pool = True
        self.component = component
        api_client.user_agent = user_agent(component)
        self.core = client.CoreV1Api(api_client)
        self.resource = client.ResourceV1Api(api_client)
        self.timeout_s = timeout_s

    def for_component(self, component: str) -> KubeGateway:
        """This gateway's connection, labelled as ``component`` (``worker``, ``ingest``) in the User-Agent.

        The copy shares the connection pool; closing it is a no-op, the original owns the pool.
        """
        clone = copy.copy(self)
        api = client.ApiClient(self._api.configuration)
        api.rest_client.close()
        api.rest_client = self._api.rest_client
        api.user_agent = user_agent(component)
        clone._api, clone._owns_pool, clone.component = api, False, component
        clone.core, clone.resource = client.CoreV1Api(api), client.ResourceV1Api(api)
        return clone

    def close(self) -> None:
        """Release the connection pool."""
        if self._owns_pool:
            self._api.close()

    def _call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Obj:
        try:
            resp = fn(*args, _preload_content=False, _request_timeout=self.timeout_s, **kwargs)
        except ApiException as exc:
            raise _translate(exc, what) from exc
        except OSError as exc:
            raise ServerError(f"{what}: {exc}") from exc
        data = resp.data
        result: Obj = json.loads(data) if data else {}
        return result

    def _read(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Obj:
        """``_call`` for a read: a 429 or 5xx is tried again twice (0.1 s, then 0.3 s later) before it fails.

        A step reads several objects per attempt; at 30 % injected 5xx (``python -m benchmarks faults``),
        discover's five reads all succeeded in only one attempt in six, and an incident failed after
        ten attempts. A read changes nothing, so trying it again here is always safe.
        """
        for pause in READ_RETRY_PAUSES_S:
            try:
                return self._call(what, fn, *args, **kwargs)
            except (ServerError, Throttled):
                time.sleep(pause)
        return self._call(what, fn, *args, **kwargs)

    # -- reads -------------------------------------------------------------------------------
    def list_claims(self) -> list[Obj]:
        """Every ResourceClaim in the cluster."""
        items: list[Obj] = self._read("list resourceclaims", self.resource.list_resource_claim_for_all_namespaces)[
            "items"
        ]
        return items

    def list_slices(self, field_selector: str = "") -> list[Obj]:
        """ResourceSlices (drivers publish device taints there), all or by ``field_selector``
        (``spec.driver``, ``spec.pool.name``, ``spec.nodeName``)."""
        items: list[Obj] = self._read(f"list resourceslices {field_selector}".strip(),
                                      self.resource.list_resource_slice,
                                      **({"field_selector": field_selector} if field_selector else {}))["items"]
        return items

    def get_pod(self, namespace: str, name: str) -> Obj | None:
        """A pod, or ``None`` if it is gone."""
        try:
            return self._read(f"get pod {namespace}/{name}", self.core.read_namespaced_pod, name, namespace)
        except NotFound:
            return None

    def list_pods(self, namespace: str, label_selector: str) -> list[Obj]:
        """Pods in ``namespace`` matching ``label_selector``."""
        items: list[Obj] = self._read(
            f"list pods {namespace} {label_selector}", self.core.list_namespaced_pod, namespace,
            label_selector=label_selector,
        )["items"]
        return items

    def list_pods_on_node(self, node: str) -> list[Obj]:
        """Pods of every namespace bound to ``node`` (field selector ``spec.nodeName``)."""
        items: list[Obj] = self._read(f"list pods on {node}", self.core.list_pod_for_all_namespaces,
                                      field_selector=f"spec.nodeName={node}")["items"]
        return items

    def get_taint_rule(self, name: str) -> Obj | None:
        """A DeviceTaintRule, or ``None``."""
        try:
            return self._read(f"get devicetaintrule {name}", self.resource.read_device_taint_rule, name)
        except NotFound:
            return None

    # -- writes ------------------------------------------------------------------------------
    def patch_pod_annotations(self, namespace: str, name: str, annotations: dict[str, str | None]) -> Obj:
        """Merge-patch annotations (``None`` removes one)."""
        body = {"metadata": {"annotations": annotations}}
        return self._call(
            f"annotate pod {namespace}/{name}", self.core.patch_namespaced_pod, name, namespace, body,
            field_manager=FIELD_MANAGER,
        )

    def create_taint_rule(self, body: Obj) -> Obj:
        """Create a DeviceTaintRule; raises ``Conflict`` if the name exists."""
        name = body["metadata"]["name"]
        return self._call(
            f"create devicetaintrule {name}", self.resource.create_device_taint_rule, body,
            field_manager=FIELD_MANAGER,
        )

    def delete_taint_rule(self, name: str) -> None:
        """Delete a DeviceTaintRule; a missing one is fine."""
        with contextlib.suppress(NotFound):
            self._call(f"delete devicetaintrule {name}", self.resource.delete_device_taint_rule, name)

    def patch_taint_rule(self, name: str, body: Obj) -> Obj:
        """Merge-patch a DeviceTaintRule; put ``metadata.resourceVersion`` in ``body`` to get
        ``Conflict`` when someone changed it since it was read."""
        return self._call(f"patch devicetaintrule {name}", self.resource.patch_device_taint_rule, name, body,
                          field_manager=FIELD_MANAGER)

    def delete_taint_rule_if_unchanged(self, name: str, resource_version: str) -> None:
        """Delete a DeviceTaintRule only if it is still at ``resource_version`` (``Conflict``
        otherwise); a missing one is fine."""
        body = client.V1DeleteOptions(preconditions=client.V1Preconditions(resource_version=resource_version))
        with contextlib.suppress(NotFound):
            self._call(f"delete devicetaintrule {name}", self.resource.delete_device_taint_rule, name, body=body)

    def get_node(self, name: str) -> Obj | None:
        """A Node, or ``None``."""
        try:
            return self._read(f"get node {name}", self.core.read_node, name)
        except NotFound:
            return None

    def patch_node(self, name: str, body: Obj) -> Obj:
        """Merge-patch a Node (cordon, taints, annotations); a ``metadata.resourceVersion`` in
        ``body`` makes a concurrent change a ``Conflict``."""
        return self._call(f"patch node {name}", self.core.patch_node, name, body, field_manager=FIELD_MANAGER)

    def evict_pod(self, namespace: str, name: str, uid: str) -> None:
        """Evict through the Eviction API (PodDisruptionBudgets apply; 429 when blocked)."""
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
            "deleteOptions": {"preconditions": {"uid": uid}},
        }
        # NotFound: already gone; Conflict: replaced by a pod with another UID.
        with contextlib.suppress(NotFound, Conflict):
            self._call(f"evict pod {namespace}/{name}", self.core.create_namespaced_pod_eviction, name, namespace, body)

    def create_event(self, namespace: str, body: Obj) -> None:
        """Record a Kubernetes Event."""
        self._call(f"create event in {namespace}", self.core.create_namespaced_event, namespace, body)

    # -- generic list/watch for the ingest's cluster sources ---------------------------------
    def _lister(self, kind: str) -> Callable[..., Any]:
        listers: dict[str, Callable[..., Any]] = {
            "pods": self.core.list_pod_for_all_namespaces,
            "resourceslices": self.resource.list_resource_slice,
            "events": self.core.list_event_for_all_namespaces,
        }
        if kind not in listers:
            raise ValueError(f"kind {kind!r} cannot be watched; one of {', '.join(sorted(listers))}")
        return listers[kind]

    def list_objects(self, kind: str, *, field_selector: str | None = None,
                     page_size: int = 500) -> tuple[list[Obj], str]:
        """Every object of ``kind`` (``pods``, ``resourceslices`` or ``events``) across all
        namespaces, page by page, as plain dicts, with the resourceVersion to watch from.

        The first page's resourceVersion is returned: a watch from it replays anything that
        changed while later pages were read, so nothing falls between the list and the watch.
        """
        lister = self._lister(kind)
        selector = {"field_selector": field_selector} if field_selector else {}
        items: list[Obj] = []
        token: str | None = None
        version = ""
        while True:
            paging: dict[str, Any] = {"limit": page_size, **({"_continue": token} if token else {})}
            data = self._read(f"list {kind}", lister, **selector, **paging)
            items.extend(data.get("items") or [])
            meta = data.get("metadata") or {}
            version = version or str(meta.get("resourceVersion") or "")
            token = meta.get("continue") or None
            if not token:
                return items, version

    def watch_objects(self, kind: str, resource_version: str | None, *, timeout_s: int = 30,
                      field_selector: str | None = None) -> Iterator[tuple[str, Obj]]:
        """Changes of ``kind`` across all namespaces as ``(type, object dict)``, bookmarks
        included, until the server ends the watch after ``timeout_s``.

        Lines are decoded as plain JSON (no client models: ten times cheaper on busy
        clusters). Raises ``KubeError`` with status 410 when ``resource_version`` is too old
        (the caller relists) and ``ServerError`` when the stream breaks.
        """
        lister = self._lister(kind)
        selector = {"field_selector": field_selector} if field_selector else {}
        try:
            resp = lister(watch=True, resource_version=resource_version or None, timeout_seconds=timeout_s,
                          allow_watch_bookmarks=True, _preload_content=False,
                          _request_timeout=(self.timeout_s, timeout_s + self.timeout_s), **selector)
        except ApiException as exc:
            raise _translate(exc, f"watch {kind}") from exc
        except (OSError, urllib3.exceptions.HTTPError) as exc:
            raise ServerError(f"watch {kind}: {exc}") from exc
        try:
            for line in watch.watch.iter_resp_lines(resp):
                event = json.loads(line)
                obj: Obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    raise KubeError(f"watch {kind}: {obj.get('message')}", int(obj.get("code") or 0))
                yield str(event.get("type")), obj
        except (OSError, urllib3.exceptions.HTTPError, ValueError) as exc:
            raise ServerError(f"watch {kind}: stream broke: {exc}") from exc
        finally:
            resp.close()
            resp.release_conn()

    def proxy_post(self, path: str, body: Obj | None, *, headers: dict[str, str] | None = None,
                   query: list[tuple[str, str]] | None = None, timeout_s: float) -> tuple[int, str]:
        """POST through an API server proxy subresource (``/api/v1/namespaces/{ns}/pods/{name}:{port}/proxy/...``
        or ``/api/v1/nodes/{node}/proxy/...``) and return ``(status, body text)`` whatever the status.

        Non-2xx answers are returned, not raised: what the workload or kubelet said is the result.
        Raises ``ProxyTimeout`` when nothing answers within ``timeout_s`` and ``ServerError`` when
        the connection fails. Needs RBAC ``create`` on ``pods/proxy`` or ``nodes/proxy``.
        """
        header_params = {"Content-Type": "application/json", "Accept": "application/json", **(headers or {})}
        method, url, header_params, body_out, _ = self._api.param_serialize(
            "POST", path, query_params=query or [], header_params=header_params, body=body,
            auth_settings=["BearerToken"],
        )
        try:
            resp = self._api.call_api(method, url, header_params=header_params, body=body_out,
                                      _request_timeout=(min(self.timeout_s, timeout_s), timeout_s))
            resp.read()
        except urllib3.exceptions.TimeoutError as exc:
            raise ProxyTimeout(f"POST {path}: no answer within {timeout_s:g}s") from exc
        except (OSError, urllib3.exceptions.HTTPError) as exc:
            raise ServerError(f"POST {path}: {exc}") from exc
        except ApiException as exc:
            return int(exc.status or 0), str(exc.body or exc.reason or "")
        data = resp.data or b""
        return int(resp.status), data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data)

    def get_claim(self, namespace: str, name: str) -> Obj | None:
        """A ResourceClaim, or ``None`` if it is gone."""
        try:
            return self._read(f"get resourceclaim {namespace}/{name}", self.resource.read_namespaced_resource_claim,
                              name, namespace)
        except NotFound:
            return None

    # -- recovery: in-place restart and reschedule (activities/recovery/) -------------------
    def exec_in_container(self, namespace: str, name: str, container: str | None, command: list[str],
                          timeout_s: float = 10.0) -> tuple[int, str]:
        """Run ``command`` in the container through pods/exec (WebSocket channel protocol);
        returns ``(exit code, stdout + stderr)``. A container that does not run raises ``KubeError``."""
        from kubernetes.stream import stream  # imported here: it patches the ApiClient it is given

        # A private ApiClient: stream() swaps the client's request function while it runs,
        # which would send other threads' calls over the WebSocket.
        api = client.ApiClient(self._api.configuration)
        api.user_agent = self._api.user_agent
        try:
            kwargs: dict[str, Any] = {"command": command, "stderr": True, "stdout": True, "stdin": False,
                                      "tty": False, "_preload_content": False}
            if container:
                kwargs["container"] = container
            try:
                resp = stream(client.CoreV1Api(api).connect_get_namespaced_pod_exec, name, namespace, **kwargs)
            except ApiException as exc:
                raise KubeError(f"exec in {namespace}/{name}: {exc.reason}", int(exc.status or 0)) from exc
            try:
                resp.run_forever(timeout=timeout_s)
                if resp.is_open():
                    raise ServerError(f"exec in {namespace}/{name}: no answer within {timeout_s:g}s")
                output = (resp.read_stdout() or "") + (resp.read_stderr() or "")
                return int(resp.returncode), output.strip()
            finally:
                resp.close()
                # close() skips the socket when the server closed first: release it here.
                sock = getattr(resp, "sock", None)
                if sock is not None:
                    sock.shutdown()
        finally:
            api.close()

    def create_pod(self, namespace: str, body: Obj) -> Obj:
        """Create a pod; raises ``Conflict`` if the name exists."""
        name = body["metadata"].get("name", "")
        return self._call(f"create pod {namespace}/{name}", self.core.create_namespaced_pod, namespace, body,
                          field_manager=FIELD_MANAGER)

    def patch_pod(self, namespace: str, name: str, body: Obj) -> Obj:
        """Patch a pod (strategic merge; ``None`` removes a field)."""
        return self._call(f"patch pod {namespace}/{name}", self.core.patch_namespaced_pod, name, namespace, body,
                          field_manager=FIELD_MANAGER)

    def delete_pod(self, namespace: str, name: str, uid: str) -> None:
        """Delete the pod with this UID; a missing or replaced one is fine."""
        body = {"preconditions": {"uid": uid}}
        with contextlib.suppress(NotFound, Conflict):
            self._call(f"delete pod {namespace}/{name}", self.core.delete_namespaced_pod, name, namespace,
                       body=body)

    def try_evict(self, namespace: str, name: str, uid: str) -> str | None:
        """Evict through the Eviction API; ``None`` when evicted (or already gone), else why a
        PodDisruptionBudget blocks it (429), with the budget's own words."""
        body: Any = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace},
                     "deleteOptions": {"preconditions": {"uid": uid}}}
        try:
            self.core.create_namespaced_pod_eviction(name, namespace, body, _preload_content=False,
                                                     _request_timeout=self.timeout_s)
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
        except OSError as exc:
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

    def list_taint_rules(self) -> list[Obj]:
        """Every DeviceTaintRule."""
        items: list[Obj] = self._read("list devicetaintrules", self.resource.list_device_taint_rule)["items"]
        return items
