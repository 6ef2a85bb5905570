"""The gateway's calls for same-node placement: the holds ConfigMap, the dry-run probe, the webhook's CA.

The holds live in a ConfigMap named ``podmedic-placement-holds`` in the namespace of the pods they
pin (``podmedic/domain/placement_holds.py``): the webhook reads the one in the namespace of the
pod it admits, the worker writes one data key per hold with a merge patch (``data.<key>: null``
removes it), so holds of concurrent incidents never overwrite each other.
"""

from __future__ import annotations

import base64
import contextlib

from kubernetes import client

from podmedic.domain.base import Obj
from podmedic.domain.placement_holds import CONFIGMAP
from podmedic.kube.api_requests import FIELD_MANAGER
from podmedic.kube.core import GatewayCore
from podmedic.kube.errors import Conflict, NotFound


class HoldCalls(GatewayCore):
    """Read and write placement holds; probe admission with a dry-run create; publish the webhook's CA."""

    def read_holds(self, namespace: str) -> dict[str, str]:
        """The holds ConfigMap's ``data`` in ``namespace`` (empty when there is none)."""
        try:
            found = self._read(f"get configmap {namespace}/{CONFIGMAP}", self.core.read_namespaced_config_map,
                               CONFIGMAP, namespace)
        except NotFound:
            return {}
        data: dict[str, str] = found.get("data") or {}
        return data

    def put_hold(self, namespace: str, key: str, text: str, who: str) -> None:
        """Write one hold (create the ConfigMap on first use); ``who`` is recorded as its last writer."""
        patch = {"metadata": {"annotations": {"podmedic.io/changed-by": who}}, "data": {key: text}}
        try:
            self._call(f"patch configmap {namespace}/{CONFIGMAP}", self.core.patch_namespaced_config_map,
                       CONFIGMAP, namespace, patch, field_manager=FIELD_MANAGER)
            return
        except NotFound:
            pass
        body = {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": CONFIGMAP, "namespace": namespace,
                             "labels": {"app.kubernetes.io/managed-by": "podmedic"},
                             "annotations": {"podmedic.io/changed-by": who,
                                             "podmedic.io/reason": "same-node placement holds of open incidents"}},
                "data": {key: text}}
        try:
            self._call(f"create configmap {namespace}/{CONFIGMAP}", self.core.create_namespaced_config_map,
                       namespace, body, field_manager=FIELD_MANAGER)
        except Conflict:  # another incident created it meanwhile: add to it
            self._call(f"patch configmap {namespace}/{CONFIGMAP}", self.core.patch_namespaced_config_map,
                       CONFIGMAP, namespace, patch, field_manager=FIELD_MANAGER)

    def drop_hold(self, namespace: str, key: str) -> None:
        """Remove one hold; nothing to do when it (or the ConfigMap) is gone."""
        with contextlib.suppress(NotFound):
            self._call(f"patch configmap {namespace}/{CONFIGMAP}", self.core.patch_namespaced_config_map,
                       CONFIGMAP, namespace, {"data": {key: None}}, field_manager=FIELD_MANAGER)

    def probe_pod(self, namespace: str, body: Obj) -> Obj:
        """Create ``body`` with ``dryRun=All``: admission (webhooks included) runs, nothing is stored."""
        name = body["metadata"].get("name") or body["metadata"].get("generateName", "")
        return self._call(f"create pod {namespace}/{name} (dry run)", self.core.create_namespaced_pod, namespace,
                          body, dry_run="All", field_manager=FIELD_MANAGER)

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
