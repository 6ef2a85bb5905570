"""The placement webhook's registration: the MutatingWebhookConfiguration the API server calls it by.

deploy/ registers it for a cluster (kustomize base ``admission.yaml``, the Helm chart's
``admission.yaml``) with a Service as its client; ``podmedic up`` registers the same webhook with
a URL, since the local stack runs no Services. tests/deploy checks that the two agree.
"""

from __future__ import annotations

from podmedic.domain.base import Obj

WEBHOOK_NAME = "placement.podmedic.io"
PATH = "/mutate-pods"


def placement_webhook_configuration(name: str, client_config: Obj, excluded_namespaces: list[str]) -> Obj:
    """The MutatingWebhookConfiguration ``name`` whose one webhook is served at ``client_config``.

    Args:
        name: the configuration's name (``podmedic-placement`` in deploy/).
        client_config: ``{"service": {...}}`` in a cluster, ``{"url": "https://.../mutate-pods"}`` locally;
            no ``caBundle``: ``podmedic admission`` writes its own CA there at start.
        excluded_namespaces: namespaces whose pods never reach the webhook (podmedic's own, kube-system).

    Returns:
        The object to create. ``failurePolicy: Ignore`` and a 2 s timeout, so a webhook that is down
        never stops a pod being created; ``sideEffects: None``, so the worker's dry-run probe calls it.
    """
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": WEBHOOK_NAME, "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "failurePolicy": "Ignore", "timeoutSeconds": 2, "reinvocationPolicy": "Never",
            "clientConfig": client_config,
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"],
                       "scope": "Namespaced"}],
            "namespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                                        "values": excluded_namespaces}]},
        }],
    }
