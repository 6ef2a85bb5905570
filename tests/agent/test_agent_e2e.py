"""The agent loop (NVML aside) posting to the real ingest app on a real Temporal dev server:
its CloudEvents open the device incidents, through the token, with the answers the ingest gives."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from podmedic.domain.policy_file import load_policy
from tests.agent.fakes import GPUS
from tests.agent.test_loop import ScriptedReader
from tests.helpers import assert_eventually
from workers.agent.loop import run_agent
from workers.agent.post import Poster
from workers.agent.translate import AgentConfig, Translator
from workers.ingest.delivery import Deliverer
from workers.ingest.http.app import build_app, start_site
from workers.ingest.settings import HttpSettings, IngestSettings

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_agent_events_open_incidents_through_the_ingest(
    dev_env: WorkflowEnvironment, task_queue: str, tmp_path: Path
) -> None:
    (tmp_path / "token").write_text("agent-e2e-token\n")
    settings = IngestSettings(http=HttpSettings(port=0, token_file=tmp_path / "token"))
    deliverer = Deliverer(dev_env.client, load_policy(None), task_queue)
    runner, url = await start_site(build_app(deliverer, settings), settings.http)
    node = f"node-{uuid.uuid4().hex[:8]}"
    reader = ScriptedReader(temperatures=[60, 97], xids=[[], [79]])
    poster = Poster(url, token_file=tmp_path / "token", backoff_s=(0.05, 0.2))
    stop = asyncio.Event()
    task = asyncio.create_task(run_agent(reader, Translator(AgentConfig(node=node), GPUS), poster,
                                         interval_s=0.05, stop=stop, xid_wait_ms=10))
    try:
        for device in ("gpu-0", "gpu-1"):  # gpu-0: XID 79; gpu-1: 97 degrees
            handle = dev_env.client.get_workflow_handle(f"device/gpu.nvidia.com/{node}/{device}")

            async def running() -> None:
                try:
                    description = await handle.describe()  # noqa: B023 (awaited within the iteration)
                except Exception as exc:
                    raise AssertionError(f"not started yet: {exc}") from exc
                assert description.status == WorkflowExecutionStatus.RUNNING

            await assert_eventually(running, timeout=20, interval=0.1)
        assert poster.accepted >= 2 and poster.rejected == 0
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
        await runner.cleanup()
