"""The simulator's state report (``GET /sim/v1/state``), built from the engine's indexes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from podmedic_sim.devices import DevKey
from podmedic_sim.jobs import JOB_NAME_LABEL
from podmedic_sim.training_groups import JOBSET_NAME

if TYPE_CHECKING:
    from podmedic_sim.engine import SimEngine


def device_json(engine: SimEngine, key: DevKey) -> dict[str, Any]:
    """One device as the state report and the fault routes show it."""
    fault = engine.devices.fault(key)
    return {
        "driver": key[0],
        "pool": key[1],
        "node": engine.devices.node_of(key),
        "device": key[2],
        "health": fault.health,
        "reason": fault.reason,
        "code": fault.code,
        "message": fault.message,
        "crash": fault.crash,
        "clears_on_restart": fault.clears_on_restart,
        "taints": [t.to_json() for t in engine.devices.taints(key)],
        "prepare_failure": engine.devices.prepare_faults.get(key),
    }


def build_state(engine: SimEngine) -> dict[str, Any]:
    """Devices, pods, taint rules and jobs, as the contract fixes them."""
    devices = []
    for info in engine.devices.slices.values():
        for dev in info.devices:
            key = (info.driver, info.pool, dev)
            owner = engine.claims.owner.get(key)
            devices.append(
                {**device_json(engine, key), "allocated_to": "/".join(owner) if owner else None}
            )
    pods = []
    for pod in engine.store.iter("pods"):
        meta, status = pod["metadata"], pod.get("status") or {}
        rt = engine.kubelet.pods.get((meta.get("namespace", "default"), meta["name"]))
        restarts = sum(int(c.get("restartCount", 0)) for c in status.get("containerStatuses") or [])
        pods.append(
            {
                "namespace": meta.get("namespace"),
                "name": meta["name"],
                "uid": meta.get("uid"),
                "node": pod.get("spec", {}).get("nodeName"),
                "phase": status.get("phase", "Pending"),
                "ready": rt.ready() if rt is not None and rt.uid == meta.get("uid") else False,
                "restart_count": restarts,
                "devices": ["/".join(d) for _, _, d in engine.claims.pod_devices(pod)],
                "job": (meta.get("labels") or {}).get(JOB_NAME_LABEL),
                "jobset": (meta.get("labels") or {}).get(JOBSET_NAME),
                "deleting": "deletionTimestamp" in meta,
                "node_down": pod.get("spec", {}).get("nodeName") in engine.kubelet.down_nodes,
                "waiting": rt.containers[0].reason if rt is not None and rt.containers
                and rt.containers[0].state == "waiting" else "",
            }
        )
    jobs = []
    for job in engine.store.iter("jobs"):
        meta, status = job["metadata"], job.get("status") or {}
        jkey = (meta.get("namespace", "default"), meta["name"])
        prog = engine.workloads.progress.get(jkey)
        entry: dict[str, Any] = (
            prog.to_json()
            if prog
            else {
                "namespace": jkey[0],
                "name": jkey[1],
                "step": 0,
                "checkpointed_step": 0,
                "lost_steps": 0,
                "pods_created": 0,
            }
        )
        entry.update(
            {
                **engine.workloads.collectives.status(jkey),
                "training": prog is not None,
                "active": status.get("active", 0),
                "failed": status.get("failed", 0),
                "succeeded": status.get("succeeded", 0),
            }
        )
        jobs.append(entry)
    for jobset in engine.store.iter("jobsets"):  # a training JobSet trains as one job
        meta, status = jobset["metadata"], jobset.get("status") or {}
        prog = engine.workloads.progress.get((meta.get("namespace", "default"), meta["name"]))
        if prog is not None:
            jobs.append({**prog.to_json(), **engine.workloads.collectives.status((meta.get("namespace", "default"),
                                                                                 meta["name"])),
                         "training": True, "kind": "JobSet",
                         "restarts_of_jobset": int(status.get("restarts") or 0)})
    for lws in engine.store.iter("leaderworkersets"):  # each training group of a LeaderWorkerSet trains as one job
        meta = lws["metadata"]
        for group in range(int((lws.get("spec") or {}).get("replicas", 1))):
            gkey = (meta.get("namespace", "default"), f"{meta['name']}-{group}")
            if (prog := engine.workloads.progress.get(gkey)) is not None:
                jobs.append({**prog.to_json(), **engine.workloads.collectives.status(gkey), "training": True,
                             "kind": "LeaderWorkerSet group", "leaderworkerset": meta["name"]})
    rules = [
        {"name": r["metadata"]["name"], "spec": r.get("spec"), "status": r.get("status") or {}}
        for r in engine.devices.rules.values()
    ]
    return {
        "devices": devices,
        "pods": pods,
        "taint_rules": rules,
        "jobs": jobs,
        "kubelet_checkpoints": list(engine.proxy.kubelet_checkpoints),
        "resource_version": engine.store.resource_version,
    }
