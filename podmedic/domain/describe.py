"""What an incident says about itself in the Temporal UI: a summary, static details written
when it opens, and current details that say what it is doing now and why.

Pure functions of the event, the policy and the incident state, so the ingest (which
starts incidents) and the workflow (which updates them) write the same words. Markdown:
the Temporal UI renders it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from podmedic.domain.classify import classify, names_the_failure
from podmedic.domain.incident import IncidentState, Phase
from podmedic.domain.models import ConfigProblem, DeviceHealthEvent, UnresolvedDevice
from podmedic.domain.policy import DriverPolicy
from podmedic.domain.policy_recovery import LadderRung
from podmedic.domain.policy_ref import PolicyRef
from podmedic.domain.workloads import WorkloadRef

CLI = "podmedic incidents"


def workload_line(workload: WorkloadRef, others: list[str]) -> str:
    """The timeline's line on what the affected pod belongs to, how its controller replaces it, and its
    other live pods (``namespace/name``; the first five named)."""
    way = f" (via {' > '.join(workload.chain)})" if workload.chain else ""
    if workload.kind == "Pod":
        return f"workload: none podmedic knows{way}; {workload.how}"
    group = "; one failed pod restarts its group" if workload.restarts_group else ""
    more = f" and {len(others) - 5} more" if len(others) > 5 else ""
    return (f"workload: {workload.label}{way}; its controller {workload.how}{group}; "
            f"other live pods: {', '.join(others[:5]) or 'none'}{more}")


def static_summary(event: DeviceHealthEvent) -> str:
    """One line for the list of workflows: device, health and the signal's own words."""
    what = f"XID {event.code}" if event.code is not None else event.reason
    text = event.message or what or event.health.value
    if what and what not in text:
        text = f"{what}: {text}"
    return f"{event.device.resource_id} {event.health.value} — {text}"[:200]


def _ladder(rungs: Sequence[LadderRung]) -> str:
    return " → ".join(f"{r.action} x{r.attempts} ({r.timeout_s:g}s)" for r in rungs) or "none"


def policy_lines(policy: DriverPolicy) -> list[str]:
    """The parts of the driver's policy an operator needs to predict what the incident does."""
    approvals = policy.approvals
    gates = ", ".join(f"{g.action} ({g.timeout_s or approvals.timeout_s:g}s, "
                      f"then {g.on_timeout or approvals.on_timeout})" for g in approvals.gates) or "none"
    ticket = "no tickets" if policy.ticket.backend == "none" else (
        f"{policy.ticket.backend}; filed when permanent: {policy.ticket.file_when_permanent}, "
        f"when unhealed: {policy.ticket.file_when_unhealed}")
    return [
        f"- **Taint**: transient → `{policy.taint.transient.value}`, permanent → `{policy.taint.permanent.value}`",
        f"- **Recovery**: transient: {_ladder(policy.recovery.transient)}; "
        f"permanent: {_ladder(policy.recovery.permanent)}",
        f"- **Checkpoint**: {'on' if policy.checkpoint.enabled else 'off'}, waits {policy.checkpoint.timeout_s:g}s",
        f"- **Ticket**: {ticket}",
        f"- **Approval gates**: {gates}",
        f"- **Close**: heal wait {policy.close.heal_wait_s:g}s, anti-flap {policy.close.anti_flap_s:g}s",
    ]


def static_details(event: DeviceHealthEvent, policy: DriverPolicy, ref: PolicyRef | None = None) -> str:
    """Markdown set once at start: the device, the first signal, its classification and the policy
    (with ``ref``, the digest the incident's input names it by)."""
    device = event.device
    verdict = classify(event, policy)
    pod = f"`{event.pod.namespace}/{event.pod.name}`" if event.pod else "found by the incident (see current details)"
    code = f", code {event.code}" if event.code is not None else ""
    metrics = ", ".join(f"{k}={v:g}" for k, v in sorted(event.metrics.items()))
    lines = [
        f"### Device incident `{device.resource_id}`",
        f"- **Device**: `{device.device}` in pool `{device.pool}`, driver `{device.driver}`",
        f"- **Node**: `{event.node or device.pool}`",
        f"- **Pods**: {pod}",
        f"- **First signal**: {event.health.value}{code} from `{event.source}` at "
        f"{event.observed_at.isoformat(timespec='seconds')}: {event.reason} {event.message}".rstrip(),
    ]
    if metrics:
        lines.append(f"- **Readings**: {metrics}")
    wait = policy.detection.corroborate_s
    classification = (
        f"from another source: this signal does not say what failed, so the incident waits up to {wait:g}s for "
        f"one that does (otherwise `{verdict.failure_mode.value}`, {verdict.permanence.value} — {verdict.why})"
        if wait > 0 and not names_the_failure(event, policy) else
        f"`{verdict.failure_mode.value}`, {verdict.permanence.value}"
        f"{'' if verdict.actionable else ', not acted on'} — {verdict.why}")
    lines += [
        f"- **Classification**: {classification}",
        "",
        f"#### Policy in force ({ref.short if ref else policy.driver})",
        *policy_lines(policy),
        "",
        f"Steer it: `{CLI} show|approve|skip|abort|resolve {device.workflow_id} ...`; "
        f"post-mortem: `podmedic report {device.workflow_id}`.",
    ]
    return "\n".join(lines)


def config_details(problem: ConfigProblem) -> str:
    """Markdown set once at start of a configuration incident: whose pod, what the driver said."""
    pod = problem.pod
    return "\n".join([
        f"### Configuration problem of pod `{pod.namespace}/{pod.name}`",
        f"- **Pod**: `{pod.namespace}/{pod.name}` (uid `{pod.uid or '?'}`) on node `{problem.node or '?'}`",
        f"- **Driver**: `{problem.driver}` refused to prepare the pod's devices: {problem.reason}",
        f"- **Message**: {problem.message}",
        f"- **Seen**: {problem.observed_at.isoformat(timespec='seconds')} by `{problem.source}`",
        "",
        "Classified `bad_config`: the pod's own claim or its parameters are wrong, not the device. podmedic reports "
        "it on the pod (Event `PodmedicBadConfig` and annotation `podmedic.io/problem`) and never taints a device "
        "or restarts the pod for it. Fix the claim, then recreate the pod.",
    ])


def unresolved_details(report: UnresolvedDevice) -> str:
    """Markdown set once at start of an unresolved-device report: the pod, the entry, why."""
    pod = report.pod
    return "\n".join([
        f"### A device of pod `{pod.namespace}/{pod.name}` that podmedic cannot identify",
        f"- **Pod**: `{pod.namespace}/{pod.name}` (uid `{pod.uid or '?'}`) on node `{report.node or '?'}`",
        f"- **Reported**: `{report.entry}` resourceID `{report.resource_id}` is {report.health.value}"
        + (f": {report.message}" if report.message else ""),
        f"- **Why no device**: {report.why}",
        f"- **Seen**: {report.observed_at.isoformat(timespec='seconds')} by `{report.source}`",
        "",
        "The kubelet names a device by its driver's CDI ID; this one does not lead to a single device of the "
        "pod's claim. podmedic reports it on the pod (Event `PodmedicDeviceUnresolved`, annotation "
        "`podmedic.io/problem`) and acts on no device. The node agent, the driver's ResourceSlice taints or "
        "Alertmanager name the device directly and open its incident.",
    ])


def current_details(state: IncidentState) -> str:
    """Markdown kept current: the phase, what the incident does now and why, what waits on whom."""
    lines = [f"**{state.phase.value}** — {state.doing or 'opening'}"]
    pending = state.pending_approval
    if pending is not None and state.phase is Phase.AWAITING_APPROVAL:
        deadline = pending.since + dt.timedelta(seconds=pending.timeout_s)
        lines += [
            "",
            f"**Pending approval: `{pending.step}`** — {pending.action} (gate `{pending.gate}`; "
            f"{pending.on_timeout} if nobody answers within {pending.timeout_s:g}s, "
            f"at {deadline.strftime('%Y-%m-%d %H:%M:%SZ')}).",
            f"Approve: `{CLI} approve {state.incident_id} {pending.step} --by NAME` · "
            f"skip: `{CLI} skip {state.incident_id} {pending.step} --reason TEXT` · "
            f"abort: `{CLI} abort {state.incident_id} --reason TEXT`",
        ]
    if state.why:
        lines += ["", f"**Why**: {state.why}"]
    if state.pods:
        pods = ", ".join(f"`{p.namespace}/{p.name}`" + (f" (job {p.job})" if p.job else "") for p in state.pods)
        lines.append(f"**Pods**: {pods} on node `{state.node or '?'}`")
    if state.checkpoint is not None:
        lines.append(f"**Checkpoint**: {state.checkpoint.summary}"
                     + (f" ({', '.join(state.checkpoint.checkpoint_ids)})" if state.checkpoint.checkpoint_ids else ""))
    if state.taint_rule:
        lines.append(f"**Taint**: `{state.taint_rule}`{' (removed)' if state.taint_removed else ''}")
    if state.ticket_id:
        lines.append(f"**Ticket**: `{state.ticket_id}`")
    if state.decisions:
        lines.append("**Operators**: " + "; ".join(f"{d.step} {d.decision} by {d.by}" for d in state.decisions))
    if state.timeline:
        last = state.timeline[-1]
        lines.append(f"**Last**: {last.at.strftime('%H:%M:%S')} {last.step}: {last.message}")
    return "\n".join(lines)

