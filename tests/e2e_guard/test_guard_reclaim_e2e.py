"""End to end on the dev server and the simulator over HTTP: incidents terminated from Temporal while
they hold the fleet guard's permits do not keep the next device's failure from its taint.

The operator's check: the guard allows 3 devices at once, three XID 79 incidents are terminated
mid-remediation, each waiting at an approval gate (Terminate runs none of the incident's code, so no
``release`` reaches the guard), and a fourth device's failure is still tainted within a minute of its
approval gate's timeout.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from temporalio.client import Client

from podmedic.domain.policy_file import parse_policy
from podmedic.incidents.query import OperatorError
from podmedic_sim import SimCluster
from tests.e2e_guard.stack import DRIVER, DRIVERS, fail, incidents_seen, sim, stack, target
from tests.helpers import assert_eventually
from workers.cli.guard import fetch_status

__all__ = ["sim"]
pytestmark = pytest.mark.asyncio(loop_scope="session")
THREE_AT_ONCE = parse_policy("""
guard:
  max_devices_tainted: 3
  max_driver_share: 1
  max_pool_share: 1
  retry_s: 600
  reclaim_s: 5
  storm: {enabled: false}
""" + DRIVERS + """
    approvals: {gates: [{action: taint_no_execute, timeout_s: 30, on_timeout: proceed}]}
""")
"""An incident with no pod closes about a second after its taint, giving its permit back: the gate holds each of
the first three mid-remediation (its NoSchedule rule made, waiting to raise it to NoExecute), permit in hand, for
30 s, time enough to terminate it. The fourth, its fence refused while the three held every permit, taints only
NoExecute: unanswered, its gate lets it go on after those 30 s."""


@pytest_asyncio.fixture(loop_scope="session")
async def three_stack(dev_env: object, sim: SimCluster, task_queue: str) -> AsyncIterator[Client]:
    async for client in stack(dev_env, sim, THREE_AT_ONCE, task_queue):  # type: ignore[arg-type]
        yield client


def rule_for(sim: SimCluster, pool: str, device: str) -> bool:
    """Whether a DeviceTaintRule selects the device (KEP-5055: ``spec.deviceSelector`` names driver, pool
    and device)."""
    wanted = {"driver": DRIVER, "pool": pool, "device": device}
    return any({k: ((r["spec"] or {}).get("deviceSelector") or {}).get(k) for k in wanted} == wanted
               for r in sim.state()["taint_rules"])


async def test_three_terminated_holders_do_not_keep_a_fourth_device_untainted(sim: SimCluster,
                                                                                three_stack: Client) -> None:
    client = three_stack
    first = [("node-0000", "gpu-0"), ("node-0000", "gpu-1"), ("node-0001", "gpu-0")]
    fail(sim, first, "79")

    async def three_permits() -> None:
        try:
            status = await fetch_status(target(client))
        except OperatorError as err:  # no incident has asked the guard yet
            raise AssertionError(str(err)) from err
        assert len(status.permits) == 3, (status.permits, await incidents_seen(client, first))
        assert all(rule_for(sim, *d) for d in first), sim.state()["taint_rules"]
    await assert_eventually(three_permits, timeout=60)
    for pool, device in first:
        await client.get_workflow_handle(f"device/{DRIVER}/{pool}/{device}").terminate(reason="e2e: Terminate")

    fourth = ("node-0001", "gpu-1")
    fail(sim, [fourth], "79")

    async def tainted() -> None:
        assert rule_for(sim, *fourth), (await incidents_seen(client, [fourth]), await fetch_status(target(client)))
    await assert_eventually(tainted, timeout=90)

    async def all_three_freed() -> None:
        # One freed permit is enough for the fourth device: the others may be freed at the next reclaim round.
        status = await fetch_status(target(client))
        assert not {p.incident_id for p in status.permits} & {f"device/{DRIVER}/{p}/{d}" for p, d in first}
        freed = [line for line in status.history if "freed the permit of" in line]
        assert len(freed) == 3 and all("its run closed (terminated)" in line for line in freed), status.history
    await assert_eventually(all_three_freed, timeout=30)
