"""Server-side printing: the ``Table`` a client gets when it asks for ``as=Table`` (what ``kubectl get`` shows).

kubectl asks every list, get and watch for ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``
and prints the columns the server chose, hiding those of priority 1 unless ``-o wide``. The columns
and cells are upstream's printers (kubernetes/kubernetes ``pkg/printers/internalversion/printers.go``:
``printPod``, ``printNode``, ``printEvent``, ``printResourceClaim``, ``printResourceSlice``, ``printJob``,
``printNamespace``), generated wide as the API server's ``TableConvertor`` does. A kind with no printer
gets ``rest.NewDefaultTableConvertor``'s Name and Created At; a custom resource with no
``additionalPrinterColumns`` gets Name and Age (apiextensions-apiserver ``tableconvertor``). Each row
carries the object's metadata as ``PartialObjectMetadata`` (``includeObject=Metadata``, the default), the
whole object (``Object``) or nothing (``None``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from aiohttp import web

from podmedic.domain.base import Obj
from podmedic_sim.handlers_common import ApiError
from podmedic_sim.resources import ResourceType

Row = list[Any]
_NAME = {"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a "
         "namespace. Cannot be updated.", "priority": 0}


def _column(name: str, description: str, priority: int = 0, kind: str = "string") -> Obj:
    return {"name": name, "type": kind, "format": "", "description": description, "priority": priority}


_AGE = _column("Age", "CreationTimestamp is a timestamp representing the server time when this object was created.")


def wants_table(request: web.Request) -> bool:
    """Whether the client asked for a ``meta.k8s.io/v1`` Table (kubectl's first choice)."""
    for offer in request.headers.get("Accept", "").split(","):
        params = dict(p.strip().split("=", 1) for p in offer.split(";")[1:] if "=" in p)
        if params.get("as") == "Table" and params.get("g") == "meta.k8s.io" and params.get("v") == "v1":
            return True
    return False


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery ``pkg/util/duration.HumanDuration``."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def _since(stamp: str | None) -> str:
    """``translateTimestampSince``: ``<unknown>`` for no time, else how long ago."""
    if not stamp:
        return "<unknown>"
    then = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return human_duration((dt.datetime.now(dt.UTC) - then).total_seconds())


def _pod_row(pod: Obj) -> Row:
    """``printPod`` (init containers of a running pod aside: the simulator runs none)."""
    spec, status, meta = pod.get("spec") or {}, pod.get("status") or {}, pod["metadata"]
    phase = status.get("phase") or ""
    reason = status.get("reason") or phase
    if any(c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated"
           for c in status.get("conditions") or []):
        reason = "SchedulingGated"
    restarts, ready, running, last_restart = 0, 0, False, ""
    for ctr in reversed(status.get("containerStatuses") or []):
        restarts += int(ctr.get("restartCount") or 0)
        finished = ((ctr.get("lastState") or {}).get("terminated") or {}).get("finishedAt") or ""
        last_restart = max(last_restart, finished)
        state = ctr.get("state") or {}
        waiting, terminated = state.get("waiting"), state.get("terminated")
        if waiting and waiting.get("reason"):
            reason = waiting["reason"]
        elif terminated and terminated.get("reason"):
            reason = terminated["reason"]
        elif terminated:
            signal = terminated.get("signal")
            reason = f"Signal:{signal}" if signal else f"ExitCode:{terminated.get('exitCode', 0)}"
        elif ctr.get("ready") and state.get("running") is not None:
            running, ready = True, ready + 1
    if reason == "Completed" and running:
        pod_ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
        reason = "Running" if pod_ready else "NotReady"
    if meta.get("deletionTimestamp") and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif meta.get("deletionTimestamp") and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    shown = f"{restarts} ({_since(last_restart)} ago)" if restarts and last_restart else str(restarts)
    gates = spec.get("readinessGates") or []
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    readiness = (f"{sum(conditions.get(g.get('conditionType')) == 'True' for g in gates)}/{len(gates)}"
                 if gates else "<none>")
    ips = status.get("podIPs") or []
    return [meta["name"], f"{ready}/{len(spec.get('containers') or [])}", reason, shown,
            _since(meta.get("creationTimestamp")), (ips[0].get("ip") if ips else "") or "<none>",
            spec.get("nodeName") or "<none>", status.get("nominatedNodeName") or "<none>", readiness]


def _node_row(node: Obj) -> Row:
    """``printNode``."""
    status, meta = node.get("status") or {}, node["metadata"]
    ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    shown = ["Ready" if c.get("status") == "True" else "NotReady" for c in ready] or ["Unknown"]
    if (node.get("spec") or {}).get("unschedulable"):
        shown.append("SchedulingDisabled")
    roles = sorted({k.removeprefix("node-role.kubernetes.io/") for k in meta.get("labels") or {}
                    if k.startswith("node-role.kubernetes.io/") and k != "node-role.kubernetes.io/"}
                   | {v for k, v in (meta.get("labels") or {}).items() if k == "kubernetes.io/role" and v})
    info = status.get("nodeInfo") or {}
    addresses = status.get("addresses") or []

    def address(kind: str) -> str:
        return next((a.get("address") for a in addresses if a.get("type") == kind), "<none>")

    return [meta["name"], ",".join(shown), ",".join(roles) or "<none>", _since(meta.get("creationTimestamp")),
            info.get("kubeletVersion", ""), address("InternalIP"), address("ExternalIP"),
            info.get("osImage") or "<unknown>", info.get("kernelVersion") or "<unknown>",
            info.get("containerRuntimeVersion") or "<unknown>"]


def _event_row(event: Obj) -> Row:
    """``printEvent``, wide."""
    first = _since(event.get("firstTimestamp") or event.get("eventTime"))
    last = _since(event["lastTimestamp"]) if event.get("lastTimestamp") else first
    involved = event.get("involvedObject") or {}
    target = (f"{(involved.get('kind') or '').lower()}/{involved['name']}" if involved.get("name")
              else (involved.get("kind") or "").lower())
    source = event.get("source") or {}
    origin = source.get("component") or event.get("reportingComponent") or ""
    host = source.get("host") or event.get("reportingInstance") or ""
    return [last, event.get("type", ""), event.get("reason", ""), target, involved.get("fieldPath", ""),
            f"{origin}, {host}" if host else origin, (event.get("message") or "").strip(), first,
            int(event.get("count") or 1), event["metadata"]["name"]]


def _claim_state(claim: Obj) -> str:
    """``resourceClaimState``."""
    deleted, status = bool(claim["metadata"].get("deletionTimestamp")), claim.get("status") or {}
    states = ["deleted"] if deleted else []
    if not status.get("allocation"):
        states += [] if deleted else ["pending"]
    else:
        states += ["allocated", *(["reserved"] if status.get("reservedFor") else [])]
    return ",".join(states)


def _job_status(job: Obj) -> str:
    conditions = {c.get("type"): c.get("status") == "True" for c in (job.get("status") or {}).get("conditions") or []}
    if conditions.get("Complete"):
        return "Complete"
    if conditions.get("Failed"):
        return "Failed"
    if job["metadata"].get("deletionTimestamp"):
        return "Terminating"
    return "Suspended" if conditions.get("Suspended") else "FailureTarget" if conditions.get("FailureTarget") \
        else "Running"


def _job_row(job: Obj) -> Row:
    spec, status = job.get("spec") or {}, job.get("status") or {}
    succeeded = int(status.get("succeeded") or 0)
    parallelism = int(spec.get("parallelism") or 0)
    completions = (f"{succeeded}/{spec['completions']}" if spec.get("completions") is not None
                   else f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1")
    start, end = status.get("startTime"), status.get("completionTime")
    took = ""
    if start:
        began = dt.datetime.fromisoformat(start.replace("Z", "+00:00"))
        ended = dt.datetime.fromisoformat(end.replace("Z", "+00:00")) if end else dt.datetime.now(dt.UTC)
        took = human_duration((ended - began).total_seconds())
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    labels = (spec.get("selector") or {}).get("matchLabels") or {}
    return [job["metadata"]["name"], _job_status(job), completions, took, _since(job["metadata"].get(
        "creationTimestamp")), ",".join(c.get("name", "") for c in containers),
        ",".join(c.get("image", "") for c in containers),
        ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "<none>"]


_PRINTERS: dict[str, tuple[list[Obj], Callable[[Obj], Row]]] = {
    "Pod": ([_NAME, _column("Ready", "The aggregate readiness state of this pod for accepting traffic."),
             _column("Status", "The aggregate status of the containers in this pod."),
             _column("Restarts", "The number of times the containers in this pod have been restarted and when the "
                                 "last container in this pod has restarted."), _AGE,
             _column("IP", "podIP address allocated to the pod.", 1),
             _column("Node", "NodeName indicates in which node this pod is scheduled.", 1),
             _column("Nominated Node", "nominatedNodeName is set when this pod preempts other pods on the node.", 1),
             _column("Readiness Gates", "If specified, all readiness gates will be evaluated for pod readiness.", 1)],
            _pod_row),
    "Node": ([_NAME, _column("Status", "The status of the node"), _column("Roles", "The roles of the node"), _AGE,
              _column("Version", "Kubelet Version reported by the node."),
              _column("Internal-IP", "List of addresses reachable to the node.", 1),
              _column("External-IP", "List of addresses reachable to the node.", 1),
              _column("OS-Image", "OS Image reported by the node.", 1),
              _column("Kernel-Version", "Kernel Version reported by the node.", 1),
              _column("Container-Runtime", "ContainerRuntime Version reported by the node.", 1)], _node_row),
    "Event": ([_column("Last Seen", "The time at which the most recent occurrence of this event was recorded."),
               _column("Type", "Type of this event (Normal, Warning), new types could be added in the future"),
               _column("Reason", "This should be a short, machine understandable string that gives the reason "
                                 "for the transition into the object's current status."),
               _column("Object", "The object that this event is about."),
               _column("Subobject", "The field of the object the event is about.", 1),
               _column("Source", "The component reporting this event.", 1),
               _column("Message", "A human-readable description of the status of this operation."),
               _column("First Seen", "The time at which the event was first recorded.", 1),
               _column("Count", "The number of times this event has occurred.", 1),
               {**_NAME, "priority": 1}], _event_row),
    "Namespace": ([_NAME, _column("Status", "The status of the namespace"), _AGE],
                  lambda o: [o["metadata"]["name"], (o.get("status") or {}).get("phase", ""),
                             _since(o["metadata"].get("creationTimestamp"))]),
    "ResourceClaim": ([_NAME, _column("State", "A summary of the current state (allocated, pending, reserved, "
                                               "etc.)."), _AGE],
                      lambda o: [o["metadata"]["name"], _claim_state(o),
                                 _since(o["metadata"].get("creationTimestamp"))]),
    "ResourceSlice": ([_NAME, _column("Node", "NodeName identifies the node which provides the resources in this "
                                              "pool."),
                       _column("Driver", "Driver identifies the DRA driver providing the capacity information."),
                       _column("Pool", "Name is used to identify the pool."), _AGE],
                      lambda o: [o["metadata"]["name"], (o.get("spec") or {}).get("nodeName") or "",
                                 (o.get("spec") or {}).get("driver", ""),
                                 ((o.get("spec") or {}).get("pool") or {}).get("name", ""),
                                 _since(o["metadata"].get("creationTimestamp"))]),
    "Job": ([_NAME, _column("Status", "Status of the job."),
             _column("Completions", "The number of pods which reached phase Succeeded."),
             _column("Duration", "Time required to complete the job."), _AGE,
             _column("Containers", "Names of each container in the template.", 1),
             _column("Images", "Images referenced by each container in the template.", 1),
             _column("Selector", "A label query over pods that should match the pod count.", 1)], _job_row),
}
_DEFAULT = ([_NAME, {"name": "Created At", "type": "date", "format": "", "priority": 0,
                     "description": "CreationTimestamp is a timestamp representing the server time when this object "
                                    "was created."}],
            lambda o: [o["metadata"]["name"], o["metadata"].get("creationTimestamp", "")])
_CUSTOM = ([_NAME, _AGE], lambda o: [o["metadata"]["name"], _since(o["metadata"].get("creationTimestamp"))])


def _row_object(obj: Obj, include: str) -> Obj | None:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}


def as_table(request: web.Request, rt: ResourceType, objs: list[Obj], list_meta: Obj) -> Obj:
    """``objs`` as the Table the client asked for (400 for an ``includeObject`` upstream does not know)."""
    include = request.query.get("includeObject") or "Metadata"
    if include not in ("None", "Metadata", "Object"):
        raise ApiError(400, f'includeObject: Unsupported value: "{include}": supported values: "Metadata", "None", '
                            '"Object"')
    columns, row = _PRINTERS.get(rt.kind) or (_CUSTOM if rt.custom else _DEFAULT)
    rows = []
    for obj in objs:
        entry: Obj = {"cells": row(obj)}
        embedded = _row_object(obj, include)
        if embedded is not None:
            entry["object"] = embedded
        rows.append(entry)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta, "columnDefinitions": columns,
            "rows": rows}
