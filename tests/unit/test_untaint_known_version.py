"""Releasing a DeviceTaintRule by the resourceVersion the incident left it at: one request, never a
wrong delete (simulator over real HTTP, the real client).

The precondition is upstream's: a DELETE whose ``DeleteOptions.preconditions.resourceVersion`` no
longer matches the object is refused with 409 Conflict and deletes nothing (k8s.io/apiserver
registry/generic/registry/store.go, ``Delete`` checks ``preconditions.Check``; k8s.io/api
meta/v1 ``Preconditions``). Requests are counted by the simulator's ledger, the API server's side.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from activities.holders import holders_of
from activities.taint import TaintActivities
from podmedic.domain.models import DeviceRef
from podmedic.domain.node import HoldTaintsInput
from podmedic.domain.policy_recovery import Effect
from podmedic.domain.steps import TaintInput
from podmedic.kube.gateway import KubeGateway
from podmedic_sim import SimCluster, SimConfig

OLD, NEW, NODE_RUN = "device/d@run-old", "device/d@run-new", "node/node-0000@run-n"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimCluster]:
    sim = SimCluster(SimConfig(nodes=1, devices_per_node=8), api_only=True)
    sim.start(kubeconfig_path=tmp_path_factory.mktemp("known-version") / "kubeconfig")
    yield sim
    sim.stop()


@pytest.fixture
def kube(cluster: SimCluster) -> Iterator[KubeGateway]:
    gateway = KubeGateway(Path(str(cluster.kubeconfig_path)))
    cluster.ledger.counts.clear()
    yield gateway
    gateway.close()


def _taint(device: str, effect: Effect = Effect.NO_SCHEDULE) -> TaintInput:
    ref = DeviceRef(driver="gpu.nvidia.com", pool="node-0000", device=device)
    return TaintInput(incident_id=ref.workflow_id, device=ref, effect=effect, reason="test")


def _rule_requests(cluster: SimCluster) -> list[tuple[str, int]]:
    return sorted((e.verb, e.status) for e, n in cluster.ledger.counts.items() for _ in range(n)
                  if e.resource == "devicetaintrules")


def test_a_rule_left_as_created_goes_in_one_request(cluster: SimCluster, kube: KubeGateway) -> None:
    taint = TaintActivities(kube)
    inp = _taint("gpu-0")
    made = taint.ensure(inp, OLD)
    assert made.created and made.resource_version
    cluster.ledger.counts.clear()
    released = taint.release(inp.device.object_name, OLD, "closed", made.resource_version)
    assert released.removed
    assert _rule_requests(cluster) == [("delete", 200)]  # no read first
    assert kube.get_taint_rule(inp.device.object_name) is None


def test_a_rule_another_incident_holds_too_is_kept_for_it(cluster: SimCluster, kube: KubeGateway) -> None:
    taint = TaintActivities(kube)
    inp = _taint("gpu-1")
    made = taint.ensure(inp, OLD)
    taint.ensure(_taint("gpu-1", Effect.NO_EXECUTE), NEW)  # a later run takes it over: a new version
    released = taint.release(inp.device.object_name, OLD, "closed", made.resource_version)
    assert not released.removed
    rule = kube.get_taint_rule(inp.device.object_name)
    assert rule is not None and holders_of(rule) == [NEW]
    assert ("delete", 409) in _rule_requests(cluster)  # refused by the precondition, then decided anew
    kube.delete_taint_rule(inp.device.object_name)


def test_a_rule_an_operator_edited_since_is_kept(kube: KubeGateway) -> None:
    taint = TaintActivities(kube)
    inp = _taint("gpu-2")
    made = taint.ensure(inp, OLD)
    kube.patch_taint_rule(inp.device.object_name, {"spec": {"taint": {"effect": "NoExecute"}}})
    kept = taint.release(inp.device.object_name, OLD, "closed", made.resource_version)
    assert not kept.removed and "edited by an operator" in kept.detail
    assert kube.get_taint_rule(inp.device.object_name) is not None
    kube.delete_taint_rule(inp.device.object_name)


def test_a_rule_made_again_by_a_new_run_survives_an_old_runs_late_release(kube: KubeGateway) -> None:
    taint = TaintActivities(kube)
    inp = _taint("gpu-3")
    old = taint.ensure(inp, OLD)
    assert taint.release(inp.device.object_name, OLD, "closed", old.resource_version).removed
    assert taint.ensure(inp, NEW).created  # the same name, a new object
    late = taint.release(inp.device.object_name, OLD, "closed (late retry)", old.resource_version)
    assert not late.removed and kube.get_taint_rule(inp.device.object_name) is not None
    kube.delete_taint_rule(inp.device.object_name)


def test_a_rule_held_with_a_node_incident_gets_no_version(kube: KubeGateway) -> None:
    taint = TaintActivities(kube)
    inp = _taint("gpu-4")
    taint.ensure(inp, OLD)
    taint.hold(HoldTaintsInput(devices=[inp.device], reason="node incident"), NODE_RUN)
    again = taint.ensure(inp, OLD)  # a retried taint step finds the rule it holds, shared now
    assert not again.created and again.resource_version == ""  # its release must read the rule first
    kept = taint.release(inp.device.object_name, OLD, "device incident closed", again.resource_version)
    assert not kept.removed and kept.kept_for == [NODE_RUN]
    kube.delete_taint_rule(inp.device.object_name)
