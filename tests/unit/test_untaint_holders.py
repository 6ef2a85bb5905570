"""DeviceTaintRule ownership against the simulator's API server (real HTTP, real client).

The races of untainting: an old run closing while a new run holds the rule, a
retried release, a rule an operator edited, a node incident holding a device's rule, and
a node quarantine applied twice and lifted without uncordoning a node cordoned before.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from activities.holders import holders_of
from activities.quarantine import QuarantineActivities
from activities.taint import TaintActivities
from podmedic.domain.models import DeviceRef
from podmedic.domain.node import HoldTaintsInput, QuarantineInput
from podmedic.domain.policy_recovery import Effect
from podmedic.domain.steps import TaintInput
from podmedic.kube.gateway import KubeGateway
from podmedic_sim import SimCluster, SimConfig

OLD, NEW, NODE_RUN = "device/d@run-old", "device/d@run-new", "node/node-0000@run-n"


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeGateway]:
    cluster = SimCluster(SimConfig(nodes=2, devices_per_node=4), api_only=True)
    cluster.start(kubeconfig_path=tmp_path_factory.mktemp("untaint") / "kubeconfig")
    gateway = KubeGateway(Path(str(cluster.kubeconfig_path)))
    yield gateway
    gateway.close()
    cluster.stop()


def _taint(device: str, effect: Effect = Effect.NO_SCHEDULE) -> TaintInput:
    ref = DeviceRef(driver="gpu.nvidia.com", pool="node-0000", device=device)
    return TaintInput(incident_id=ref.workflow_id, device=ref, effect=effect, reason="test")


async def test_old_run_closing_leaves_the_rule_the_new_run_holds(kube: KubeGateway) -> None:
    taint = TaintActivities(kube)
    inp = _taint("gpu-0")
    assert (await taint.ensure(inp, OLD)).created
    taken = await taint.ensure(_taint("gpu-0", Effect.NO_EXECUTE), NEW)  # repeat offender: stronger effect
    assert not taken.created and taken.effect is Effect.NO_EXECUTE
    released = await taint.release(inp.device.object_name, OLD, "old run closed")
    assert not released.removed and "not by" in released.detail  # the new run took it over from the old one
    rule = kube.get_taint_rule(inp.device.object_name)
    assert rule is not None and holders_of(rule) == [NEW]
    assert (await taint.release(inp.device.object_name, NEW, "new run closed")).removed
    assert kube.get_taint_rule(inp.device.object_name) is None


async def test_retried_release_is_harmless(kube: KubeGateway) -> None:
    taint = TaintActivities(kube)
    inp = _taint("gpu-1")
    await taint.ensure(inp, OLD)
    assert (await taint.release(inp.device.object_name, OLD, "closed")).removed
    again = await taint.release(inp.device.object_name, OLD, "closed (retry)")
    assert again.removed and again.detail == "already removed"
    # A retry after a new run created the rule again must not remove the new run's rule.
    await taint.ensure(inp, NEW)
    assert not (await taint.release(inp.device.object_name, OLD, "closed (late retry)")).removed
    assert kube.get_taint_rule(inp.device.object_name) is not None
    await taint.release(inp.device.object_name, NEW, "cleanup")


async def test_a_run_reset_away_leaves_its_hold_to_the_new_run_and_a_late_old_release_keeps_it(
    kube: KubeGateway
) -> None:
    # Temporal's Reset ends the old run (Terminated) and replays a new run of the same workflow id up to
    # the reset point: past the taint, the new run never takes the rule over, so the rule names the old
    # run only. The new run's release lets go of the closed run's hold; the old run's late release (an
    # activity still in flight when it was reset) finds the new run running and keeps the rule.
    closed = {OLD: True, NEW: False}

    async def closed_run(holder: str) -> bool:
        return closed[holder]

    taint = TaintActivities(kube, closed_run)
    inp = _taint("gpu-5")
    await taint.ensure(inp, OLD)
    released = await taint.release(inp.device.object_name, NEW, "new run closed")
    assert released.removed and kube.get_taint_rule(inp.device.object_name) is None, released.detail
    await taint.ensure(inp, NEW)  # the other order: the new run holds it, the old run's release comes late
    assert not (await taint.release(inp.device.object_name, OLD, "old run's late release")).removed
    assert kube.get_taint_rule(inp.device.object_name) is not None
    assert (await TaintActivities(kube).release(inp.device.object_name, NEW, "cleanup")).removed


async def test_a_rule_an_operator_edited_is_kept(kube: KubeGateway) -> None:
    taint = TaintActivities(kube)
    inp = _taint("gpu-2")
    await taint.ensure(inp, OLD)
    await kube.aio.patch_taint_rule(inp.device.object_name, {"spec": {"taint": {"effect": "NoExecute"}}})
    kept = await taint.release(inp.device.object_name, OLD, "closed")
    assert not kept.removed and "edited by an operator" in kept.detail
    rule = kube.get_taint_rule(inp.device.object_name)
    assert rule is not None
    await kube.aio.delete_taint_rule_if_unchanged(inp.device.object_name, rule["metadata"]["resourceVersion"])


async def test_a_node_incident_holding_the_rule_keeps_it(kube: KubeGateway) -> None:
    taint = TaintActivities(kube)
    inp = _taint("gpu-3")
    await taint.ensure(inp, OLD)
    assert await taint.hold(HoldTaintsInput(devices=[inp.device], reason="node incident"), NODE_RUN) == [
        inp.device.object_name]
    kept = await taint.release(inp.device.object_name, OLD, "device incident closed")
    assert not kept.removed and kept.kept_for == [NODE_RUN]
    assert (await taint.release(inp.device.object_name, NODE_RUN, "node healed")).removed


async def test_quarantine_is_idempotent_and_lift_restores_the_node(kube: KubeGateway) -> None:
    q = QuarantineActivities(kube)
    req = QuarantineInput(node="node-0001", incident_id="node/node-0001", cordon=True,
                          taint_key="podmedic.io/node-quarantine", effect="NoSchedule", reason="3 devices failed")
    assert (await q.quarantine(req, NODE_RUN)).changed
    assert not (await q.quarantine(req, NODE_RUN)).changed  # a retry changes nothing
    node = kube.get_node("node-0001") or {}
    assert node["spec"]["unschedulable"] is True
    assert [t["key"] for t in node["spec"]["taints"]] == ["podmedic.io/node-quarantine"]
    notes = node["metadata"]["annotations"]
    assert notes["podmedic.io/quarantined-by"] == NODE_RUN and "podmedic" in notes["podmedic.io/changed-by"]
    assert not (await q.lift(req, "node/node-0001@other-run")).changed  # not that run's quarantine
    lifted = await q.lift(req, NODE_RUN)
    assert lifted.changed and "uncordoned" in lifted.detail
    node = kube.get_node("node-0001") or {}
    assert not node["spec"].get("unschedulable") and not node["spec"].get("taints")
    # A node an operator had cordoned before stays cordoned after the lift.
    kube.patch_node("node-0001", {"spec": {"unschedulable": True}})
    await q.quarantine(req, NODE_RUN)
    assert "left cordoned" in (await q.lift(req, NODE_RUN)).detail
    assert (kube.get_node("node-0001") or {})["spec"]["unschedulable"] is True
