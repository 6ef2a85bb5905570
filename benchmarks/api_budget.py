"""A shared API server's limits for a benchmark run: the worker's client-side QPS, the server's APF budget.

``python -m benchmarks storm --kube-qps 50`` runs the worker as the manifests do (``PODMEDIC_KUBE_QPS``
50, ``PODMEDIC_KUBE_BURST`` 100: client-go's token bucket, ``podmedic/kube/throttle.py``), and gives
every user of the simulator's API server an API Priority and Fairness budget a fifth above it
(``podmedic_sim/flow_control.py``: a request past the budget is answered 429 with ``Retry-After``,
as upstream's APF filter). A worker that kept its own limit is never refused: ``dropped`` 0, and
the most requests the server admitted from it in one second is at most ``qps + burst``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchmarks.fleet import Sim

APF_HEADROOM = 1.2
"""The server's budget against the worker's own limit: any request over the worker's limit is refused."""
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

    async def figures(self, sim: Sim) -> dict[str, Any] | None:
        """What the server admitted and refused of the worker's requests; None when the run was not limited."""
        if not self.on:
            return None
        async with sim.session.get(f"{sim.url}/sim/v1/flow-control") as answer:
            state: dict[str, Any] = await answer.json()
        worker = state["users"].get(WORKER_USER, {"admitted": 0, "dropped": 0, "max_per_second": 0})
        return {"kube_qps": self.kube_qps, "kube_burst": self.kube_burst, "apf_qps": state["qps"],
                "apf_burst": state["burst"], "worker_admitted": worker["admitted"],
                "worker_refused_429": worker["dropped"], "worker_max_per_second": worker["max_per_second"],
                "within_limit": worker["dropped"] == 0
                and worker["max_per_second"] <= self.kube_qps + self.kube_burst}


def budget_line(figures: dict[str, Any] | None) -> list[str]:
    """The run's API budget as one line of the benchmark's table (none when it was not limited)."""
    if not figures:
        return []
    verdict = "met" if figures["within_limit"] else "MISSED"
    return [f"  API budget: worker {figures['kube_qps']:g} QPS, burst {figures['kube_burst']} (server APF "
            f"{figures['apf_qps']:g}/{figures['apf_burst']}): {figures['worker_admitted']} requests admitted, "
            f"{figures['worker_refused_429']} refused (429), at most {figures['worker_max_per_second']} in one "
            f"second; never over its limit: {verdict}"]


UNLIMITED = ApiBudget()
"""No limit and no server budget: the storm as before."""
