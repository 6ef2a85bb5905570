"""Record a workload stall's history for the replay test (tests/replay/test_replay.py).

The demo has no hang without a device fault, so ``record.py`` cannot find one: this runs the scenario of
tests/e2e_ingest/test_workload_stall.py (dev server, simulator over HTTP, the real worker and ingest; one
rank of a two-rank job hangs) and saves the stall incident's history beside the histories on file (never
over them). Record after an intended, versioned change of the workflow:

    .venv/bin/python -m tests.replay.record_stall
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from podmedic.domain import search
from podmedic.kube.gateway import KubeGateway
from podmedic.temporal.converter import podmedic_data_converter
from tests.conftest import _binary
from tests.e2e_ingest.test_workload_stall import _hung_job, _policy, _result
from tests.helpers import served_sim
from tests.replay.record_guard import save
from workers.ingest.service import run_ingest
from workers.ingest.settings import IngestSettings
from workers.worker.main import build_worker
from workflows.workload_stall import WorkloadStallWorkflow


async def main() -> None:
    """Hang a rank, wait for the stall incident to close, save its history."""
    env = await WorkflowEnvironment.start_local(dev_server_existing_path=_binary("temporal"),
                                                data_converter=podmedic_data_converter,
                                                search_attributes=list(search.ALL_KEYS), dev_server_log_level="error")
    with tempfile.TemporaryDirectory() as tmp, served_sim(Path(tmp)) as sim:
        kube, stop, tq = KubeGateway(Path(str(sim.kubeconfig_path))), asyncio.Event(), "tq-record-stall"
        ingest = asyncio.create_task(run_ingest(env.client, kube, _policy(2), IngestSettings(), tq, stop, http=False))
        async with build_worker(env.client, tq, kube):
            name, _ = await asyncio.to_thread(_hung_job, sim)
            workflow_id = f"workload/default/Job/{name}"
            await _result(env.client.get_workflow_handle_for(WorkloadStallWorkflow.run, workflow_id), timeout=60)
            await save(env.client, workflow_id, "workload_stall")
            stop.set()
            await ingest
        kube.close()
    await env.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
