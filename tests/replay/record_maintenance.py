"""Record a node maintenance's history for the replay test (tests/replay/test_replay.py).

The demo announces no maintenance, so ``record.py`` cannot find one: this runs the scenario of
tests/e2e_ingest/test_maintenance.py (dev server, simulator over HTTP, the real worker and ingest; a node's
maintenance announced by its GKE label, the node taken down at the deadline and brought back) and saves the
incident's history beside the histories on file (never over them). Record after an intended, versioned change
of the workflow:

    .venv/bin/python -m tests.replay.record_maintenance
"""

from __future__ import annotations

import asyncio
import datetime as dt
import tempfile
import uuid
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from podmedic.domain import search
from podmedic.domain.maintenance import GKE_LABEL
from podmedic.kube.gateway import KubeGateway
from podmedic.temporal.converter import podmedic_data_converter
from tests.conftest import _binary
from tests.e2e_ingest.test_maintenance import NOTICE_S, _job, _kubectl, _maintain, _policy, _running
from tests.helpers import served_sim, wait_until
from tests.replay.record_guard import save
from workers.ingest.service import run_ingest
from workers.ingest.settings import IngestSettings
from workers.worker.main import build_worker
from workflows.node.maintenance import NodeMaintenanceWorkflow


async def main() -> None:
    """Announce a node's maintenance under a stepping job, let the incident move it, save its history."""
    env = await WorkflowEnvironment.start_local(dev_server_existing_path=_binary("temporal"),
                                                data_converter=podmedic_data_converter,
                                                search_attributes=list(search.ALL_KEYS), dev_server_log_level="error")
    with tempfile.TemporaryDirectory() as tmp, served_sim(Path(tmp)) as sim:
        kube, stop, tq = KubeGateway(Path(str(sim.kubeconfig_path))), asyncio.Event(), "tq-record-maintenance"
        ingest = asyncio.create_task(run_ingest(env.client, kube, _policy(True), IngestSettings(), tq, stop,
                                                http=False))
        async with build_worker(env.client, tq, kube):
            name = f"train-{uuid.uuid4().hex[:5]}"
            sim.call(lambda: sim.engine.create_training_job(name, prefer_node_label=False))
            pod = await asyncio.to_thread(wait_until, lambda: (r[0] if (r := _running(sim, name)) else None),
                                          timeout=30, what="the pod Ready")
            await asyncio.to_thread(wait_until, lambda: _job(sim, name)["step"] >= 3 or None, timeout=30,
                                    what="steps")
            await asyncio.sleep(3)  # the ingest's node watch is up
            deadline = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(seconds=NOTICE_S)
            _kubectl(sim, "label", "node", pod["node"], f"{GKE_LABEL}={int(deadline.timestamp())}")
            await asyncio.to_thread(_maintain, sim, pod["node"], deadline)
            workflow_id = f"maintenance/{pod['node']}"
            handle = env.client.get_workflow_handle_for(NodeMaintenanceWorkflow.run, workflow_id)
            outcome = await asyncio.wait_for(handle.result(), timeout=60)
            assert outcome.outcome == "moved", outcome
            await save(env.client, workflow_id, "node_maintenance")
            stop.set()
            await ingest
        kube.close()
    await env.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
