"""A device-plugin device in a node incident, on the time-skipping server: the GPU that never heals
keeps the quarantine after ``hold_s``; a dry-run policy quarantines nothing and tells no pod.

Fake cluster activities under the real names. What the fakes answer follows upstream: the node's
capacity counts every device the plugin lists and its allocatable only the healthy ones
(pkg/kubelet/cm/devicemanager/manager.go, ``GetCapacity``).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from temporalio import activity
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from podmedic.domain.models import Health, PluginDevice, PodKey
from podmedic.domain.node import (
    DeviceIncidentsInput,
    DeviceIncidentStatus,
    HoldTaintsInput,
    NodeIncidentOutcome,
    NodeWatchInput,
    PluginCapacity,
    PluginCapacityInput,
    QuarantineInput,
    QuarantineResult,
)
from podmedic.domain.policy_file import parse_policy
from podmedic.domain.steps import PodNoticeInput, PodNoticeResult, UntaintResult
from workflows.node.incident import NodeIncidentWorkflow

pytestmark = pytest.mark.asyncio(loop_scope="session")
GPU = "nvidia.com/gpu"


class FakeNode:
    """The node's status (2 GPUs, one unhealthy for ever) and what podmedic asked of it."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def activities(self) -> list[Callable[..., Any]]:
        @activity.defn(name="quarantine_node")
        async def quarantine_node(inp: QuarantineInput) -> QuarantineResult:
            self.calls["quarantine_node"] += 1
            return QuarantineResult(node_found=True, changed=True, detail="cordoned and tainted")

        @activity.defn(name="lift_quarantine")
        async def lift_quarantine(inp: QuarantineInput) -> QuarantineResult:
            self.calls["lift_quarantine"] += 1
            return QuarantineResult(node_found=True, changed=True, detail="uncordoned")

        @activity.defn(name="hold_taints")
        async def hold_taints(inp: HoldTaintsInput) -> list[str]:
            return []

        @activity.defn(name="release_taints")
        async def release_taints(inp: HoldTaintsInput) -> list[UntaintResult]:
            return []

        @activity.defn(name="device_incidents_status")
        async def device_incidents_status(inp: DeviceIncidentsInput) -> list[DeviceIncidentStatus]:
            return []

        @activity.defn(name="notify_pod")
        async def notify_pod(inp: PodNoticeInput) -> PodNoticeResult:
            self.calls["notify_pod"] += 1
            return PodNoticeResult(pod_found=True, event_recorded=True)

        @activity.defn(name="node_plugin_capacity")
        async def node_plugin_capacity(inp: PluginCapacityInput) -> PluginCapacity:
            self.calls["node_plugin_capacity"] += 1
            return PluginCapacity(node_found=True, capacity={GPU: "2"}, allocatable={GPU: "1"})

        return [quarantine_node, lift_quarantine, hold_taints, release_taints, device_incidents_status, notify_pod,
                node_plugin_capacity]


def _report() -> PluginDevice:
    return PluginDevice(pod=PodKey(namespace="ml", name="trainer", uid="u1"), node="node-7", resource=GPU,
                        device_id="GPU-0e5a", health=Health.UNHEALTHY, observed_at=dt.datetime.now(dt.UTC),
                        event_id=f"pod-status/u1/{GPU}/GPU-0e5a/Unhealthy@1")


async def _run(client: Client, policy_yaml: str) -> tuple[NodeIncidentOutcome, FakeNode]:
    policy = parse_policy(policy_yaml).for_driver(GPU)
    fake, tq = FakeNode(), f"tq-{uuid.uuid4().hex[:8]}"
    watch = NodeWatchInput.under("node-7", GPU, policy, search_attributes=False)
    async with Worker(client, task_queue=tq, workflows=[NodeIncidentWorkflow], activities=fake.activities()):
        handle = await client.start_workflow(NodeIncidentWorkflow.run, watch, id=f"node/node-7-{tq}", task_queue=tq,
                                             start_signal="plugin_device_failed", start_signal_args=[_report()])
        return await handle.result(), fake


async def test_a_gpu_that_never_heals_keeps_the_quarantine_after_hold_s(time_skipping_env: WorkflowEnvironment) -> None:
    outcome, fake = await _run(time_skipping_env.client, """
drivers:
  default:
    node_quarantine: {hold_s: 600, poll_s: 30}
""")
    assert outcome.quarantined and "KEPT" in outcome.explanation, outcome.explanation
    assert f"{GPU}: 1 of 2 not healthy" in outcome.explanation
    assert fake.calls["quarantine_node"] == 1 and fake.calls["lift_quarantine"] == 0
    assert fake.calls["notify_pod"] == 1, "the pod is told once, however long the hold"
    assert outcome.devices == [f"{GPU}/GPU-0e5a"]


async def test_a_dry_run_policy_quarantines_nothing_and_tells_no_pod(time_skipping_env: WorkflowEnvironment) -> None:
    outcome, fake = await _run(time_skipping_env.client, """
drivers:
  default:
    dry_run: true
""")
    assert outcome.explanation.startswith("dry-run: node node-7 not quarantined"), outcome.explanation
    assert fake.calls["quarantine_node"] == 0 and fake.calls["notify_pod"] == 0
