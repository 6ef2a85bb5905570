"""The gateway's Lease calls (coordination.k8s.io/v1): what leader election of podmedic's replicas needs.

As client-go's ``resourcelock.LeaseLock``: read the Lease, create it when absent, and replace it with
the resourceVersion last read, so two candidates writing at once cannot both win (the slower gets
409 Conflict). Writes go through ``_call`` and are not retried here: the elector tries again on its
own schedule (``retryPeriod``).
"""

from __future__ import annotations

from kubernetes import client

from podmedic.domain.base import Obj
from podmedic.kube.api_requests import FIELD_MANAGER
from podmedic.kube.core import GatewayCore
from podmedic.kube.errors import NotFound


class LeaseCalls(GatewayCore):
    """Get, create and replace one namespaced Lease."""

    def _leases(self) -> client.CoordinationV1Api:
        return client.CoordinationV1Api(self._api)

    def get_lease(self, namespace: str, name: str) -> Obj | None:
        """The Lease, or ``None`` when there is none yet."""
        try:
            return self._call(f"get lease {namespace}/{name}", self._leases().read_namespaced_lease, name, namespace)
        except NotFound:
            return None

    def create_lease(self, namespace: str, name: str, spec: Obj) -> Obj:
        """Create the Lease with ``spec``; ``Conflict`` (409 AlreadyExists) when another candidate was first."""
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": name, "namespace": namespace}, "spec": spec}
        return self._call(f"create lease {namespace}/{name}", self._leases().create_namespaced_lease, namespace,
                          body, field_manager=FIELD_MANAGER)

    def replace_lease(self, lease: Obj, spec: Obj) -> Obj:
        """Replace ``lease``'s spec, only if it is unchanged since read (its resourceVersion); else ``Conflict``."""
        meta = lease["metadata"]
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                             "resourceVersion": meta["resourceVersion"]}, "spec": spec}
        return self._call(f"update lease {meta['namespace']}/{meta['name']}", self._leases().replace_namespaced_lease,
                          meta["name"], meta["namespace"], body, field_manager=FIELD_MANAGER)
