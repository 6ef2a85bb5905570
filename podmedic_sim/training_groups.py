"""Training pods no single Job holds: a JobSet's (every pod of every replicated Job needed for a
step, one synchronous job) and a StatefulSet's or LeaderWorkerSet's (one group per set).

``Workloads`` keeps a Job's progress by the Job; these groups get theirs here, keyed the same way
(namespace, group name), so checkpoints, progress and interruptions work alike for both.
"""

from __future__ import annotations

from podmedic.domain.base import Obj
from podmedic_sim.jobs import JobKey
from podmedic_sim.jobsets import PREFIX as JOBSET_PREFIX
from podmedic_sim.kubelet_status import PodKey
from podmedic_sim.store import Store
from podmedic_sim.workload_protocol import SIGTERM_CHECKPOINT, Progress

JOBSET_NAME = JOBSET_PREFIX + "jobset-name"


def group_of(pod: Obj, owned_by_job: bool) -> str | None:
    """The training group of a pod: its JobSet, else (no Job owning it) its controller's name or itself;
    ``None`` for a plain Job's pod (trained by its Job)."""
    meta = pod["metadata"]
    jobset = (meta.get("labels") or {}).get(JOBSET_NAME)
    if jobset or owned_by_job:
        return jobset or None
    owner = next((r for r in meta.get("ownerReferences") or [] if r.get("controller")), None)
    return str(owner["name"]) if owner else str(meta["name"])


class TrainingGroups:
    """The pods of each group, and each group's Progress made on its first pod."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.pods: dict[JobKey, set[PodKey]] = {}

    def join(self, key: JobKey, pod: Obj, progress: dict[JobKey, Progress]) -> None:
        """Count ``pod`` in group ``key``; a new group's Progress needs every pod of a JobSet for a step."""
        if key not in progress:
            prog = progress[key] = Progress(*key)
            ann = pod["metadata"].get("annotations") or {}
            prog.saves_on_sigterm = ann.get(SIGTERM_CHECKPOINT) == "true"
            labels = pod["metadata"].get("labels") or {}
            found = self._store.find("jobsets", *key) if JOBSET_NAME in labels else None
            rjobs = ((found or {}).get("spec") or {}).get("replicatedJobs") or []
            prog.parallelism = sum(int(r.get("replicas", 1)) * int(((r.get("template") or {}).get("spec") or {})
                                                                   .get("parallelism") or 1) for r in rjobs) or 1
        self.pods.setdefault(key, set()).add((key[0], pod["metadata"]["name"]))

    def leave(self, pkey: PodKey) -> None:
        """A pod is gone."""
        for members in self.pods.values():
            members.discard(pkey)
