"""Same-node placement's holds ConfigMap (its shape; the webhook's read of it) and the webhook's CA.

The holds live in a ConfigMap named ``podmedic-placement-holds`` in the namespace of the pods they
pin (``podmedic/domain/placement_holds.py``): the webhook reads the one in the namespace of the
pod it admits, the worker writes one data key per hold with a merge patch (``data.<key>: null``
removes it), so holds of concurrent incidents never overwrite each other.
"""

from __future__ import annotations

import base64

from kubernetes import client

from podmedic.domain.base import Obj
from podmedic.domain.placement_holds import CONFIGMAP
from podmedic.kube import api_requests as requests
from podmedic.kube.api_requests import FIELD_MANAGER
from podmedic.kube.core import GatewayCore
from podmedic.kube.errors import NotFound


def hold_patch(key: str, text: str, who: str) -> Obj:
    """The merge patch that writes one hold, ``who`` recorded as the ConfigMap's last writer."""
    return {"metadata": {"annotations": {"podmedic.io/changed-by": who}}, "data": {key: text}}


def holds_configmap(namespace: str, key: str, text: str, who: str) -> Obj:
    """The holds ConfigMap of ``namespace`` as first created, holding one hold."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": CONFIGMAP, "namespace": namespace,
                         "labels": {"app.kubernetes.io/managed-by": "podmedic"},
                         "annotations": {"podmedic.io/changed-by": who,
                                         "podmedic.io/reason": "same-node placement holds of open incidents"}},
            "data": {key: text}}


class HoldCalls(GatewayCore):
    """Read placement holds (the webhook); publish the webhook's CA. The worker writes holds on its event
    loop (``loop_calls.py``)."""

    def read_holds(self, namespace: str) -> dict[str, str]:
        """The holds ConfigMap's ``data`` in ``namespace`` (empty when there is none)."""
        try:
            found = self._read_request(requests.get_configmap(namespace, CONFIGMAP))
        except NotFound:
            return {}
        data: dict[str, str] = found.get("data") or {}
        return data

    def set_webhook_ca(self, name: str, ca_pem: bytes) -> int:
        """Put ``ca_pem`` in every webhook's ``clientConfig.caBundle`` of the MutatingWebhookConfiguration
        ``name``; how many were changed."""
        api = client.AdmissionregistrationV1Api(self._api)
        config = self._call(f"get mutatingwebhookconfiguration {name}",
                            api.read_mutating_webhook_configuration, name)
        bundle = base64.b64encode(ca_pem).decode()
        ops = [{"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": bundle}
               for i, hook in enumerate(config.get("webhooks") or [])
               if (hook.get("clientConfig") or {}).get("caBundle") != bundle]
        if ops:  # only if nobody changed it since read (a test of its resourceVersion comes first)
            guard = {"op": "test", "path": "/metadata/resourceVersion", "value": config["metadata"]["resourceVersion"]}
            self._call(f"patch mutatingwebhookconfiguration {name}", api.patch_mutating_webhook_configuration,
                       name, [guard, *ops], field_manager=FIELD_MANAGER)
        return len(ops)
