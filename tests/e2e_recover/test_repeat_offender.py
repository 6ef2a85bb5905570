"""Repeat offenders end to end: the device's earlier incident is found through the dev server's
visibility (no fake), and the second incident within the window is treated as permanent. The GPU's
identity is its UUID as the driver publishes it in the ResourceSlice (the device attribute ``uuid``
of NVIDIA's DRA driver, read from NVML), which the simulator's slices carry too."""

from __future__ import annotations

import uuid
from typing import Any

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


def _uuid_of(sim: SimCluster, resource_id: str) -> str:
    driver, pool, name = resource_id.split("/")
    for rslice in sim.call(lambda: sim.store.list("resourceslices")):
        if rslice["spec"]["driver"] == driver and rslice["spec"]["pool"]["name"] == pool:
            return str(next(d for d in rslice["spec"]["devices"] if d["name"] == name)["attributes"]["uuid"]["string"])
    raise KeyError(resource_id)


def _set_uuid(sim: SimCluster, resource_id: str, gpu: str) -> None:
    """The driver republishes the slot's GPU UUID, as NVIDIA's DRA driver does from NVML at start-up (its
    device attribute ``uuid``): a GPU swapped in, moved in, or enumerated in another order by a reboot."""
    driver, pool, name = resource_id.split("/")

    def edit(obj: dict[str, Any]) -> None:
        next(d for d in obj["spec"]["devices"] if d["name"] == name)["attributes"]["uuid"] = {"string": gpu}

    [name_of_slice] = [s["metadata"]["name"] for s in sim.call(lambda: sim.store.list("resourceslices"))
                       if s["spec"]["driver"] == driver and s["spec"]["pool"]["name"] == pool]
    sim.call(lambda: sim.store.mutate("resourceslices", None, name_of_slice, edit))


async def test_a_gpu_swapped_into_a_lemon_slot_starts_clean_and_a_moved_gpu_keeps_its_record(
    sim: SimCluster, worker: tuple[Client, str]
) -> None:
    """The history follows the GPU (its UUID), not the slot (issue 51, mechanism 5: "by UUID, and by node/slot").

    The slot's earlier incident was another GPU's: the new board's first fault is transient. The GPU that had
    that incident, now under another device name, fails again: it is a repeat offender there.
    """
    client, queue = worker
    rules = policy("[{action: in_place_restart, timeout_s: 10}]").model_copy(
        update={"repeat_offenders": RepeatOffenders(incidents=2, window_s=3600)})
    _, first_pod = await start_job(sim)
    slot = first_pod["devices"][0]
    fault(sim, first_pod, code=94)
    first = await incident(client, queue, first_pod, rules, code=94)
    assert first.permanence is Permanence.TRANSIENT, first.explanation

    # The failed GPU leaves the slot for another (the same node's other GPU, as a reboot that enumerates
    # them in another order shows it), and a new board takes the slot.
    _, other_pod = await start_job(sim)
    moved_to = other_pod["devices"][0]
    assert moved_to != slot
    lemon = _uuid_of(sim, slot)
    _set_uuid(sim, moved_to, lemon)
    _set_uuid(sim, slot, f"GPU-{uuid.uuid4()}")

    fault(sim, first_pod, clears_on_restart=True, code=94)
    fresh = await incident(client, queue, first_pod, rules, code=94)
    classify = "\n".join(e.message for e in fresh.timeline if e.step == "classify")
    assert fresh.permanence is Permanence.TRANSIENT, classify
    assert "1 earlier incident(s) of this slot not counted: another GPU was in it then" in classify, classify

    fault(sim, other_pod, clears_on_restart=True, code=94)
    again = await incident(client, queue, other_pod, rules, code=94)
    classify = "\n".join(e.message for e in again.timeline if e.step == "classify")
    assert again.permanence is Permanence.PERMANENT, classify
    assert "repeat offender: 2 incidents" in classify, classify
    assert f"GPU {lemon} had incident(s) under another name too: {slot}" in classify, classify
