"""Record a storm's histories for the replay test (tests/replay/test_replay.py).

The demo has no storm, so ``record.py`` cannot find these: this runs the scenario of
tests/e2e_node/test_storm_turns_e2e.py (dev server, simulator over HTTP, the real worker and
ingest; six devices fail together, two act at a time) and saves, beside the histories on file
(never over them), a device incident that waited its turn, the driver's turn-keeper and a pool
fence. Record after an intended, versioned change of those workflows:

    .venv/bin/python -m tests.replay.record_storm
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment

from podmedic.domain import search
from podmedic.domain.models import DeviceRef
from podmedic.domain.pool_fence import PoolRef
from podmedic.domain.storm_turns import turns_workflow_id
from podmedic.kube.gateway import KubeGateway
from podmedic.temporal.converter import podmedic_data_converter
from tests.conftest import _binary
from tests.e2e_node.stack import ready_jobs
from tests.e2e_node.test_storm_turns_e2e import POLICY
from tests.helpers import served_sim
from tests.replay.record_guard import save
from workers.ingest.service import run_ingest
from workers.ingest.settings import IngestSettings
from workers.worker.main import build_worker


async def _closed(client: Client, workflow_id: str) -> None:
    for _ in range(600):
        try:
            if (await client.get_workflow_handle(workflow_id).describe()).close_time is not None:
                return
        except RPCError as err:  # not started yet
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
        await asyncio.sleep(1)
    raise AssertionError(f"{workflow_id} still running")


async def main() -> None:
    """Run the storm, wait for the incidents, the pool fences and the keeper to end, save their histories."""
    env = await WorkflowEnvironment.start_local(dev_server_existing_path=_binary("temporal"),
                                                data_converter=podmedic_data_converter,
                                                search_attributes=list(search.ALL_KEYS), dev_server_log_level="error")
    with tempfile.TemporaryDirectory() as tmp, served_sim(Path(tmp), nodes=2, image_pull_s=0.2) as sim:
        kube, stop, tq = KubeGateway(Path(str(sim.kubeconfig_path))), asyncio.Event(), "tq-record-storm"
        ingest = asyncio.create_task(run_ingest(env.client, kube, POLICY, IngestSettings(), tq, stop, http=False))
        async with build_worker(env.client, tq, kube):
            pods = await asyncio.to_thread(ready_jobs, sim, 6)
            devices = [DeviceRef.model_validate(dict(zip(("driver", "pool", "device"), p["devices"][0].split("/"),
                                                         strict=True))) for p in pods]
            for d in devices:
                sim.set_device_health(d.driver, d.pool, d.device, "Unhealthy", reason="XidError",
                                      message="XID 94: contained ECC error", clears_on_restart=True)
            for d in devices:
                await _closed(env.client, d.workflow_id)
            keeper = turns_workflow_id(devices[0].driver)
            await _closed(env.client, keeper)
            pool = PoolRef.of(devices[-1]).workflow_id
            await _closed(env.client, pool)
            waited = [d for d in devices if "storm_turn" in (await env.client.get_workflow_handle(
                d.workflow_id).fetch_history()).to_json()]
            await save(env.client, waited[-1].workflow_id, "device_storm_turn")
            await save(env.client, keeper, "storm_turns")
            await save(env.client, pool, "pool_fence")
            stop.set()
            await ingest
        kube.close()
    await env.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
