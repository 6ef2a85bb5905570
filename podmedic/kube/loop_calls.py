"""Every call the worker's activities make to the cluster, awaited on the event loop.

Each request is described once (``podmedic/kube/api_requests.py``, as the synchronous gateway sends
it for the processes that run in threads) and answered as ``GatewayCore`` answers it: a pod, claim or
rule the worker's caches hold is read from them, a read is tried again on a 429 or 5xx, and the errors
are ``KubeError``'s. They are sent by ``LoopHttp`` (``podmedic/kube/loop_http.py``) instead of in a
thread: a write cost a quarter of the CPU. Where ``LoopHttp`` cannot reach the cluster (an HTTP proxy),
each request goes through the client in a thread; pods/exec always does (``exec_in_container``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from podmedic.domain.base import Obj
from podmedic.domain.placement_holds import CONFIGMAP
from podmedic.kube import api_requests as requests
from podmedic.kube.api_requests import ApiRequest
from podmedic.kube.core import READ_RETRY_PAUSES_S
from podmedic.kube.errors import Conflict, NotFound, NotServed, ServerError, Throttled, from_answer
from podmedic.kube.holds import hold_patch, holds_configmap
from podmedic.kube.loop_http import Answer
from podmedic.kube.pool_nodes import of_pool
from podmedic.kube.throttle import budget_refusal

if TYPE_CHECKING:
    from podmedic.kube.gateway import KubeGateway


Around = Callable[[Awaitable[Any]], Awaitable[Any]]


async def _plain(call: Awaitable[Any]) -> Any:
    return await call


class LoopCalls:
    """The activities' calls to the cluster, as coroutines, over one ``KubeGateway``'s connection and caches."""

    def __init__(self, kube: KubeGateway, around: Around = _plain) -> None:
        """``around`` awaits each request: the worker's activities stay alive while one waits for its
        turn in the QPS budget (``activities/heartbeat.py``, ``kept_alive``)."""
        self.kube = kube
        self._around = around

    async def _call(self, req: ApiRequest) -> Obj:
        http = self.kube.loop_http
        if not http.usable:
            found: Obj = await self._around(asyncio.to_thread(self.kube._request, req))
            return found
        result: Obj = await self._around(http.call(req, self.kube.user_agent))
        return result

    async def _exchange(self, req: ApiRequest, *, timeout_s: float | None = None,
                        throttled_again: bool = True) -> Answer:
        """``LoopHttp.exchange``: the answer whatever its status."""
        http = self.kube.loop_http
        if not http.usable:
            got: Answer = await self._around(asyncio.to_thread(self.kube._exchange, req, timeout_s=timeout_s))
            return got
        answer: Answer = await self._around(http.exchange(req, self.kube.user_agent, timeout_s=timeout_s,
                                                          throttled_again=throttled_again))
        return answer

    async def _read(self, req: ApiRequest) -> Obj:
        """``_call`` tried again after 0.1 s and 0.3 s on a 429 or 5xx, as ``GatewayCore._read``."""
        for pause in READ_RETRY_PAUSES_S:
            try:
                return await self._call(req)
            except (ServerError, Throttled):
                await asyncio.sleep(pause)
        return await self._call(req)

    async def _found(self, req: ApiRequest) -> Obj | None:
        """``_read``; ``None`` when the object is not there (404)."""
        try:
            return await self._read(req)
        except NotFound:
            return None

    async def _rule_version(self) -> str:
        if self.kube.discovered_taint_rules() is None:  # discovery: a few blocking reads, once per process
            await asyncio.to_thread(self.kube.taint_rule_api)
        return self.kube.taint_rule_version()

    # -- reads -----------------------------------------------------------------------------
    async def get_pod(self, namespace: str, name: str, *, fresh: bool = False) -> Obj | None:
        """``KubeGateway.get_pod``: the cached pod, else the API server's; ``None`` when it is gone."""
        if not fresh and self.kube.pods is not None and (cached := self.kube.pods.get(namespace, name)) is not None:
            return cached
        return await self._found(requests.get_pod(namespace, name))

    async def get_claim(self, namespace: str, name: str, *, fresh: bool = False) -> Obj | None:
        """``KubeGateway.get_claim``: the cached claim, else the API server's; ``None`` when it is gone."""
        if not fresh and self.kube.claims is not None and (cached := self.kube.claims.get(namespace, name)) is not None:
            return cached
        return await self._found(requests.get_claim(namespace, name))

    async def get_owner(self, api_version: str, plural: str, namespace: str, name: str) -> Obj | None:
        """A pod's owner (a Job, JobSet, StatefulSet, LeaderWorkerSet, ...: any namespaced kind, by its
        ownerReference's apiVersion), or ``None`` if it is gone."""
        return await self._found(requests.get_owner(api_version, plural, namespace, name))

    async def get_node(self, name: str) -> Obj | None:
        """A Node, or ``None``."""
        return await self._found(requests.get_node(name))

    async def list_pods(self, namespace: str, label_selector: str) -> list[Obj]:
        """Pods in ``namespace`` matching ``label_selector`` (from the pod cache when it is current)."""
        if self.kube.pods is not None and (cached := self.kube.pods.matching(namespace, label_selector)) is not None:
            return cached
        return _items(await self._read(requests.list_pods(namespace, label_selector)))

    async def list_pods_on_node(self, node: str) -> list[Obj]:
        """Pods of every namespace bound to ``node`` (from the pod cache when it is current)."""
        if self.kube.pods is not None and (cached := self.kube.pods.on_node(node)) is not None:
            return cached
        return _items(await self._read(requests.list_pods_on_node(node)))

    async def pool_node(self, driver: str, pool: str) -> str | None:
        """The node of a node-local pool (``podmedic/kube/pool_nodes.py``): known, or read from its slices
        now; ``None`` for a network-attached pool or one no slice publishes."""
        nodes = self.kube.pool_nodes
        if (node := nodes.get(driver, pool)) is not None:
            return node
        nodes.learn(await self.pool_slices(driver, pool))
        return nodes.get(driver, pool)

    async def get_taint_rule(self, name: str, *, fresh: bool = False) -> Obj | None:
        """``KubeGateway.get_taint_rule``: the cached rule, else the API server's; ``None`` when there is
        none (or the cluster serves no DeviceTaintRule)."""
        if not fresh and self.kube.rules is not None and (cached := self.kube.rules.get("", name)) is not None:
            return cached
        try:
            return await self._read(requests.get_taint_rule(await self._rule_version(), name))
        except (NotFound, NotServed):
            return None

    async def list_taint_rules(self, label_selector: str = "") -> list[Obj]:
        """``KubeGateway.list_taint_rules``: none when the cluster serves no DeviceTaintRule."""
        try:
            version = await self._rule_version()
        except NotServed:
            return []
        return _items(await self._read(requests.list_taint_rules(version, label_selector)))

    async def list_slices(self, field_selector: str = "") -> list[Obj]:
        """``KubeGateway.list_slices``."""
        return _items(await self._read(requests.list_slices(field_selector)))

    async def pool_slices(self, driver: str, pool: str) -> list[Obj]:
        """``KubeGateway.pool_slices``."""
        return of_pool(await self.list_slices(self.kube.pool_nodes.slice_selector(driver, pool)), pool)

    async def list_claims(self) -> list[Obj]:
        """``KubeGateway.list_claims``."""
        return _items(await self._read(requests.list_claims()))

    async def list_nodes(self, label_selector: str = "") -> list[Obj]:
        """``KubeGateway.list_nodes``."""
        return _items(await self._read(requests.list_nodes(label_selector)))

    # -- writes ----------------------------------------------------------------------------
    async def patch_node(self, name: str, body: Obj) -> Obj:
        """Merge-patch a Node (cordon, taints, annotations); a ``metadata.resourceVersion`` in ``body``
        makes a concurrent change a ``Conflict``."""
        return await self._call(requests.patch_node(name, body))

    async def patch_node_metadata(self, name: str, labels: dict[str, str | None],
                                  annotations: dict[str, str | None]) -> Obj:
        """Merge-patch a node's labels and annotations (``None`` removes one)."""
        return await self.patch_node(name, {"metadata": {"labels": labels, "annotations": annotations}})

    async def patch_pod(self, namespace: str, name: str, body: Obj) -> Obj:
        """Patch a pod (strategic merge; ``None`` removes a field)."""
        return await self._call(requests.patch_pod(namespace, name, body))

    async def probe_pod(self, namespace: str, body: Obj) -> Obj:
        """Create ``body`` with ``dryRun=All``: admission (webhooks included) runs, nothing is stored."""
        return await self._call(requests.probe_pod(namespace, body))

    async def try_evict(self, namespace: str, name: str, uid: str) -> str | None:
        """Evict the pod ``uid`` through the Eviction API; ``None`` when evicted (or already gone or
        replaced), else why a PodDisruptionBudget blocks it (429), in the budget's own words."""
        req = requests.evict_pod(namespace, name, uid)
        answer = await self._exchange(req)
        if answer.ok or answer.status == 404:
            return None
        if answer.status == 409 and not await self._still_there(namespace, name, uid):
            return None  # replaced: the UID precondition no longer matches
        if answer.status != 429:
            # A 409 while the same pod is still there is a write race in the API server: not evicted, a
            # retryable error, never "evicted" (the rung would wait for a replacement that cannot come).
            raise from_answer(answer.status, answer.text, answer.reason, req.what)
        return budget_refusal(answer.text)

    async def _still_there(self, namespace: str, name: str, uid: str) -> bool:
        """Whether the pod ``uid`` still exists and is not being deleted."""
        meta = (await self.get_pod(namespace, name) or {}).get("metadata") or {}
        return meta.get("uid") == uid and not meta.get("deletionTimestamp")

    async def put_hold(self, namespace: str, key: str, text: str, who: str) -> None:
        """Write one placement hold (create the ConfigMap on first use); ``who`` is its last writer."""
        patch = hold_patch(key, text, who)
        try:
            await self._call(requests.patch_configmap(namespace, CONFIGMAP, patch))
            return
        except NotFound:
            pass
        try:
            await self._call(requests.create_configmap(namespace, holds_configmap(namespace, key, text, who)))
        except Conflict:  # another incident created it meanwhile: add to it
            await self._call(requests.patch_configmap(namespace, CONFIGMAP, patch))

    async def drop_hold(self, namespace: str, key: str) -> None:
        """Remove one placement hold; nothing to do when it (or the ConfigMap) is gone."""
        with contextlib.suppress(NotFound):
            await self._call(requests.patch_configmap(namespace, CONFIGMAP, {"data": {key: None}}))

    async def proxy_post(self, path: str, body: Obj | None, *, headers: dict[str, str] | None = None,
                         query: list[tuple[str, str]] | None = None, timeout_s: float) -> tuple[int, str]:
        """``KubeGateway.proxy_post``: ``(status, body text)`` whatever the status; a 429 of the workload is
        its answer, not sent again."""
        answer = await self._exchange(requests.proxy_post(path, body, headers, query), timeout_s=timeout_s,
                                      throttled_again=False)
        return answer.status, answer.text

    async def exec_in_container(self, namespace: str, name: str, container: str | None, command: list[str],
                                timeout_s: float = 10.0) -> tuple[int, str]:
        """``KubeGateway.exec_in_container``, in a thread: pods/exec is a WebSocket session, which ``LoopHttp``
        does not speak, and the client's is synchronous (``kubernetes.stream``). One per in-place restart."""
        done: tuple[int, str] = await self._around(
            asyncio.to_thread(self.kube.exec_in_container, namespace, name, container, command, timeout_s))
        return done

    async def create_pod(self, namespace: str, body: Obj) -> Obj:
        """Create a pod; ``Conflict`` if the name exists."""
        return await self._call(requests.create_pod(namespace, body))

    async def delete_pod(self, namespace: str, name: str, uid: str, grace_s: float | None = None) -> None:
        """``KubeGateway.delete_pod``: a missing or replaced pod is fine."""
        with contextlib.suppress(NotFound, Conflict):
            await self._call(requests.delete_pod(namespace, name, uid, grace_s))

    async def patch_pod_annotations(self, namespace: str, name: str, annotations: dict[str, str | None], *,
                                    resource_version: str | None = None) -> Obj:
        """``KubeGateway.patch_pod_annotations``: ``Conflict`` when ``resource_version`` is not the pod's."""
        return await self._call(requests.annotate_pod(namespace, name, annotations, resource_version))

    async def create_event(self, namespace: str, body: Obj) -> None:
        """``KubeGateway.create_event``."""
        await self._call(requests.create_event(namespace, body))

    async def create_taint_rule(self, body: Obj) -> Obj:
        """``KubeGateway.create_taint_rule``: ``Conflict`` if the name exists, ``NotServed`` if no version is."""
        return await self._call(requests.create_taint_rule(await self._rule_version(), body))

    async def patch_taint_rule(self, name: str, body: Obj) -> Obj:
        """``KubeGateway.patch_taint_rule``."""
        return await self._call(requests.patch_taint_rule(await self._rule_version(), name, body))

    async def delete_taint_rule_if_unchanged(self, name: str, resource_version: str) -> None:
        """``KubeGateway.delete_taint_rule_if_unchanged``: a missing rule is fine."""
        with contextlib.suppress(NotFound, NotServed):
            await self._call(requests.delete_taint_rule(await self._rule_version(), name, resource_version))


def _items(listing: Obj) -> list[Obj]:
    items: list[Obj] = listing.get("items") or []
    return items
