"""Record real incident histories for the replay test (tests/replay/test_replay.py).

Runs ``podmedic demo --keep`` (dev server, simulator, worker, ingest, injected faults), then saves
one history of each kind the demo produces into ``tests/replay/histories/<release>/``: a transient
fault restarted in place, a permanent fault with a vendor ticket, a node incident. Record when a
release is cut (``workflows/patches.py``), and after a patched change within it:

    .venv/bin/python -m tests.replay.record

and commit the new files together with the change (docs/deploy.md, "Upgrading the worker"). A
release's histories are only ever added to: a kind already on file gets a new, dated file beside
the old one, and the release's directory leaves the suite with the release.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from temporalio.client import Client, WorkflowExecutionStatus

from podmedic.temporal.connect import connect
from workflows.patches import RELEASE

OUT = Path(__file__).with_name("histories") / RELEASE
ROOT = Path(__file__).resolve().parents[2]


def new_history_path(kind: str) -> Path:
    """Where a new history of ``kind`` goes: ``<kind>.json``, or a dated name beside the ones on file."""
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{kind}.json"
    stamp = time.strftime("%Y%m%d")
    number = 1
    while path.exists():
        path = OUT / f"{kind}_{stamp}{f'_{number}' if number > 1 else ''}.json"
        number += 1
    return path


def _pick(kind: str, workflow_type: str, query: str) -> tuple[str, str, str]:
    return kind, workflow_type, query


# kind -> (workflow type, visibility query picking a finished incident of that kind)
WANTED = [
    _pick("device_transient_in_place", "DeviceIncident", "PodmedicOutcome = 'recovered_in_place'"),
    _pick("device_permanent_ticket", "DeviceIncident", "PodmedicOutcome = 'resolved_by_vendor'"),
    _pick("node_incident", "NodeIncident", ""),
]


async def save(client: Client) -> list[Path]:
    """Fetch one closed history per kind in ``WANTED`` and write it as JSON."""
    written = []
    for kind, wf_type, extra in WANTED:
        query = f"WorkflowType = '{wf_type}'" + (f" AND {extra}" if extra else "")
        async for wf in client.list_workflows(query):
            if wf.status == WorkflowExecutionStatus.RUNNING and wf_type != "NodeIncident":
                continue
            history = await client.get_workflow_handle(wf.id, run_id=wf.run_id).fetch_history()
            path = new_history_path(kind)
            path.write_text(json.dumps(json.loads(history.to_json()), indent=1) + "\n")
            written.append(path)
            break
        else:
            print(f"no {kind} history found ({query})", file=sys.stderr)
    return written


def main() -> int:
    """Run the demo, save the histories, stop the demo."""
    state = Path(tempfile.mkdtemp(prefix="podmedic-record-"))
    summary = state / "summary.json"
    demo = subprocess.Popen([sys.executable, "-m", "workers.cli.main", "demo", "--keep",
                             "--state-dir", str(state / "demo"), "--summary-json", str(summary)],
                            cwd=ROOT, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not summary.exists():
            if demo.poll() is not None or time.monotonic() > deadline:
                print("the demo ended without a summary", file=sys.stderr)
                return 1
            time.sleep(1)
        endpoints = json.loads((state / "demo" / "endpoints.json").read_text())
        client = asyncio.run(connect(endpoints["temporal_address"], endpoints["temporal_namespace"]))
        for path in asyncio.run(save(client)):
            print(f"wrote {path.relative_to(ROOT)}")
    finally:
        os.killpg(demo.pid, signal.SIGINT)
        demo.wait(timeout=60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
