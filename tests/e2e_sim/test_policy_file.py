"""A policy file that sets one knob, in force on the simulator with real Temporal: the embedded XID
table and fleet guard stay in force.

XID 79 ("GPU has fallen off the bus") is permanent in the embedded table (NVIDIA's XID catalog;
EKS node monitoring treats it as fatal), and a permanent fault gets a ``NoExecute`` taint and a
vendor ticket under the embedded policy. A file that replaced the policy instead of being laid
over it would leave the XID table empty: XID 79 would be handled as transient, ``NoSchedule`` and
no ticket.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from temporalio.testing import WorkflowEnvironment

from podmedic.domain.policy_file import load_policy
from podmedic_sim import SimCluster
from podmedic_sim.vendors.desk import VendorDesk
from tests.helpers import served_sim, wait_until
from tests.pipeline import running_pipeline, served_desk

pytestmark = pytest.mark.asyncio(loop_scope="session")

ONE_KNOB = "drivers:\n  default:\n    close: {poll_s: 0.5}\n"


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    with served_sim(tmp_path_factory.mktemp("policy-file")) as cluster:
        yield cluster


@pytest_asyncio.fixture(loop_scope="session")
async def desk(sim: SimCluster) -> AsyncIterator[VendorDesk]:
    async with served_desk(sim, resolve_after_s=3600.0) as vendor:
        yield vendor


def _rule_for(sim: SimCluster, pool: str, device: str) -> dict[str, Any] | None:
    for rule in sim.state()["taint_rules"]:
        selector = rule.get("spec", {}).get("deviceSelector", {})
        if selector.get("pool") == pool and selector.get("device") == device \
                and rule["spec"]["taint"]["effect"] == "NoExecute":
            return dict(rule)
    return None


async def test_a_one_knob_file_keeps_the_embedded_xid_table_and_guard(
        dev_env: WorkflowEnvironment, sim: SimCluster, desk: VendorDesk, task_queue: str, tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(ONE_KNOB)
    policies = load_policy(path)
    assert policies.guard is not None and policies.guard.enabled
    async with running_pipeline(dev_env.client, sim, policies, task_queue):
        sim.call(lambda: sim.engine.create_training_job("train"))
        pod = await asyncio.to_thread(wait_until, lambda: next(
            (p for p in sim.state()["pods"] if p.get("job") == "train" and p["ready"]), None),
            timeout=30, what="a Ready training pod")
        driver, pool, device = pod["devices"][0].split("/")
        sim.set_device_health(driver, pool, device, "Unhealthy", reason="XidError", code=79, crash=True,
                              message="XID 79: GPU has fallen off the bus")
        rule = await asyncio.to_thread(wait_until, lambda: _rule_for(sim, pool, device), timeout=90,
                                       what="a NoExecute DeviceTaintRule for the failed GPU")
        assert rule["spec"]["deviceSelector"]["driver"] == driver
        await asyncio.to_thread(wait_until, lambda: [t for t in desk.tickets.values()
                                                     if t["evidence"]["device"]["device"] == device],
                                timeout=90, what="a vendor ticket for the failed GPU")
        handle = dev_env.client.get_workflow_handle(f"device/{driver}/{pool}/{device}")
        await handle.terminate("the test has seen what it needed")
