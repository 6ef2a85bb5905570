"""The one adapter that imports ``kubernetes``: a narrow gateway to the cluster.

Everything podmedic reads or changes in a cluster goes through ``KubeGateway``, so the
RBAC it needs is visible in one place, and API errors become the few exception types of
``podmedic/kube/errors.py``, which Temporal retry policies name by class. The connection is
``core.py``'s; paged lists, watches and exec are ``streams.py``'s; the worker's activities' calls,
sent on its event loop, are ``loop_calls.py``'s.
"""

from __future__ import annotations

from podmedic.domain.base import Obj
from podmedic.kube import api_requests as requests
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
from podmedic.kube.streams import StreamCalls

# The errors are defined in podmedic/kube/errors.py and imported from here by callers.
__all__ = ["BadRequest", "Conflict", "Forbidden", "InvalidObject", "KubeError", "KubeGateway", "NotFound", "NotServed",
           "Obj", "ProxyTimeout", "ServerError", "Throttled", "user_agent"]


class KubeGateway(StreamCalls, LeaseCalls, HoldCalls):
    """The cluster, for podmedic's processes: ``aio`` has the worker's activities' calls as coroutines
    (``podmedic/kube/loop_calls.py``); the synchronous calls here (thread-safe) serve the processes that
    run in threads (the ingest's sources, the admission webhook, the CLI, the caches' watches) and
    tests' set-up, with the same request descriptions (``api_requests.py``)."""

    @property
    def aio(self) -> LoopCalls:
        """This gateway's calls awaited on the event loop (``podmedic/kube/loop_calls.py``)."""
        return LoopCalls(self)

    # -- reads -------------------------------------------------------------------------------
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

    def get_node(self, name: str) -> Obj | None:
        """A Node, or ``None``."""
        try:
            return self._read_request(requests.get_node(name))
        except NotFound:
            return None

    def patch_node(self, name: str, body: Obj) -> Obj:
        """Merge-patch a Node (cordon, taints, annotations); a ``metadata.resourceVersion`` in
        ``body`` makes a concurrent change a ``Conflict``."""
        return self._request(requests.patch_node(name, body))

    def get_claim(self, namespace: str, name: str, *, fresh: bool = False) -> Obj | None:
        """A ResourceClaim, or ``None`` if it is gone: from the claim cache when it holds the claim, unless
        ``fresh`` asks the API server."""
        if not fresh and self.claims is not None and (cached := self.claims.get(namespace, name)) is not None:
            return cached
        try:
            return self._read_request(requests.get_claim(namespace, name))
        except NotFound:
            return None
