"""Scenario (e): 403 and 422 on the taint step fail it at once, with a clear message.

A rule answers every DeviceTaintRule create of the worker with 403 (or 422) for as long as
the incident runs. ``podmedic/kube/gateway.py`` maps them to ``Forbidden``/``InvalidObject``, which
every step's retry policy names as non-retryable: the incident must end ``failed`` after one
attempt (history) and one create request (ledger), naming the status in its explanation.
"""

from __future__ import annotations

import time

from benchmarks.faults.effects import ScenarioResult, conclude
from benchmarks.faults.harness import Harness


async def run(h: Harness, quick: bool) -> ScenarioResult:
    """One incident per status; each must fail fast."""
    result = ScenarioResult("403/422 fail fast", "every DeviceTaintRule create answered 403, then 422")
    started = time.monotonic()
    for status in (403, 422):
        since = time.time()
        await h.reset_ledger()
        incident = (await h.start_jobs(1, f"ff{status}"))[0]
        incident.expect = "failed"
        await h.api_fault(verbs=["create"], resources=["devicetaintrules"], components=["worker"], status=status)
        try:
            await h.fail(incident)
            before = result.completed
            result = await conclude(h, result, [incident], since, timeout_s=120)
        finally:
            await h.clear_api_faults()
        result.faults_injected += 1
        creates = sum(e["count"] for e in await h.ledger()
                      if e["resource"] == "devicetaintrules" and e["verb"] == "create")
        attempts = result.details[-1]["attempts"].get("taint_device", 0)
        result.details[-1]["taint_create_requests"] = creates
        explanation = result.details[-1]["explanation"]
        result.notes.append(f"{status}: taint_device attempts {attempts}, DeviceTaintRule create requests {creates}; "
                            f"outcome {result.details[-1]['outcome']}: {explanation[:160]}")
        if result.completed > before and (attempts != 1 or creates != 1 or str(status) not in explanation):
            result.completed -= 1  # ended failed, but not at once or not clearly
    result.seconds = round(time.monotonic() - started, 1)
    return result
