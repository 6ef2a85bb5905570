"""The operator tests' handle on a running `podmedic up` stack: CLI, ingest, simulator."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError

from podmedic.incidents.query import OperatorError, show
from podmedic.temporal.connect import connect
from tests.helpers import assert_eventually, wait_until
from workers.stack.up import Stack

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Ops:
    """The running stack and what the tests need to talk to it."""

    stack: Stack
    state_dir: Path
    _client: Client | None = None

    @property
    def ep(self) -> dict[str, Any]:
        return self.stack.endpoints

    def cli(self, *args: str, stack: Path | None = None) -> subprocess.CompletedProcess[str]:
        """``podmedic ARGS --stack DIR`` as an operator would run it."""
        where = str(stack or self.state_dir)
        return subprocess.run([sys.executable, "-m", "workers.cli.main", *args, "--stack", where],
                              capture_output=True, text=True, timeout=60, cwd=REPO,
                              env={**os.environ, "USER": "tester"})

    def post(self, pool: str, device: str, code: int, message: str) -> str:
        """A CloudEvent to the ingest; the incident id it opened or joined."""
        token = Path(str(self.ep["ingest_token_file"])).read_text().strip()
        event = {"specversion": "1.0", "id": f"{pool}-{device}-{code}", "source": "tests/operators",
                 "type": "io.podmedic.device.health.v1", "time": dt.datetime.now(dt.UTC).isoformat(),
                 "data": {"driver": "gpu.nvidia.com", "pool": pool, "device": device, "node": pool,
                          "health": "Unhealthy", "code": code, "message": message}}
        req = urllib.request.Request(f"{self.ep['ingest_url']}/v1/events", data=json.dumps(event).encode(),
                                     method="POST", headers={"Content-Type": "application/cloudevents+json",
                                                             "Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return str(json.loads(resp.read())["incidents"][0])

    def sim(self, path: str, body: dict[str, Any] | None = None) -> Any:
        """The simulator's own API (workloads, faults, state)."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"{self.ep['sim_url']}{path}", data=data,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read() or b"null")

    def training_pod(self, name: str) -> dict[str, Any]:
        """Start the simulator's one-pod training Job ``name`` (image ``registry.local/<name>:1``); its pod once
        Ready, as ``/sim/v1/state`` lists it."""
        self.sim("/sim/v1/workloads/training", {"name": name, "image": f"registry.local/{name}:1"})
        return wait_until(lambda: next((dict(p) for p in self.sim("/sim/v1/state")["pods"]
                                        if p.get("job") == name and p.get("ready")), None),
                          timeout=60, interval=0.3, what=f"job {name}'s pod Ready")

    def show(self, incident: str) -> dict[str, Any]:
        """``incidents show -o json``."""
        out = self.cli("incidents", "show", incident, "-o", "json")
        assert out.returncode == 0, out.stderr
        shown: dict[str, Any] = json.loads(out.stdout)
        return shown

    async def client(self) -> Client:
        """A Temporal client for polling (the operator actions go through the CLI)."""
        if self._client is None:
            self._client = await connect(str(self.ep["temporal_address"]))
        return self._client

    async def wait_phase(self, incident: str, phase: str, timeout: float = 60) -> dict[str, Any]:
        """Poll until the incident is in ``phase`` (Closed: until its run completed); what ``show`` shows."""
        client = await self.client()

        async def reached() -> dict[str, Any]:
            try:
                shown = await show(client, incident)
            except OperatorError as err:
                raise AssertionError(str(err)) from err  # not opened yet
            except RPCError as err:  # the query found no worker polling yet (a worker still starting)
                raise AssertionError(f"{incident}: query unanswered: {err}") from err
            if phase == "Closed":
                assert shown.status != "Running", f"{incident} still running in {shown.state and shown.state.phase}"
            else:
                assert shown.state is not None and shown.state.phase.value == phase, \
                    f"{incident}: {shown.state.phase.value if shown.state else shown.status}, waiting for {phase}"
            return shown.model_dump(mode="json")

        return await assert_eventually(reached, timeout=timeout, interval=0.3)

    async def notice_story(self, incident: str) -> str:
        """What became of the incident's pod notices, for a failing assertion: each ``notify_step`` activity's
        answer from the run's history, the stack's restarted children, and the Events the API server holds."""
        history = await (await self.client()).get_workflow_handle(incident).fetch_history()
        asked: dict[int, str] = {}
        lines: list[str] = []
        for ev in history.events:
            field = ev.WhichOneof("attributes") or ""
            attrs: Any = getattr(ev, field) if field else None
            if field == "activity_task_scheduled_event_attributes" and attrs.activity_type.name == "notify_step":
                asked[ev.event_id] = json.loads(attrs.input.payloads[0].data)["reason"]
            elif field.startswith("activity_task_") and getattr(attrs, "scheduled_event_id", 0) in asked:
                kind = field.removeprefix("activity_task_").removesuffix("_event_attributes")
                if kind == "started":
                    continue
                said = (attrs.result.payloads[0].data.decode() if kind == "completed"
                        else attrs.failure.message if kind in ("failed", "timed_out") else "")
                lines.append(f"{asked[attrs.scheduled_event_id]}: {kind}: {said}")
        restarted = [f"{c.role} x{c.restarts}" for c in self.stack.children if c.restarts]
        with urllib.request.urlopen(f"{self.ep['sim_url']}/sim/v1/state", timeout=10) as resp:
            pods = len(json.loads(resp.read())["pods"])
        return (f"notify_step answers: {lines}; restarted children: {restarted or 'none'}; "
                f"simulator pods now: {pods}")
