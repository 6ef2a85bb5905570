"""The ingest's cluster sources: pod status, ResourceSlice device taints, prepare-failure Events, the
workloads' progress, nodes' announced maintenance, and the ResourceClaim watch that pod status and progress
resolve devices through.

Each is a ``ClusterSource`` with ``run(emit, stop)`` for a thread of its own, on one watch
loop (``watch_loop``) that resumes from a cursor under the ingest's state directory.
"""

from __future__ import annotations

from pathlib import Path

from podmedic.domain.policy_file import PolicySet
from podmedic.kube.gateway import KubeGateway
from workers.ingest.sources.claim_index import ClaimIndex, ClaimSource
from workers.ingest.sources.maintenance import MaintenanceSource
from workers.ingest.sources.pod_status import PodStatusSource
from workers.ingest.sources.prepare_failures import PrepareFailureSource
from workers.ingest.sources.progress import ProgressSource
from workers.ingest.sources.slice_taints import SliceTaintSource
from workers.ingest.sources.watch_loop import ClusterSource, Emit, Observation

__all__ = ["ClusterSource", "Emit", "Observation", "PodStatusSource", "PrepareFailureSource", "ProgressSource",
           "SliceTaintSource", "cluster_sources"]


def cluster_sources(kube: KubeGateway, policies: PolicySet, state_dir: Path | None, *,
                    watch_timeout_s: int = 30, cursor_interval_s: float = 1.0) -> list[ClusterSource]:
    """Every cluster source, sharing one gateway; cursors under ``state_dir`` (``None``: none)."""
    kube = kube.for_component("ingest")  # requests say who made them (RBAC proof: tests/deploy)
    claims = ClaimIndex(kube.get_claim)
    return [
        ClaimSource(kube, claims, watch_timeout_s=watch_timeout_s),
        PodStatusSource(kube, claims=claims, state_dir=state_dir, watch_timeout_s=watch_timeout_s,
                        cursor_interval_s=cursor_interval_s),
        SliceTaintSource(kube, state_dir=state_dir, watch_timeout_s=watch_timeout_s,
                         cursor_interval_s=cursor_interval_s),
        PrepareFailureSource(kube, policies, state_dir=state_dir, watch_timeout_s=watch_timeout_s,
                             cursor_interval_s=cursor_interval_s),
        ProgressSource(kube, policies, claims=claims, watch_timeout_s=watch_timeout_s),
        MaintenanceSource(kube, state_dir=state_dir, watch_timeout_s=watch_timeout_s,
                          cursor_interval_s=cursor_interval_s),
    ]
