"""The vendor-ticket stage of an incident: file with the evidence, wait for the fix, verify the device.

Deterministic workflow code: the backends, credentials and the parts of the evidence only
the cluster or Temporal know (device attributes, previous incidents) live in the activity.
What the workflow sends is capped, so a long-running flapping device cannot bloat history.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.tickets import TicketActivities
    from podmedic.domain import incident as record
    from podmedic.domain import search
    from podmedic.domain.flapping import healthy_after_the_failure, healthy_report
    from podmedic.domain.incident import IncidentState, Phase
    from podmedic.domain.models import DeviceHealthEvent, DeviceRef, Health
    from podmedic.domain.policy import RepeatOffenders
    from podmedic.domain.steps import TicketInput, TicketNoteInput, TicketStatusInput
    from workflows.activity_options import GIVE_BACK, activity_options
    from workflows.closing import vendor_wait_carry
    from workflows.closing.unseen_device import ask_to_untaint
    from workflows.context import ClosingContext, IncidentContext
    from workflows.record.pod_notices import tell_pods
    from workflows.waiting.approval_gate import clear_to
    from workflows.waiting.wait import wait_for


LEMON_WAITS_FOR_VENDOR = "lemon-waits-for-vendor"
"""Patch: a repeat offender's Healthy report (after a reset or a reboot) no longer ends the vendor wait."""

GIVEN_BACK_NOTES_TICKET = "given-back-notes-ticket"
"""Patch: a device that goes back into service on its own Healthy report tells its open ticket so."""

MAX_EVENTS = 50
MAX_ACTIONS = 100
MAX_PODS = 50
MAX_MESSAGE = 300


def _cut(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


def evidence(state: IncidentState, events: Sequence[DeviceHealthEvent], device: DeviceRef) -> dict[str, Any]:
    """What the incident knows for the bundle: health timeline (``events``), pods, actions, checkpoints (capped)."""
    health = [{"at": e.observed_at.isoformat(), "health": e.health.value, "code": e.code, "reason": e.reason,
               "message": _cut(e.message), "source": e.source,
               "pod": f"{e.pod.namespace}/{e.pod.name}" if e.pod else None}
              for e in events[-MAX_EVENTS:]]
    checkpoints = [{"pod": r.pod, "status": r.status.value, "id": r.checkpoint_id, "location": r.location}
                   for r in (state.checkpoint.results if state.checkpoint else [])][:MAX_PODS]
    return {
        "incident": state.incident_id,
        "device": device.model_dump(),
        "node": state.node,
        "node_incident": state.node_incident,
        "failure_mode": state.failure_mode,
        "permanence": state.permanence,
        "flapping": state.flapping,
        "classification": _cut(state.why or ""),
        "events": health,
        "events_total": len(events),
        "pods": [f"{p.namespace}/{p.name} (uid {p.uid}, node {p.node}, job {p.job or '-'})"
                 for p in state.pods[:MAX_PODS]],
        "checkpoint_ids": state.checkpoint.checkpoint_ids if state.checkpoint else [],
        "checkpoints": checkpoints,
        "recovery": [{"action": r.action, "verified": r.verified, "detail": _cut(r.detail)}
                     for r in state.recovery[:MAX_PODS]],
        "taint_rule": state.taint_rule,
        "actions": [{"at": t.at.isoformat(), "step": t.step, "message": _cut(t.message)}
                    for t in state.timeline[-MAX_ACTIONS:]],
    }


def escalation(state: IncidentState, rule: RepeatOffenders) -> str:
    """Why this incident warrants a ticket of its own although the device's last one may be open:
    it is the one that made the device a repeat offender. Later incidents of the lemon join its
    ticket; earlier ones joined the ticket before it."""
    if not state.repeat_offender or len(state.previous_incidents) + 1 != rule.incidents:
        return ""
    return f"repeat offender: {rule.incidents} incidents of this device within {rule.window_s:g}s"


async def file_ticket(wf: IncidentContext) -> bool:
    """File (or, for Jira, comment on the device's open) ticket; ``True`` when one is on record."""
    wf.enter(Phase.TICKETING, "ticket", f"filing a vendor ticket for {wf.inp.device.resource_id}")
    if not await clear_to(wf, "ticket", f"file a vendor ticket for {wf.inp.device.resource_id} "
                                        f"with the evidence bundle"):
        wf.note("ticket", f"no ticket: skipped by an operator ({wf.state.skip['ticket']})")
        return False
    state, ticket = wf.state, wf.policy.ticket
    wf.operator.running = "ticket"
    result = await workflow.execute_activity_method(
        TicketActivities.file_ticket,
        TicketInput(incident_id=state.incident_id, idempotency_key=wf.request_id("ticket"), url=ticket.url,
                    evidence=evidence(state, wf.events, wf.inp.device), ticket=ticket,
                    escalate=escalation(state, wf.policy.repeat_offenders)),
        **activity_options(wf.policy.steps.ticket, f"{ticket.backend} ticket for {wf.inp.device.resource_id}"),
    )
    wf.finished("ticket")
    if not result.filed:
        wf.note("ticket", f"no ticket: {result.detail}")
    elif result.reused:
        wf.note("ticket", f"{result.backend} ticket {result.ticket_id} of this fault episode is still open: this "
                          f"incident's evidence added to it ({result.detail})")
    else:
        wf.note("ticket", f"{result.backend} ticket {result.ticket_id} filed")
    state.ticket_id = result.ticket_id
    if result.filed:
        wf.upsert(search.TICKET, result.ticket_id)
        await tell_pods(wf, "ticketed", f"vendor ticket {result.ticket_id} filed for "
                                        f"{wf.inp.device.resource_id}", warning=True)
    return result.filed


def history_full() -> bool:
    """Whether this run's history is long enough for the vendor wait to continue as a new run."""
    info = workflow.info()
    return info.is_continue_as_new_suggested() or info.get_current_history_length() > record.VENDOR_WAIT_HISTORY


async def wait_vendor(closer: ClosingContext, deadline: dt.datetime | None = None, gap: float | None = None,
                      news_from: int | None = None) -> bool:
    """Wait until ``deadline`` (``ticket.wait_resolution_s`` from now by default) for a resolve callback, a
    Healthy event (not from a flapping device nor a repeat offender), or the backend saying resolved;
    ``closer.resolved_by`` says which. A continued run passes where the wait stood: the gap between status
    calls, and the index from which its reports are news (all it carried)."""
    wf, ticket = closer.wf, closer.policy.ticket
    deadline = deadline or workflow.now() + timedelta(seconds=ticket.wait_resolution_s)
    wf.enter(Phase.AWAITING_VENDOR, "ticket", f"waiting up to {(deadline - workflow.now()).total_seconds():g}s for "
                                              f"the vendor to resolve ticket {wf.state.ticket_id}")
    # Only news after the ticket counts: a flapping device's earlier Healthy reports are no fix.
    seen = news_from if news_from is not None else len(wf.events)
    # A lemon reads Healthy again after a reset or a reboot (its driver's own taint goes with the reboot), and
    # fails again under the next job: it failed repeat_offenders.incidents times, so only the vendor's fix or a
    # person gives it back, and its DeviceTaintRule holds it out until then.
    lemon = wf.state.repeat_offender and workflow.patched(LEMON_WAITS_FOR_VENDOR)
    told = False

    def reported_healthy() -> bool:
        # A Healthy report observed before the failure (delivered late) is no fix.
        return any(e.health is Health.HEALTHY for e in wf.events[seen:]) and healthy_after_the_failure(wf.events)

    def healed() -> bool:
        # A flapping device's next Healthy report says nothing about a fix: only the vendor or a person ends it.
        return not wf.state.flapping and not lemon and reported_healthy()

    def tell_once() -> None:
        nonlocal told
        if lemon and not told and reported_healthy():
            told = True
            count, rule = len(wf.state.previous_incidents) + 1, wf.policy.repeat_offenders
            wf.note("ticket", f"device reports Healthy, but it is a repeat offender ({count} incidents within "
                              f"{rule.window_s:g}s): it stays out, DeviceTaintRule {wf.state.taint_rule} kept, until "
                              f"the vendor resolves ticket {wf.state.ticket_id} or a person resolves the incident")

    def ended() -> bool:
        if wf.operator.resolution is not None:
            closer.resolved_by = wf.operator.resolution.by
            return True
        if healed():
            closer.resolved_by = ""
            return True
        return False

    gap = gap if gap is not None else ticket.poll_s
    while (remaining := (deadline - workflow.now()).total_seconds()) > 0:
        if ended():
            return True
        tell_once()
        if await vendor_resolved(closer):
            return True
        if history_full():
            await vendor_wait_carry.continue_wait(wf, deadline, gap, seen, closer.read_healthy)
        # The gap between status calls doubles up to ``poll_max_s``: a weeks-long wait is a few hundred calls.
        # Woken too when the history is full: a chatty device's reports would otherwise pile up for hours.
        await closer.sleep(min(gap, remaining), "wait for the vendor",
                           wake=lambda: healed() or (lemon and not told and reported_healthy()) or history_full())
        gap = min(gap * 2, max(ticket.poll_s, ticket.poll_max_s))
        wf.check_abort()
    return ended()


async def vendor_resolved(closer: ClosingContext) -> bool:
    """Ask the backend whether the ticket is resolved (``closer.resolved_by`` is then "vendor")."""
    wf, ticket = closer.wf, closer.policy.ticket
    status = await workflow.execute_activity_method(
        TicketActivities.ticket_status,
        TicketStatusInput(url=ticket.url, ticket_id=wf.state.ticket_id or "", ticket=ticket),
        **activity_options(closer.policy.steps.ticket, f"status of ticket {wf.state.ticket_id}"),
    )
    if status != "resolved":
        return False
    wf.note("ticket", f"backend reports ticket {wf.state.ticket_id} resolved")
    closer.resolved_by = "vendor"
    return True


async def verify_fixed(closer: ClosingContext) -> bool:
    """After the vendor's word: within ``ticket.verify_s`` the device must read Healthy, or, while it
    reads Unknown (no pod uses it, no driver taint), a source that can see it (the node agent, for an
    idle replaced GPU) must report it Healthy after the failure. Unknown to the end, the incident asks
    an operator (``workflows/closing/unseen_device.py``), unless a person resolved the incident: their word
    stands in."""
    wf, ticket = closer.wf, closer.policy.ticket
    wf.enter(Phase.AWAITING_HEAL, "close", f"ticket {wf.state.ticket_id} resolved; verifying "
                                           f"{wf.inp.device.resource_id} is healthy")
    deadline = workflow.now() + timedelta(seconds=ticket.verify_s)
    health = Health.UNKNOWN

    def reported() -> bool:
        # A report counts only while the cluster cannot see the device (Unknown): a reading outranks it.
        return health is Health.UNKNOWN and healthy_report(wf.events) is not None

    while True:
        health = await closer.read_health()
        report = healthy_report(wf.events) if health is Health.UNKNOWN else None
        trusted = health is Health.UNKNOWN and wf.operator.resolved_by_operator and wf.operator.resolution is not None
        if health is Health.HEALTHY or report is not None or trusted:
            how = (f"{report.source} reports it Healthy ({report.message or report.reason})" if report is not None
                   else "reads Healthy" if health is Health.HEALTHY
                   else f"on {wf.operator.resolution.by}'s word (resolve): nothing can see it" if wf.operator.resolution
                   else "")
            wf.note("close", f"device verified after the ticket's resolution: {_cut(how)}")
            return True
        remaining = (deadline - workflow.now()).total_seconds()
        if remaining <= 0:
            if health is Health.UNKNOWN:
                closer.unverified = (f"ticket {wf.state.ticket_id} resolved but nothing that can see the device "
                                     f"reported it Healthy within {ticket.verify_s:g}s (no pod uses it, no driver "
                                     "taint, no node agent report)")
                return await ask_to_untaint(wf, closer.unverified)
            wf.note("close", f"ticket {wf.state.ticket_id} resolved but the device still reads Unhealthy "
                             f"after {ticket.verify_s:g}s")
            return False
        await wait_for(lambda: wf.operator.abort_request is not None or reported(),
                       at_most_s=min(closer.policy.close.poll_s, remaining), summary="verify the device after the fix")
        wf.check_abort()


async def note_given_back(wf: IncidentContext) -> str:
    """Tell the open ticket that the device went back into service on its own Healthy report, so nobody chases
    a repair it did not need; what came of it, for the outcome (empty on a run that predates the patch)."""
    if not workflow.patched(GIVEN_BACK_NOTES_TICKET):
        return ""
    state, ticket = wf.state, wf.policy.ticket
    healthy = [e for e in wf.events if e.health is Health.HEALTHY]
    seen_by = f"{healthy[-1].source} reported it Healthy" if healthy else "it read Healthy"
    text = (f"podmedic: {wf.inp.device.resource_id} is back in service: {seen_by} after the failure, it held "
            f"Healthy for {wf.policy.close.anti_flap_s:g}s (anti-flap) and it is neither flapping nor a repeat "
            f"offender, so its DeviceTaintRule was removed (incident {state.incident_id}). No repair was needed "
            "this time; if it fails again, podmedic opens a new incident.")
    options = activity_options(wf.policy.steps.ticket, f"tell ticket {state.ticket_id} the device is back")
    options["retry_policy"] = GIVE_BACK
    try:
        noted = await workflow.execute_activity_method(
            TicketActivities.note_ticket,
            TicketNoteInput(incident_id=state.incident_id, idempotency_key=wf.request_id("ticket-note"), url=ticket.url,
                            ticket_id=state.ticket_id or "", text=text, ticket=ticket),
            **options,
        )
    except ActivityError as err:  # the device is back either way: the close does not hang on the ticket desk
        wf.note("ticket", f"ticket {state.ticket_id} not told the device is back in service: {err.cause or err}")
        return f"ticket {state.ticket_id} not told ({err.cause or err})"
    if not noted:
        wf.note("ticket", f"ticket {state.ticket_id} not told the device is back in service: resolved or gone")
        return f"ticket {state.ticket_id} resolved or gone meanwhile"
    wf.note("ticket", f"ticket {state.ticket_id} told the device is back in service")
    return f"ticket {state.ticket_id} told the device is back in service"
