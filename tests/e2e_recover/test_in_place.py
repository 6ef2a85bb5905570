"""In-place restart by each mechanism: same pod UID and devices, restartCount grown, workload progressing."""

from __future__ import annotations

from typing import Any

import pytest
from temporalio.client import Client

from podmedic.domain.models import Outcome
from podmedic_sim import SimCluster
from tests.e2e_recover.conftest import (
    described,
    fault,
    incident,
    notes,
    podmedic_events,
    policy,
    start_job,
    wait_progress,
)

pytestmark = pytest.mark.asyncio(loop_scope="session")
IN_PLACE_ONLY = "[{action: in_place_restart, timeout_s: 8}]"


def _statuses(sim: SimCluster, pod: dict[str, Any]) -> dict[str, int]:
    live = sim.call(lambda: sim.store.get("pods", pod["namespace"], pod["name"]))
    return {c["name"]: c["restartCount"] for c in live["status"]["containerStatuses"]}


def _now(sim: SimCluster, pod: dict[str, Any]) -> dict[str, Any]:
    return next(p for p in sim.state()["pods"] if p["name"] == pod["name"])


@pytest.mark.parametrize(("mechanism", "job_options"), [
    ("{mechanism: exit_code}", {}),
    ("{mechanism: exec_signal, signal: TERM}", {"extra_restart_codes": [143]}),
    ("{mechanism: restart_all_containers}", {"restart_action": "RestartAllContainers", "sidecar": True}),
])
async def test_mechanism_restarts_in_place(sim: SimCluster, worker: tuple[Client, str], mechanism: str,
                                           job_options: dict[str, Any]) -> None:
    client, queue = worker
    job, pod = await start_job(sim, **job_options)
    await wait_progress(sim, job, 5)
    before = _statuses(sim, pod)
    fault(sim, pod)
    outcome = await incident(client, queue, pod, policy(IN_PLACE_ONLY, in_place=mechanism))
    assert outcome.outcome is Outcome.RECOVERED_IN_PLACE, notes(outcome)
    after = _now(sim, pod)
    assert after["uid"] == pod["uid"] and after["devices"] == pod["devices"] and after["ready"]
    counts = _statuses(sim, pod)
    grown = list(before) if "restart_all" in mechanism else ["trainer"]
    assert all(counts[c] > before[c] for c in grown), (before, counts)
    if "restart_all" not in mechanism and len(before) > 1:
        assert counts["logger"] == before["logger"]
    assert "workload progressing" in notes(outcome), notes(outcome)
    assert outcome.pod is not None and outcome.pod.uid == pod["uid"]
    kind, message = podmedic_events(sim, pod)["PodmedicRestarted"]
    assert kind == "Normal" and ": verified;" in message, message
    described_pod = described(sim, pod)
    assert "PodmedicRestarted" in described_pod and "Events:" in described_pod


async def test_exec_signal_refused_when_the_signal_would_fail_the_pod(sim: SimCluster,
                                                                      worker: tuple[Client, str]) -> None:
    client, queue = worker
    _, pod = await start_job(sim)  # its rules restart exit code 85 only; SIGTERM (143) would fail the pod
    fault(sim, pod)
    outcome = await incident(client, queue, pod, policy(IN_PLACE_ONLY, in_place="{mechanism: exec_signal}"))
    assert outcome.recovered_by is None
    assert "would not be restarted in place" in notes(outcome), notes(outcome)
    after = _now(sim, pod)
    assert after["uid"] == pod["uid"] and after["phase"] == "Running" and after["restart_count"] == 0


async def test_verification_fails_when_the_workload_does_not_progress(sim: SimCluster,
                                                                      worker: tuple[Client, str]) -> None:
    client, queue = worker
    job, pod = await start_job(sim)
    await wait_progress(sim, job, 3)
    sim.call(lambda: setattr(sim.engine.workloads.progress[("default", job)], "stalled", True))
    fault(sim, pod)
    outcome = await incident(client, queue, pod, policy("[{action: in_place_restart, timeout_s: 2}]"))
    assert outcome.recovered_by is None
    assert "did not progress past step" in notes(outcome), notes(outcome)
    assert _now(sim, pod)["restart_count"] == 1  # it did restart; the workload just never moved again
    # The pod's Events say it as the timeline does: the attempt failed, and why; never "restarted".
    events = podmedic_events(sim, pod)
    assert "PodmedicRestarted" not in events, events
    kind, message = events["PodmedicRestartFailed"]
    assert kind == "Warning" and "not verified" in message and "did not progress past step" in message, message

