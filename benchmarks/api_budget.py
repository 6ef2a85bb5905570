"""A shared API server's limits for a benchmark run: the worker's client-side QPS, the server's APF budget.

``python -m benchmarks storm --kube-qps 50`` runs the worker as the manifests do (``PODMEDIC_KUBE_QPS``
50, ``PODMEDIC_KUBE_BURST`` 100: client-go's token bucket, ``podmedic/kube/throttle.py``), and gives
every user of the simulator's API server an API Priority and Fairness budget a fifth above it
(``podmedic_sim/flow_control.py``: a request past the budget is answered 429 with ``Retry-After``,
as upstream's APF filter). Whether the worker kept its limit is its own count: the most requests its
token bucket gave out in one second (its once-a-minute "kube client:" log line, ``podmedic/kube/load_report.py``),
at most ``qps + burst``. The server's count is reported beside it; it can be higher, because requests
sent over more than a second can reach a busy server within one of its seconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.fleet import Sim

APF_HEADROOM = 1.2
"""The server's budget against the worker's own limit: any request over the worker's limit is refused."""
SENT_PER_SECOND = re.compile(r"kube client: .*at most (\d+) given out in one second")
"""The worker's own count in its log (``podmedic/kube/load_report.py``)."""
WORKER_USER = "podmedic-worker"
"""The worker's User-Agent product: the APF user its requests are counted under."""


@dataclass(frozen=True)
class ApiBudget:
    """The worker's client-side limit (``kube_qps`` 0: none, and no APF budget either)."""

    kube_qps: float = 0.0
    kube_burst: int = 100

    @property
    def on(self) -> bool:
        """Whether the run is limited at all."""
        return self.kube_qps > 0

    def worker_env(self) -> tuple[tuple[str, str], ...]:
        """The worker's environment for the limit."""
        if not self.on:
            return ()
        return ("PODMEDIC_KUBE_QPS", f"{self.kube_qps:g}"), ("PODMEDIC_KUBE_BURST", str(self.kube_burst))

    async def apply(self, sim: Sim) -> None:
        """Give every API user the server's budget (``APF_HEADROOM`` above the worker's limit)."""
        if self.on:
            await sim.post("flow-control", {"qps": self.kube_qps * APF_HEADROOM,
                                            "burst": int(self.kube_burst * APF_HEADROOM)})

    async def figures(self, sim: Sim, worker_log: Path | None = None) -> dict[str, Any] | None:
        """What the server admitted and refused of the worker's requests, and the most the worker sent in one
        second by its own count when ``worker_log`` has it; None when the run was not limited."""
        if not self.on:
            return None
        async with sim.session.get(f"{sim.url}/sim/v1/flow-control") as answer:
            state: dict[str, Any] = await answer.json()
        worker = state["users"].get(WORKER_USER, {"admitted": 0, "dropped": 0, "max_per_second": 0})
        sent = sent_per_second(worker_log) if worker_log is not None else None
        most = worker["max_per_second"] if sent is None else sent
        return {"kube_qps": self.kube_qps, "kube_burst": self.kube_burst, "apf_qps": state["qps"],
                "apf_burst": state["burst"], "worker_admitted": worker["admitted"],
                "worker_refused_429": worker["dropped"], "worker_max_per_second": worker["max_per_second"],
                "worker_max_sent_per_second": sent,
                "within_limit": most <= self.kube_qps + self.kube_burst
                and (sent is not None or worker["dropped"] == 0)}


def sent_per_second(worker_log: Path) -> int | None:
    """The most requests the worker's limiter gave out in one second, from its last report; None without one."""
    try:
        text = worker_log.read_text(errors="replace")
    except OSError:
        return None
    found = SENT_PER_SECOND.findall(text)
    return int(found[-1]) if found else None


def budget_line(figures: dict[str, Any] | None) -> list[str]:
    """The run's API budget as lines of the benchmark's table (none when it was not limited)."""
    if not figures:
        return []
    verdict = "met" if figures["within_limit"] else "MISSED"
    sent = figures.get("worker_max_sent_per_second")
    limit = figures["kube_qps"] + figures["kube_burst"]
    own = (f"the worker gave out at most {sent} requests in one second (its limit: {limit:g})"
           if sent is not None else "the worker's own count: not in its log")
    return [f"  API budget: worker {figures['kube_qps']:g} QPS, burst {figures['kube_burst']} (server APF "
            f"{figures['apf_qps']:g}/{figures['apf_burst']}): {figures['worker_admitted']} requests admitted, "
            f"{figures['worker_refused_429']} refused (429) and sent again after Retry-After, at most "
            f"{figures['worker_max_per_second']} arrived in one second",
            f"  {own}; never over its limit: {verdict}"]


UNLIMITED = ApiBudget()
"""No limit and no server budget: the storm as before."""
