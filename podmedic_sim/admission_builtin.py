"""The API server's built-in pod admission, for every pod however it is created (a client, a controller).

Upstream runs these mutating plugins before the webhooks (kubernetes/kubernetes ``plugin/pkg/admission``):

- ``serviceaccount``: ``serviceAccountName`` defaults to ``default`` (mirrored in the deprecated
  ``serviceAccount``), and unless ``automountServiceAccountToken`` is false a projected volume
  ``kube-api-access-<5 random>`` (token, ``kube-root-ca.crt``, the namespace) is added and mounted
  read-only at ``/var/run/secrets/kubernetes.io/serviceaccount`` in every container that has no mount
  there yet;
- ``defaulttolerationseconds``: NoExecute tolerations of ``node.kubernetes.io/not-ready`` and
  ``node.kubernetes.io/unreachable`` for 300 s, unless the pod already tolerates them;
- ``priority``: ``priority`` 0 and ``preemptionPolicy: PreemptLowerPriority`` with no PriorityClass.

The simulator serves no ServiceAccounts, so the account's existence is not checked.
"""

from __future__ import annotations

import secrets

from podmedic.domain.base import Obj

TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
TOLERATED_FOR_S = 300
NODE_PROBLEMS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
_SUFFIX = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery util/rand: no vowels, no confusable digits


def _token_volume() -> Obj:
    name = "kube-api-access-" + "".join(secrets.choice(_SUFFIX) for _ in range(5))
    return {"name": name, "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace",
                                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}


def _service_account(spec: Obj) -> None:
    spec["serviceAccountName"] = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
    spec["serviceAccount"] = spec["serviceAccountName"]
    if spec.get("automountServiceAccountToken") is False:
        return
    containers = [c for field in ("initContainers", "containers") for c in spec.get(field) or []
                  if isinstance(c, dict)]
    bare = [c for c in containers if not any(m.get("mountPath") == TOKEN_PATH for m in c.get("volumeMounts") or [])]
    if not bare:
        return
    volume = _token_volume()
    spec["volumes"] = [*(spec.get("volumes") or []), volume]
    for ctr in bare:
        ctr["volumeMounts"] = [*(ctr.get("volumeMounts") or []),
                               {"name": volume["name"], "readOnly": True, "mountPath": TOKEN_PATH}]


def _tolerates(tolerations: list[Obj], key: str) -> bool:
    return any((t.get("key") == key or (not t.get("key") and t.get("operator") == "Exists"))
               and t.get("effect") in (None, "", "NoExecute") for t in tolerations)


def _default_toleration_seconds(spec: Obj) -> None:
    tolerations = [t for t in spec.get("tolerations") or [] if isinstance(t, dict)]
    added = [{"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": TOLERATED_FOR_S}
             for key in NODE_PROBLEMS if not _tolerates(tolerations, key)]
    if added:
        spec["tolerations"] = [*(spec.get("tolerations") or []), *added]


def admit_builtin(pod: Obj) -> None:
    """Apply the built-in mutating admission plugins to a pod being created."""
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return
    _service_account(spec)
    _default_toleration_seconds(spec)
    spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
