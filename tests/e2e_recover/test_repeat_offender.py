"""Repeat offenders end to end: the device's earlier incident is found through the dev server's
visibility (no fake), and the second incident within the window is treated as permanent."""

from __future__ import annotations

import pytest
from temporalio.client import Client

from podmedic.domain.models import Permanence
from podmedic.domain.policy import RepeatOffenders
from podmedic_sim import SimCluster
from tests.e2e_recover.conftest import fault, incident, policy, start_job

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_second_incident_within_the_window_is_permanent_and_tainted_no_execute(
    sim: SimCluster, worker: tuple[Client, str]
) -> None:
    client, queue = worker
    rules = policy("[{action: in_place_restart, timeout_s: 10}]").model_copy(
        update={"repeat_offenders": RepeatOffenders(incidents=2, window_s=3600)})
    _, pod = await start_job(sim)
    # XID 94 (contained ECC error): a hardware fault, transient by the table. A fault the workload
    # caused (XID 31) counts toward no repeat offence (tests/e2e_node/test_blame_e2e.py).
    fault(sim, pod, code=94)
    first = await incident(client, queue, pod, rules, code=94)
    assert first.recovered_by == "in_place_restart" and first.permanence is Permanence.TRANSIENT, first.explanation

    fault(sim, pod, clears_on_restart=False, code=94)  # the same device, the same kind of fault, minutes later
    second = await incident(client, queue, pod, rules, code=94)
    classify = "\n".join(e.message for e in second.timeline if e.step == "classify")
    assert second.permanence is Permanence.PERMANENT, classify
    assert "repeat offender: 2 incidents" in classify, classify
    assert second.recovered_by != "in_place_restart"  # a lemon is not restarted in place
    assert second.taint_rule is not None
    rule = sim.call(lambda: sim.store.get("devicetaintrules", None, second.taint_rule))
    assert rule["spec"]["taint"]["effect"] == "NoExecute"
