"""The gateway's calls the activities make one at a time, awaited on the event loop.

Same requests as ``KubeGateway``'s methods of the same names (both are built by
``podmedic/kube/api_requests.py``), answered the same way: a pod or rule the worker's caches hold is
read from them, a read is tried again on a 429 or 5xx, and the errors are ``KubeError``'s. They are
sent by ``LoopHttp`` (``podmedic/kube/loop_http.py``) instead of in a thread: an incident's Events,
annotations and DeviceTaintRule cost a quarter of the CPU. Where ``LoopHttp`` cannot reach the
cluster (an HTTP proxy), each call is the gateway's own, in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from podmedic.domain.base import Obj
from podmedic.kube import api_requests as requests
from podmedic.kube.api_requests import ApiRequest
from podmedic.kube.core import READ_RETRY_PAUSES_S
from podmedic.kube.errors import Conflict, NotFound, NotServed, ServerError, Throttled
from podmedic.kube.pool_nodes import of_pool

if TYPE_CHECKING:
    from podmedic.kube.gateway import KubeGateway


class LoopCalls:
    """``KubeGateway``'s calls of the activities, as coroutines."""

    def __init__(self, kube: KubeGateway) -> None:
        self.kube = kube

    async def _call(self, req: ApiRequest) -> Obj:
        http = self.kube.loop_http
        if not http.usable:
            return await asyncio.to_thread(self.kube._request, req)
        return await http.call(req, self.kube.user_agent)

    async def _read(self, req: ApiRequest) -> Obj:
        """``_call`` tried again after 0.1 s and 0.3 s on a 429 or 5xx, as ``GatewayCore._read``."""
        for pause in READ_RETRY_PAUSES_S:
            try:
                return await self._call(req)
            except (ServerError, Throttled):
                await asyncio.sleep(pause)
        return await self._call(req)

    async def _rule_version(self) -> str:
        if self.kube.discovered_taint_rules() is None:  # discovery: a few blocking reads, once per process
            await asyncio.to_thread(self.kube.taint_rule_api)
        return self.kube.taint_rule_version()

    # -- reads -----------------------------------------------------------------------------
    async def get_pod(self, namespace: str, name: str, *, fresh: bool = False) -> Obj | None:
        """``KubeGateway.get_pod``: the cached pod, else the API server's; ``None`` when it is gone."""
        if not fresh and self.kube.pods is not None and (cached := self.kube.pods.get(namespace, name)) is not None:
            return cached
        try:
            return await self._read(requests.get_pod(namespace, name))
        except NotFound:
            return None

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
        """``KubeGateway.patch_node``."""
        return await self._call(requests.patch_node(name, body))

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
