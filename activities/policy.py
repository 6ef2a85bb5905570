"""Loading the policy an incident names by digest (``podmedic/domain/policy_ref.py``).

The incident's first activity (urgent priority) runs this; its answer is kept in the
incident's history, so a replay never asks again. The worker reads the ``PodmedicPolicy`` record's
result and keeps it by digest: a digest's content never changes, so the cache needs no expiry.
"""

from __future__ import annotations

from collections import OrderedDict

from temporalio import activity
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from podmedic.domain.policy import DriverPolicy
from podmedic.domain.policy_ref import PolicyRef, digest_of

CACHED = 64
"""Policies kept by digest: every driver's, across a few policy file edits."""


class PolicyActivities:
    """Reads policy records through one Temporal client."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self._cache: OrderedDict[str, DriverPolicy] = OrderedDict()

    @activity.defn(name="load_policy")
    async def load_policy(self, ref: PolicyRef) -> DriverPolicy:
        """The policy ``ref`` names; retried while its record is missing (the ingest records it
        before it opens an incident, and again within the hour)."""
        if (cached := self._cache.get(ref.digest)) is not None:
            self._cache.move_to_end(ref.digest)
            return cached
        try:
            policy = await self._recorded(ref)
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise ApplicationError(f"policy {ref.short} is not recorded in Temporal ({ref.record_id} not "
                                       "found); the ingest records it before opening an incident") from None
            raise
        if digest_of(policy) != ref.digest:
            # A record's id carries only part of the digest: never act on a policy the incident did not name.
            raise ApplicationError(f"policy record {ref.record_id} holds {digest_of(policy)}, not {ref.digest}",
                                   non_retryable=True)
        self._cache[ref.digest] = policy
        while len(self._cache) > CACHED:
            self._cache.popitem(last=False)
        return policy

    async def _recorded(self, ref: PolicyRef) -> DriverPolicy:
        """The record's input: its first history event, there as soon as the ingest's start returned (its
        result would wait for the record's own workflow task)."""
        handle = self.client.get_workflow_handle(ref.record_id)
        async for event in handle.fetch_history_events(page_size=1):
            started = event.workflow_execution_started_event_attributes
            decoded = await self.client.data_converter.decode(started.input.payloads, [DriverPolicy])
            if decoded and isinstance(decoded[0], DriverPolicy):
                return decoded[0]
            break
        raise ApplicationError(f"policy record {ref.record_id} holds no driver policy", non_retryable=True)
