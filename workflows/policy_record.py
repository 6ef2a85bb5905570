"""``PodmedicPolicy``: the durable record of one driver's resolved policy, named by its digest.

The ingest starts one per driver policy it opens incidents with (``podmedic/ingest/policy_records.py``),
id ``podmedic-policy/<driver>/<digest>``; its input is the policy and its result the same policy, so
a worker reads its input (``activities/policy.py``) as soon as the ingest's start returned. It closes in
its first task: it is a record, not a process.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from podmedic.domain.policy import DriverPolicy
    from podmedic.domain.policy_ref import ref_of


@workflow.defn(name="PodmedicPolicy")
class PolicyRecordWorkflow:
    """Holds a driver's policy for the incidents that name it by digest."""

    @workflow.run
    async def run(self, policy: DriverPolicy) -> DriverPolicy:
        """Close at once with the policy as the result."""
        workflow.set_current_details(f"policy of `{policy.driver}` recorded as {ref_of(policy).short}")
        return policy
