"""Which ``resource.k8s.io`` version serves DeviceTaintRule on this cluster, found by discovery.

DeviceTaintRule (KEP-5055) is ``resource.k8s.io/v1`` from Kubernetes 1.37, ``v1beta2`` in 1.36
and ``v1alpha3`` in 1.35, served only with the ``DRADeviceTaints`` feature gate before v1. The
API server lists what it serves under ``/apis/resource.k8s.io`` and each version's resources
under ``/apis/resource.k8s.io/<version>`` (staging/src/k8s.io/apiserver, discovery). podmedic
reads both once and uses the newest version that has ``devicetaintrules``.
"""

from __future__ import annotations

from dataclasses import dataclass

GROUP = "resource.k8s.io"
TAINT_RULE_VERSIONS = ("v1", "v1beta2", "v1alpha3")
"""Newest first: the order podmedic prefers them in."""
FEATURE_GATE = "DRADeviceTaints"


@dataclass(frozen=True)
class TaintRuleApi:
    """What discovery found: the version serving DeviceTaintRule (``None``: none does)."""

    version: str | None
    group_versions: tuple[str, ...]

    @property
    def api_version(self) -> str:
        """``apiVersion`` of the rules podmedic writes (``resource.k8s.io/<version>``)."""
        return f"{GROUP}/{self.version or TAINT_RULE_VERSIONS[0]}"

    def describe(self) -> str:
        """One line for the start-up log: what podmedic will use, or what to switch on."""
        if self.version is not None:
            return f"DeviceTaintRule: {GROUP}/{self.version}"
        served = ", ".join(self.group_versions) or "none"
        return (f"DeviceTaintRule is not served by this cluster ({GROUP} versions: {served}): device taints are "
                f"off; turn on the {FEATURE_GATE} feature gate (Kubernetes 1.35+; {GROUP}/v1 from 1.37). "
                "Until then incidents quarantine the whole node (cordon and node taint) instead of one device")


def choose(group_versions: list[str], resources_of: dict[str, list[str]]) -> TaintRuleApi:
    """The newest served version whose resource list has ``devicetaintrules``."""
    for version in TAINT_RULE_VERSIONS:
        if version in group_versions and "devicetaintrules" in resources_of.get(version, []):
            return TaintRuleApi(version, tuple(group_versions))
    return TaintRuleApi(None, tuple(group_versions))


HEALTH_GATE = "ResourceHealthStatus"


def health_status_note(version: dict[str, object]) -> str | None:
    """A start-up warning when the server's version serves pod-status device health only behind an
    alpha gate (``ResourceHealthStatus``: alpha from 1.31, beta and on by default from 1.36), or
    ``None``. The kubelets' gates cannot be discovered; their version is what matters too."""
    try:
        major, minor = int(str(version.get("major", "0"))), int(str(version.get("minor", "0")).rstrip("+"))
    except ValueError:
        return None
    if (major, minor) >= (1, 36):
        return None
    return (f"Kubernetes {major}.{minor}: pods report device health (allocatedResourcesStatus) only with the "
            f"{HEALTH_GATE} feature gate on the API server and the kubelets (alpha, off by default before 1.36); "
            "without it pod-status detection sees nothing and only the node agent, alerts and slice taints do")
