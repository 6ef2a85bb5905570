"""Recording each driver policy in Temporal before an incident names it (``podmedic/domain/policy_ref.py``).

An incident's input carries only its policy's ``PolicyRef``; the policy itself is the input of a
``PodmedicPolicy`` record (``workflows/policy_record.py``) that must exist before the worker runs the
incident's first task. The ingest starts the record once per digest and Temporal client, and again
after ``REFRESH_S`` in case the namespace's retention has removed the closed record meanwhile. A
record that already exists is what we want (REJECT_DUPLICATE answers that it does).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref

from temporalio.client import Client
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from podmedic.domain.policy import DriverPolicy
from podmedic.domain.policy_ref import PolicyRef, ref_of
from workflows.policy_record import PolicyRecordWorkflow

REFRESH_S = 3600.0
"""Start the record again after this long (a namespace keeps closed workflows a day or more)."""

_recorded: weakref.WeakKeyDictionary[Client, dict[tuple[str, str], float]] = weakref.WeakKeyDictionary()
_locks: weakref.WeakKeyDictionary[Client, asyncio.Lock] = weakref.WeakKeyDictionary()


async def recorded(client: Client, policy: DriverPolicy, task_queue: str) -> PolicyRef:
    """``policy``'s reference, once its record exists on ``client``'s namespace (raises when Temporal
    cannot be reached: the caller's delivery is retried, nothing was opened)."""
    ref = ref_of(policy)
    seen = _recorded.setdefault(client, {})
    key = (task_queue, ref.record_id)
    if time.monotonic() - seen.get(key, -REFRESH_S) < REFRESH_S:
        return ref
    async with _locks.setdefault(client, asyncio.Lock()):  # a burst of first events records it once
        if time.monotonic() - seen.get(key, -REFRESH_S) < REFRESH_S:
            return ref
        with contextlib.suppress(WorkflowAlreadyStartedError):  # recorded earlier, here or by another replica
            await client.start_workflow(
                PolicyRecordWorkflow.run, policy, id=ref.record_id, task_queue=task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                static_summary=f"policy {ref.short}",
            )
        seen[key] = time.monotonic()
    return ref
