"""The ingest with its HTTP front and the node agent reading the simulator's GPUs, in one process.

On a real NVIDIA cluster pod status says a device is Unhealthy and nothing more (the driver
sends no message); the XID comes from the node agent (NVML). A pipeline run in-process against
the simulator (tests, benchmarks) therefore runs the agent too, as ``podmedic up`` runs it as a
process: the agent's real translator and poster, reading ``GET /sim/v1/nodes/<node>/nvml`` and
posting to the ingest over HTTP (on a free loopback port, with a token made for the run).
"""

from __future__ import annotations

import asyncio
import secrets
import tempfile
from pathlib import Path

from temporalio.client import Client

from podmedic.domain.policy_file import PolicySet
from podmedic.kube.gateway import KubeGateway
from workers.agent.loop import run_agents
from workers.agent.post import Poster
from workers.agent.sim_reader import SimNvmlReader, sim_nodes
from workers.agent.translate import AgentConfig, Translator
from workers.ingest.service import run_ingest
from workers.ingest.settings import HttpSettings, IngestSettings


def _open_readers(sim_url: str) -> list[SimNvmlReader]:
    return [SimNvmlReader(sim_url, node) for node in sim_nodes(sim_url)]


async def run_ingest_and_agent(client: Client, kube: KubeGateway, policies: PolicySet, task_queue: str,
                               stop: asyncio.Event, sim_url: str, *, interval_s: float = 0.5) -> None:
    """The ingest (cluster watches and its HTTP front on a free loopback port, behind a token made
    for this run) and the node agent for every simulated GPU node posting to it, until ``stop``."""
    ready: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
    token = secrets.token_urlsafe(24)
    with tempfile.TemporaryDirectory(prefix="podmedic-ingest-") as tmp:
        token_file = Path(tmp) / "token"
        token_file.write_text(token)
        settings = IngestSettings(http=HttpSettings(port=0, token_file=token_file))
        ingest = asyncio.create_task(run_ingest(client, kube, policies, settings, task_queue, stop,
                                                on_ready=ready.set_result))
        try:
            url = await ready
            assert url is not None
            readers = await asyncio.to_thread(_open_readers, sim_url)
            nodes = [(r, Translator(AgentConfig(node=r.node), r.devices)) for r in readers]
            await run_agents(nodes, Poster(url, token=token, backoff_s=(0.2, 2.0)), interval_s=interval_s,
                             stop=stop, xid_wait_ms=200)
        finally:
            stop.set()
            await ingest
