"""Strategic merge patches and update rules, as the real API server applies them.

Expected shapes come from upstream, not from podmedic: the patch strategies are the
``patchStrategy``/``patchMergeKey`` tags of k8s.io/api core/v1/types.go (``PodSpec.SchedulingGates``:
merge by ``name``; ``ObjectMeta.Finalizers``: merge; ``PodStatus.ContainerStatuses``: no
strategy, ``x-kubernetes-list-type: atomic``), the directives those of
k8s.io/apimachinery/pkg/util/strategicpatch (``$patch: delete``, ``$deleteFromPrimitiveList``),
and the gate rule ``validateOnlyDeletedSchedulingGates`` of
kubernetes/kubernetes pkg/apis/core/validation/validation.go.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from activities.recovery.placement import GATE
from activities.recovery.reschedule import remove_own_gate
from podmedic.kube.gateway import KubeGateway
from tests.helpers import run_on_loop
from tests.sim.conftest import pod_manifest

OTHER_GATE = "kueue.x-k8s.io/admission"  # another controller's gate on the same pod


def _gated(v1: client.CoreV1Api, ns: str, name: str, gates: list[str]) -> None:
    manifest = pod_manifest(name, schedulingGates=[{"name": g} for g in gates])
    del manifest["spec"]["nodeName"]  # a gated pod is not bound
    v1.create_namespaced_pod(ns, manifest)


def _gates(v1: client.CoreV1Api, ns: str, name: str) -> list[str]:
    return [g.name for g in v1.read_namespaced_pod(name, ns).spec.scheduling_gates or []]


def test_a_list_of_the_remaining_gates_merges_by_name_and_removes_nothing(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    _gated(v1, ns, "p", [GATE, OTHER_GATE])
    v1.patch_namespaced_pod("p", ns, {"spec": {"schedulingGates": [{"name": OTHER_GATE}]}})
    assert _gates(v1, ns, "p") == [GATE, OTHER_GATE]


def test_the_delete_directive_removes_exactly_one_gate(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    _gated(v1, ns, "p", [GATE, OTHER_GATE])
    v1.patch_namespaced_pod("p", ns, {"spec": {"schedulingGates": [{"name": GATE, "$patch": "delete"}]}})
    assert _gates(v1, ns, "p") == [OTHER_GATE]


def test_podmedic_removes_its_gate_and_leaves_another_controllers(kubeconfig: Path, api: client.ApiClient,
                                                                  ns: str) -> None:
    v1 = client.CoreV1Api(api)
    _gated(v1, ns, "both", [OTHER_GATE, GATE])
    _gated(v1, ns, "mine", [GATE])
    _gated(v1, ns, "theirs", [OTHER_GATE])
    kube = KubeGateway(kubeconfig)  # no component: test set-up is not a podmedic process
    for name in ("both", "mine", "theirs"):
        run_on_loop(kube, remove_own_gate(kube.aio, ns, name))
    assert _gates(v1, ns, "both") == [OTHER_GATE]
    assert _gates(v1, ns, "mine") == []
    assert _gates(v1, ns, "theirs") == [OTHER_GATE]


def test_a_gate_cannot_be_added_after_creation(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    _gated(v1, ns, "p", [OTHER_GATE])
    with pytest.raises(client.ApiException) as err:
        v1.patch_namespaced_pod("p", ns, {"spec": {"schedulingGates": [{"name": GATE}]}})
    assert err.value.status == 422
    # The patched list puts the new gate first (strategicpatch normalizeElementOrder: a patch item the live
    # list does not hold goes before the live items; kubectl patch --local gives the same order).
    assert ("spec.schedulingGates[0].name: Forbidden: only deletion is allowed, but found new scheduling gate "
            f"'{GATE}'") in err.value.body


def test_finalizers_merge_as_a_set_and_leave_by_delete_from_primitive_list(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    v1.create_namespaced_pod(ns, {**pod_manifest("p"), "metadata": {"name": "p", "finalizers": ["a.io/one"]}})
    v1.patch_namespaced_pod("p", ns, {"metadata": {"finalizers": ["b.io/two"]}})
    # A set merge keeps both, the patch's first (strategicpatch mergeSlice, then normalizeElementOrder).
    assert v1.read_namespaced_pod("p", ns).metadata.finalizers == ["b.io/two", "a.io/one"]
    v1.patch_namespaced_pod("p", ns, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a.io/one"]}})
    assert v1.read_namespaced_pod("p", ns).metadata.finalizers == ["b.io/two"]


def test_container_statuses_are_atomic_and_replaced_whole(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    two = {**pod_manifest("p"), "spec": {**pod_manifest("p")["spec"], "containers": [
        {"name": "a", "image": "registry.local/app:1"}, {"name": "b", "image": "registry.local/app:1"}]}}
    v1.create_namespaced_pod(ns, two)
    status = {"name": "a", "ready": False, "restartCount": 0, "image": "registry.local/app:1", "imageID": ""}
    v1.patch_namespaced_pod_status("p", ns, {"status": {"containerStatuses": [status, {**status, "name": "b"}]}})
    v1.patch_namespaced_pod_status("p", ns, {"status": {"containerStatuses": [{**status, "restartCount": 1}]}})
    statuses = v1.read_namespaced_pod_status("p", ns).status.container_statuses
    assert [(s.name, s.restart_count) for s in statuses] == [("a", 1)]
