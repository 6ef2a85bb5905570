"""What an incident reads from a pod: whether its process can still answer a checkpoint request."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import pytest

from activities.checkpoints.methods import MethodRunner
from podmedic.domain.steps import STOPPED_ON_DEAD_DEVICE, CheckpointStatus
from podmedic.kube import podview
from podmedic.kube.podview import containers_running, pod_ref


def _pod(phase: str, *states: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "train-0", "namespace": "ml", "uid": "u1"},
            "spec": {"nodeName": "node-1", "containers": [{"name": f"c{i}"} for i in range(len(states))]},
            "status": {"phase": phase, "containerStatuses": [{"name": f"c{i}", "state": s, "restartCount": 0}
                                                             for i, s in enumerate(states)]}}


RUNNING = {"running": {"startedAt": "2026-11-24T00:00:00Z"}}
CRASHED = {"terminated": {"exitCode": 1, "reason": "Error"}}
BACKOFF = {"waiting": {"reason": "CrashLoopBackOff"}}


@pytest.mark.parametrize(("pod", "expected"), [
    (_pod("Running", RUNNING), True),
    (_pod("Running", RUNNING, RUNNING), True),
    (_pod("Running", RUNNING, BACKOFF), False),  # the trainer crashed, a sidecar still runs
    (_pod("Running", CRASHED), False),
    (_pod("Failed", CRASHED), False),
    (_pod("Pending", {"waiting": {"reason": "ContainerCreating"}}), False),
    (_pod("Running"), False),  # no container status reported yet: not known to run
])
def test_containers_running(pod: dict[str, Any], expected: bool) -> None:
    assert containers_running(pod) is expected
    assert pod_ref(pod).running is expected


class _Kube:
    """``LoopCalls.get_pod`` only: the pod as the API server would return it."""

    def __init__(self, pod: dict[str, Any]) -> None:
        self.pod = pod

    async def get_pod(self, namespace: str, name: str) -> dict[str, Any]:
        return self.pod


@pytest.mark.asyncio
@pytest.mark.parametrize(("device_dead", "status"), [(True, CheckpointStatus.SKIPPED),
                                                     (False, CheckpointStatus.TIMED_OUT)])
async def test_a_stopped_pod_on_a_dead_device_is_not_waited_for(device_dead: bool, status: CheckpointStatus) -> None:
    # On a transient fault the container may restart and answer, so it is waited for.
    crashed = _pod("Running", BACKOFF)
    runner = MethodRunner(_Kube(crashed), "req-1", "device/x", time.monotonic() + 0.3, 0.05,  # type: ignore[arg-type]
                          device_dead=device_dead)
    answer = await runner.annotation(pod_ref(crashed))
    assert answer.status is status
    assert (answer.reason == STOPPED_ON_DEAD_DEVICE) is device_dead


@pytest.mark.parametrize(("stamp", "expected"), [
    # meta/v1 Time marshals as RFC 3339 in UTC with a Z (k8s.io/apimachinery pkg/apis/meta/v1/time.go),
    # MicroTime (events.k8s.io eventTime) with six fractional digits (micro_time.go).
    ("2026-11-28T10:00:00Z", dt.datetime(2026, 11, 28, 10, tzinfo=dt.UTC)),
    ("2026-11-28T10:00:00.123456Z", dt.datetime(2026, 11, 28, 10, 0, 0, 123456, tzinfo=dt.UTC)),
    ("2026-11-28T12:00:00+02:00", dt.datetime(2026, 11, 28, 10, tzinfo=dt.UTC)),
    ("2026-11-28T10:00:00", dt.datetime(2026, 11, 28, 10, tzinfo=dt.UTC)),  # no offset: the API's UTC
    ("yesterday", None), ("", None), (None, None),
])
def test_api_time_reads_the_apis_stamps(stamp: object, expected: dt.datetime | None) -> None:
    assert podview.api_time(stamp) == expected
