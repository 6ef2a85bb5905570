"""Replay recorded incident histories against the current workflow code.

A workflow change that would make a running incident take a different path (a new activity
before an old one, a removed timer) raises a nondeterminism error here, so it fails CI before a
new worker version meets old incidents. Histories come from tests/replay/record.py.

Recorded histories are only ever added, never replaced or removed: every history a landed commit
recorded must replay on current code. ``test_no_recorded_history_was_replaced`` enforces it from
git's record.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from podmedic.temporal.converter import podmedic_data_converter
from workers.worker import WORKFLOWS

HERE = Path(__file__).with_name("histories")
HISTORIES = sorted(HERE.glob("*.json"))
ROOT = Path(__file__).resolve().parents[2]

REPLACED_BY = "30d6e63"
"""The one commit that replaced recorded histories (before the rule was enforced); its predecessors,
recorded by 2c2d58b, are back beside them as ``<kind>_2c2d58b.json``."""

UNREPLAYABLE = {
    "fleet_guard_storm": "recorded by 30d6e63, which changed FleetGuard.ask (an ask no longer wakes the loop) "
                         "without a patch marker. The patch ask-wakes-only-on-trip now keeps the old behaviour "
                         "for runs without its marker, so fleet_guard_storm_2c2d58b.json (recorded before) "
                         "replays; a run of 30d6e63's code has no marker either and cannot be told apart.",
}
"""Histories that cannot replay, each with why; each must still fail exactly as said (a nondeterminism
error), so this list cannot hide a history that breaks for another reason."""


def test_histories_were_recorded() -> None:
    assert len(HISTORIES) >= 3, [h.name for h in HISTORIES]


async def _replay(path: Path) -> None:
    history = WorkflowHistory.from_json(f"replay-{path.stem}", path.read_text())
    result = await Replayer(workflows=WORKFLOWS, data_converter=podmedic_data_converter).replay_workflow(
        history, raise_on_replay_failure=True)
    assert result.replay_failure is None


@pytest.mark.parametrize("path", HISTORIES, ids=[h.stem for h in HISTORIES])
async def test_history_replays_on_current_code(path: Path) -> None:
    if path.stem in UNREPLAYABLE:
        with pytest.raises(Exception, match="TMPRL1100"):
            await _replay(path)
        return
    await _replay(path)


def test_unreplayable_histories_are_only_those_the_replacing_commit_recorded() -> None:
    for stem in UNREPLAYABLE:
        assert (HERE / f"{stem}.json").exists(), stem
        assert (HERE / f"{stem}_2c2d58b.json").exists(), f"{stem}: the history it replaced is not beside it"


def test_no_recorded_history_was_replaced() -> None:
    """Git's record: no commit but ``REPLACED_BY`` modified, renamed or deleted a recorded history."""
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the record of which commits touched the histories is not here")
    done = subprocess.run([git, "log", "--format=%h", "--abbrev=7", "--diff-filter=MDR", "--",
                           "tests/replay/histories"], cwd=ROOT, capture_output=True, text=True, check=True)
    changed = [c[:7] for c in done.stdout.split()]
    assert changed in ([REPLACED_BY], []), (
        f"commits {changed} replaced or removed recorded histories: add a new file beside the old one "
        "(docs/deploy.md, Replay test), never re-record")
    status = subprocess.run([git, "status", "--porcelain", "--", "tests/replay/histories"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.splitlines()
    touched = [line for line in status if not line.startswith("??") and not line.startswith("A ")]
    assert not touched, f"uncommitted changes to recorded histories: {touched}"
