"""Registry of the Kubernetes resource types the simulator's API server serves.

Each entry carries what routing, discovery, validation and the ``kind``/``listKind``
fields of responses need. The store keys objects by ``plural``, so plurals are unique.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class ResourceType:
    """One served resource: ``group``/``version``/``plural`` and how it behaves."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    subresources: tuple[str, ...] = ()
    # The real API server answers DELETE of these with a Status rather than the object.
    delete_returns_status: bool = False
    short_names: tuple[str, ...] = ()
    # Served by a CustomResourceDefinition (JobSet, LeaderWorkerSet, ...): the strict built-in schemas
    # do not cover it (podmedic_sim/validation.py says what is checked instead).
    custom: bool = False
    # The verbs served, when not every one of discovery's VERBS (a review is only created).
    verbs: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        """``apiVersion`` of the objects: ``v1`` for core, ``group/version`` otherwise."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        """``kind`` of a list response."""
        return f"{self.kind}List"

    @property
    def singular(self) -> str:
        """Lower-case kind, as discovery reports it."""
        return self.kind.lower()

    @property
    def prefix(self) -> str:
        """URL prefix of the group/version: ``/api/v1`` or ``/apis/<group>/<version>``."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"


RESOURCES: tuple[ResourceType, ...] = (
    ResourceType("", "v1", "Namespace", "namespaces", False, ("status",), short_names=("ns",)),
    ResourceType("", "v1", "Node", "nodes", False, ("status",), True, ("no",)),
    ResourceType("", "v1", "Pod", "pods", True, ("status", "eviction", "exec"), short_names=("po",)),
    ResourceType("", "v1", "Event", "events", True, (), True, ("ev",)),
    ResourceType("", "v1", "ConfigMap", "configmaps", True, (), True, ("cm",)),
    ResourceType("", "v1", "Secret", "secrets", True, (), True),
    ResourceType("", "v1", "Service", "services", True, ("status",), True, ("svc",)),
    ResourceType("", "v1", "ServiceAccount", "serviceaccounts", True, ("token",), short_names=("sa",)),
    ResourceType("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False, (), True),
    ResourceType("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", False, (), True),
    ResourceType("rbac.authorization.k8s.io", "v1", "Role", "roles", True, (), True),
    ResourceType("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", True, (), True),
    ResourceType("authorization.k8s.io", "v1", "SelfSubjectAccessReview", "selfsubjectaccessreviews", False,
                 verbs=("create",)),
    ResourceType("authentication.k8s.io", "v1", "SelfSubjectReview", "selfsubjectreviews", False, verbs=("create",)),
    ResourceType(
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        True,
        ("status",),
        True,
        ("pdb",),
    ),
    ResourceType("resource.k8s.io", "v1", "DeviceClass", "deviceclasses", False),
    ResourceType("resource.k8s.io", "v1", "ResourceSlice", "resourceslices", False),
    ResourceType("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims", True, ("status",)),
    ResourceType("resource.k8s.io", "v1", "ResourceClaimTemplate", "resourceclaimtemplates", True),
    ResourceType(
        "resource.k8s.io", "v1", "DeviceTaintRule", "devicetaintrules", False, ("status",), True
    ),
    ResourceType("batch", "v1", "Job", "jobs", True, ("status",), True),
    ResourceType("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration",
                 "mutatingwebhookconfigurations", False, (), True),
    # Leader election of podmedic's replicas (client-go's LeaseLock).
    ResourceType("coordination.k8s.io", "v1", "Lease", "leases", True),
    # The workloads training and inference run as (podmedic walks pods' ownerReferences up to them):
    ResourceType("apps", "v1", "StatefulSet", "statefulsets", True, ("status",), True, ("sts",)),
    # What an install of podmedic itself creates (deploy/), stored and validated with no controller
    # behind them: enough for `kubectl apply --dry-run=server` of the kustomize base and the Helm chart.
    ResourceType("apps", "v1", "Deployment", "deployments", True, ("status",), True, ("deploy",)),
    ResourceType("apps", "v1", "DaemonSet", "daemonsets", True, ("status",), True, ("ds",)),
    ResourceType("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", True, (), True, ("netpol",)),
    ResourceType("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets", True, ("status",), custom=True),
    ResourceType("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "leaderworkersets", True, ("status",),
                 short_names=("lws",), custom=True),
    ResourceType("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs", True, ("status",), custom=True),
    ResourceType("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs", True, ("status",), custom=True),
)

TAINT_RULE_VERSIONS = ("v1", "v1beta2", "v1alpha3")
"""Where ``resource.k8s.io`` serves DeviceTaintRule (KEP-5055): v1 from Kubernetes 1.37, v1beta2
in 1.36 and v1alpha3 in 1.35, each behind the ``DRADeviceTaints`` feature gate before v1."""


class ServedApi:
    """The resource types one simulated API server serves: ``RESOURCES``, with DeviceTaintRule at
    ``taint_rules`` (a version of ``TAINT_RULE_VERSIONS``) or not at all (``none``, gate off)."""

    def __init__(self, taint_rules: str = "v1") -> None:
        if taint_rules not in (*TAINT_RULE_VERSIONS, "none"):
            raise ValueError(f"taint_rules: {taint_rules!r} is not one of {', '.join(TAINT_RULE_VERSIONS)}, none")
        self.taint_rules = taint_rules
        served: list[ResourceType] = []
        for r in RESOURCES:
            if r.kind == "DeviceTaintRule":
                if taint_rules == "none":
                    continue
                r = dataclasses.replace(r, version=taint_rules)
            served.append(r)
        self.resources = tuple(served)
        self._by_path = {(r.group, r.version, r.plural): r for r in self.resources}

    def group_versions(self) -> list[tuple[str, str]]:
        """The (group, version) pairs served, core first, each once, in registry order."""
        return list(dict.fromkeys((r.group, r.version) for r in self.resources))

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        """The resource served at ``group/version/plural``, or ``None``."""
        return self._by_path.get((group, version, plural))


DEFAULT_API = ServedApi()
