"""`podmedic incidents` and `podmedic report` against a live `podmedic up` stack."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from tests.e2e_operators.stack import Ops

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_list_show_approve_skip_with_visibility_filters(ops: Ops) -> None:
    wid = ops.post("rack-9", "gpu-0", 79, "XID 79: GPU has fallen off the bus")
    assert wid == "device/gpu.nvidia.com/rack-9/gpu-0"
    shown = await ops.wait_phase(wid, "AwaitingApproval")
    assert shown["state"]["pending_approval"]["step"] == "taint"
    assert shown["summary"].startswith("gpu.nvidia.com/rack-9/gpu-0 Unhealthy")
    assert "Policy in force (gpu.nvidia.com@" in shown["details"]
    # The input names the policy by digest; show reads the policy itself from the incident's memo.
    assert shown["policy"]["driver"] == "gpu.nvidia.com" and shown["policy"]["taint"]["permanent"] == "NoExecute"

    listed = ops.cli("incidents", "list", "--phase", "AwaitingApproval", "--driver", "gpu.nvidia.com", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    rows = {r["id"]: r for r in json.loads(listed.stdout)}
    assert wid in rows
    attrs = rows[wid]["attributes"]
    assert attrs["PodmedicAwaitingApproval"] == "taint" and attrs["PodmedicFailureMode"] == "device_failed"
    assert attrs["PodmedicDevice"] == "gpu.nvidia.com/rack-9/gpu-0"
    none = ops.cli("incidents", "list", "--driver", "gpu.amd.com", "-o", "json")
    assert none.returncode == 0 and wid not in {r["id"] for r in json.loads(none.stdout)}
    bad = ops.cli("incidents", "list", "--driver", "x' OR WorkflowType != '")
    assert bad.returncode == 2 and "--driver" in bad.stderr
    typo = ops.cli("incidents", "list", "--phase", "AwaitingAproval")  # a typo is an error, not an empty list
    assert typo.returncode == 2 and "invalid choice: 'AwaitingAproval'" in typo.stderr
    assert "AwaitingApproval" in typo.stderr  # the valid values are listed
    names = ops.cli("incidents", "list", "--phase", "AwaitingApproval", "-o", "name")
    assert wid in names.stdout.splitlines(), names.stdout
    elsewhere = ops.cli("incidents", "list", "-n", "no-such-team", "-o", "name")  # -n: the pods' namespace
    assert elsewhere.returncode == 0 and wid not in elsewhere.stdout.splitlines()
    wide = ops.cli("incidents", "list", "--phase", "AwaitingApproval", "-o", "wide")
    assert "DRIVER" in wide.stdout.splitlines()[0] and "gpu.nvidia.com" in wide.stdout

    text = ops.cli("incidents", "show", "gpu.nvidia.com/rack-9/gpu-0")
    assert text.returncode == 0, text.stderr
    assert "PENDING APPROVAL: taint" in text.stdout and f"podmedic incidents approve {wid} taint" in text.stdout
    assert "/namespaces/default/workflows/device%2Fgpu.nvidia.com%2Frack-9%2Fgpu-0/" in text.stdout
    assert re.search(r"^policy: gpu\.nvidia\.com@\S+ sha256:[0-9a-f]{12} ", text.stdout, re.M), text.stdout

    wrong = ops.cli("incidents", "approve", wid, "ticket")
    assert wrong.returncode == 1
    assert "rejected: the incident waits for approval of 'taint', not 'ticket'" in wrong.stderr
    skip = ops.cli("incidents", "skip", wid, "taint", "--reason", "quarantined the rack by hand", "--by", "dora")
    assert skip.returncode == 0, skip.stderr
    assert "taint will be skipped (dora: quarantined the rack by hand)" in skip.stdout
    shown = await ops.wait_phase(wid, "AwaitingVendor")  # no NoExecute, no pods: straight to the vendor ticket
    assert shown["state"]["taint_rule"]  # the NoSchedule fence, never raised
    assert any("left at NoSchedule: skipped by an operator" in t["message"] for t in shown["state"]["timeline"])
    assert [(d["step"], d["decision"], d["by"]) for d in shown["state"]["decisions"]] == [("taint", "skipped", "dora")]

    resolved = ops.cli("incidents", "resolve", wid, "--note", "board replaced")
    assert resolved.returncode == 0, resolved.stderr
    assert "resolved by tester: board replaced" in resolved.stdout  # --by defaults to the user name
    closed = await ops.wait_phase(wid, "Closed")
    assert closed["outcome"]["outcome"] == "resolved_by_vendor"
    # Nothing sees rack-9's idle device (no pod, no driver taint, no agent): the person's resolve stands in.
    assert any("on tester's word (resolve): nothing can see it" in t["message"] for t in closed["outcome"]["timeline"])
    again = ops.cli("incidents", "resolve", wid)
    assert again.returncode == 2 and "closed" in again.stderr


async def test_abort_report_and_errors(ops: Ops, tmp_path: Path) -> None:
    wid = ops.post("rack-9", "gpu-1", 48, "XID 48: double bit ECC error")
    await ops.wait_phase(wid, "AwaitingApproval")
    no_reason = ops.cli("incidents", "abort", wid, "--reason", " ")
    assert no_reason.returncode == 1 and "a reason is required" in no_reason.stderr
    aborted = ops.cli("incidents", "abort", wid, "--reason", "device pulled for failure analysis", "--by", "erin")
    assert aborted.returncode == 0, aborted.stderr
    closed = await ops.wait_phase(wid, "Closed")
    assert closed["outcome"]["outcome"] == "aborted"
    assert closed["outcome"]["explanation"] == "aborted by erin: device pulled for failure analysis"

    listed = json.loads(ops.cli("incidents", "list", "--node", "rack-9", "-o", "json").stdout)
    assert {"device/gpu.nvidia.com/rack-9/gpu-1"} <= {r["id"] for r in listed}
    row = next(r for r in listed if r["id"] == wid)
    assert row["status"] == "Completed" and row["attributes"]["PodmedicOutcome"] == "aborted"
    assert "PodmedicAwaitingApproval" not in row["attributes"]  # unset once the gate was settled

    out = tmp_path / "report.json"
    rep = ops.cli("report", wid, "-o", "json", "--file", str(out))
    assert rep.returncode == 0, rep.stderr
    assert rep.stdout == "" and f"wrote {out}" in rep.stderr  # information never lands on standard output
    report = json.loads(out.read_text())
    assert report["failure"]["code"] == 48 and report["failure"]["health"] == "Unhealthy"
    assert report["outcome"]["outcome"] == "aborted"
    kinds = {(a["kind"], a["name"]) for a in report["actions"]}
    assert ("activity", "discover_device") in kinds and ("update", "abort") in kinds
    assert all(a["finished_at"] is None or a["finished_at"] >= a["at"] for a in report["actions"])
    md = ops.cli("report", wid)
    assert md.returncode == 0
    assert yaml.safe_load(ops.cli("report", wid, "-o", "yaml").stdout) == report
    for section in ("# Incident report", "## Device health at the time of failure", "## Actions",
                    "## Operator decisions", "**taint** aborted by erin"):
        assert section in md.stdout

    missing = ops.cli("incidents", "show", "device/gpu.nvidia.com/rack-9/nope")
    assert missing.returncode == 2 and "no incident" in missing.stderr
    nostack = ops.cli("incidents", "list", stack=tmp_path)
    assert nostack.returncode == 2 and "endpoints.json" in nostack.stderr
