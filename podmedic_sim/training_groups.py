"""Training pods no single Job holds: a JobSet's (every pod of every replicated Job needed for a
step, one synchronous job), a LeaderWorkerSet group's (its leader and workers, one synchronous job)
and a StatefulSet's (one group per set).

A LeaderWorkerSet group is the unit of replication of a model too large for one host: its leader and
workers shard one model across their devices and step together (kubernetes-sigs/lws README, "multi-host
inference ... sharded and run across multiple devices on multiple nodes"; its default restart policy,
RecreateGroupOnPodRestart, recreates the whole group because no pod of it works alone). Its group is
named as its leader pod and worker StatefulSet are, ``<lws>-<group-index>``, and needs ``size`` pods.

``Workloads`` keeps a Job's progress by the Job; these groups get theirs here, keyed the same way
(namespace, group name), so checkpoints, progress and interruptions work alike for both.
"""

from __future__ import annotations

from podmedic.domain.base import Obj
from podmedic_sim.jobs import JobKey
from podmedic_sim.jobsets import PREFIX as JOBSET_PREFIX
from podmedic_sim.kubelet_status import PodKey
from podmedic_sim.leaderworkersets import PREFIX as LWS_PREFIX
from podmedic_sim.store import Store
from podmedic_sim.workload_protocol import SIGTERM_CHECKPOINT, Progress

JOBSET_NAME = JOBSET_PREFIX + "jobset-name"
LWS_NAME, LWS_GROUP = LWS_PREFIX + "name", LWS_PREFIX + "group-index"


def group_of(pod: Obj, owned_by_job: bool) -> str | None:
    """The training group of a pod: its JobSet, else its LeaderWorkerSet group, else (no Job owning it) its
    controller's name or itself; ``None`` for a plain Job's pod (trained by its Job)."""
    meta = pod["metadata"]
    labels = meta.get("labels") or {}
    jobset = labels.get(JOBSET_NAME)
    if jobset or owned_by_job:
        return jobset or None
    if LWS_NAME in labels and LWS_GROUP in labels:
        return f"{labels[LWS_NAME]}-{labels[LWS_GROUP]}"
    owner = next((r for r in meta.get("ownerReferences") or [] if r.get("controller")), None)
    return str(owner["name"]) if owner else str(meta["name"])


class TrainingGroups:
    """The pods of each group, and each group's Progress made on its first pod."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.pods: dict[JobKey, set[PodKey]] = {}

    def join(self, key: JobKey, pod: Obj, progress: dict[JobKey, Progress]) -> None:
        """Count ``pod`` in group ``key``; a new group's Progress needs every pod of a JobSet or of a
        LeaderWorkerSet group for a step."""
        if key not in progress:
            prog = progress[key] = Progress(*key)
            ann = pod["metadata"].get("annotations") or {}
            prog.saves_on_sigterm = ann.get(SIGTERM_CHECKPOINT) == "true"
            prog.parallelism = self._size(key, pod["metadata"].get("labels") or {})
        self.pods.setdefault(key, set()).add((key[0], pod["metadata"]["name"]))

    def _size(self, key: JobKey, labels: dict[str, str]) -> int:
        """How many pods a step of the group needs: a JobSet's every pod, a LeaderWorkerSet's ``size``."""
        if JOBSET_NAME in labels:
            found = self._store.find("jobsets", *key)
            rjobs = ((found or {}).get("spec") or {}).get("replicatedJobs") or []
            return sum(int(r.get("replicas", 1)) * int(((r.get("template") or {}).get("spec") or {})
                                                       .get("parallelism") or 1) for r in rjobs) or 1
        if LWS_NAME in labels:
            found = self._store.find("leaderworkersets", key[0], labels[LWS_NAME])
            return int((((found or {}).get("spec") or {}).get("leaderWorkerTemplate") or {}).get("size") or 1)
        return 1

    def leave(self, pkey: PodKey) -> None:
        """A pod is gone."""
        for members in self.pods.values():
            members.discard(pkey)
