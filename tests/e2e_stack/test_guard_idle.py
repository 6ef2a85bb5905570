"""``podmedic guard status`` on a quiet fleet: before any incident asked the fleet guard there is no guard
workflow, and the command prints the configured limits and an idle state and exits 0 (text and ``-o json``),
as ``kubectl get`` prints an empty list; ``resume`` still says no guard runs (exit 2).

The limits come from the policy in force: the embedded default's ``guard`` section, or ``--policy``'s.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from podmedic.domain.policy_file import load_policy

PODMEDIC = [sys.executable, "-m", "workers.cli.main"]


def _guard(address: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PODMEDIC, "guard", *args, "--temporal-address", address], capture_output=True,
                          text=True, timeout=120)


def test_status_of_a_quiet_fleet_is_idle_with_the_configured_limits(bare_server: str, tmp_path: Path) -> None:
    shipped = load_policy(None).guard
    assert shipped is not None
    text = _guard(bare_server, "status")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0] == "fleet guard: IDLE", lines
    assert lines[1].startswith(f"devices under remediation: 0/{shipped.max_devices_tainted}"), lines
    assert any("no incident has asked the fleet guard in namespace default yet" in line for line in lines), lines

    policy = tmp_path / "policy.yaml"
    policy.write_text("guard: {max_devices_tainted: 7}\ndrivers: {default: {}}\n")
    as_json = _guard(bare_server, "status", "-o", "json", "--policy", str(policy))
    assert as_json.returncode == 0, as_json.stderr
    status = json.loads(as_json.stdout)
    assert (status["state"], status["permits"], status["policy"]["max_devices_tainted"]) == ("idle", [], 7)

    resumed = _guard(bare_server, "resume", "--by", "alice", "--reason", "test")
    assert resumed.returncode == 2 and "no fleet guard in namespace default" in resumed.stderr, resumed.stderr
