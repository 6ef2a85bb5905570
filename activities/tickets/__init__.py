"""Ticket stage: vendor tickets through the backend the driver's policy names.

Backends: ``webhook`` (generic signed JSON), ``jira`` (REST v2/v3) and ``servicenow`` (Table
API), one module each. Every one files at most one ticket per incident run however often
the activity is retried: the webhook by its ``Idempotency-Key``, Jira by a label searched
before creating, ServiceNow by a ``correlation_id`` queried before creating. Credentials
are read here from the files or environment variables the policy names.

One ticket per fault episode: a device that fails again while the ticket of its latest
ticketed incident is still open gets this incident's evidence added to that ticket (a webhook
update, a Jira comment, a ServiceNow work note; each idempotent by this run's key) instead of
a new one. The episode ends when the vendor resolves its ticket; crossing the repeat-offender
threshold (``TicketInput.escalate``) opens a new one even while the old ticket is open.
"""

from __future__ import annotations

import logging
from typing import Any

import aiohttp
from temporalio import activity
from temporalio.client import Client

from activities.tickets import evidence as ev
from activities.tickets import jira, servicenow, webhook
from activities.tickets.common import TIMEOUT
from podmedic.domain.models import DeviceRef
from podmedic.domain.steps import TicketInput, TicketNoteInput, TicketResult, TicketStatusInput
from podmedic.domain.ticket_policy import Ticket
from podmedic.kube.gateway import KubeGateway

log = logging.getLogger("podmedic.tickets")

__all__ = ["TicketActivities"]


def _settings(ticket: Ticket | None, url: str) -> Ticket:
    # Inputs recorded before backends existed carry only a webhook URL.
    return ticket if ticket is not None else Ticket(url=url)


class TicketActivities:
    """Files tickets and reads their status; needs the cluster (device attributes) and Temporal
    (the device's previous incidents) for the evidence bundle."""

    def __init__(self, kube: KubeGateway | None = None, client: Client | None = None) -> None:
        self.kube = kube
        self.client = client

    async def _evidence(self, inp: TicketInput) -> dict[str, Any]:
        """The full bundle; a part that cannot be read is named as missing, never blocks the ticket."""
        info = activity.info()
        known = {**inp.evidence, "run_id": info.workflow_run_id}
        attributes: dict[str, Any] = {}
        previous: list[dict[str, Any]] = []
        device = inp.evidence.get("device") or {}
        if self.kube is not None and device:
            try:
                attributes = await ev.device_attributes(self.kube, DeviceRef(**device))
            except Exception as exc:  # evidence is best effort: the ticket matters more
                attributes = {"unavailable": str(exc)[:300]}
        if self.client is not None and info.workflow_id and info.workflow_run_id:
            try:
                previous = await ev.previous_incidents(self.client, info.workflow_id, info.workflow_run_id)
            except Exception as exc:
                known["previous_incidents_unavailable"] = str(exc)[:300]
        return ev.bundle(known, attributes, previous)

    @activity.defn(name="file_ticket")
    async def file_ticket(self, inp: TicketInput) -> TicketResult:
        """File one ticket per fault episode with the evidence bundle (retries find the first one), or add
        this incident's evidence to the episode's open ticket."""
        ticket = _settings(inp.ticket, inp.url)
        if ticket.backend == "none":
            return TicketResult(filed=False, backend="none", detail="ticket backend is none")
        evidence = await self._evidence(inp)
        latest = next((str(p["ticket"]) for p in evidence["previous_incidents"] if p.get("ticket")), None)
        prior = latest if ticket.one_per_episode and not inp.escalate else None
        if inp.escalate:
            evidence["escalated"] = {"why": inp.escalate, "earlier_ticket": latest}
        async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
            if ticket.backend == "jira":
                assert ticket.jira is not None  # the policy refuses jira without its section
                result = await jira.file(session, ticket.jira, inp.idempotency_key, evidence, prior)
            elif ticket.backend == "servicenow":
                assert ticket.servicenow is not None
                result = await servicenow.file(session, ticket.servicenow, inp.idempotency_key, evidence, prior)
            else:
                result = await webhook.file(session, ticket, inp.incident_id, inp.idempotency_key, evidence, prior)
        log.info("%s: %s ticket %s %s", inp.incident_id, result.backend, result.ticket_id, result.detail)
        return result

    @activity.defn(name="note_ticket")
    async def note_ticket(self, inp: TicketNoteInput) -> bool:
        """Add a note to the open ticket (a webhook update, a Jira comment, a ServiceNow work note), once per
        idempotency key; ``False`` when the ticket is resolved or gone, or the backend is none."""
        ticket = _settings(inp.ticket, inp.url)
        async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
            if ticket.backend == "jira" and ticket.jira is not None:
                done = await jira.note(session, ticket.jira, inp.idempotency_key, inp.ticket_id, inp.text)
            elif ticket.backend == "servicenow" and ticket.servicenow is not None:
                done = await servicenow.note(session, ticket.servicenow, inp.idempotency_key, inp.ticket_id, inp.text)
            elif ticket.backend == "none":
                done = False
            else:
                done = await webhook.note(session, ticket, inp.incident_id, inp.idempotency_key, inp.ticket_id,
                                          inp.text)
        log.info("%s: %s ticket %s %s", inp.incident_id, ticket.backend, inp.ticket_id,
                 "noted" if done else "not noted (resolved, gone or no backend)")
        return done

    @activity.defn(name="ticket_status")
    async def ticket_status(self, inp: TicketStatusInput) -> str:
        """``open`` or ``resolved``, as the backend says."""
        ticket = _settings(inp.ticket, inp.url)
        async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
            if ticket.backend == "jira" and ticket.jira is not None:
                return await jira.status(session, ticket.jira, inp.ticket_id)
            if ticket.backend == "servicenow" and ticket.servicenow is not None:
                return await servicenow.status(session, ticket.servicenow, inp.ticket_id)
            if ticket.backend == "none":
                return "open"
            return await webhook.status(session, ticket, inp.ticket_id)

