"""Replay recorded incident histories against the current workflow code.

A workflow change that would make a running incident take a different path (a new activity
before an old one, a removed timer) raises a nondeterminism error here, so it fails CI before a
new worker version meets old incidents. Histories come from tests/replay/record.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from podmedic.temporal.converter import podmedic_data_converter
from workers.worker import WORKFLOWS

HISTORIES = sorted(Path(__file__).with_name("histories").glob("*.json"))


def test_histories_were_recorded() -> None:
    assert len(HISTORIES) >= 3, [h.name for h in HISTORIES]


@pytest.mark.parametrize("path", HISTORIES, ids=[h.stem for h in HISTORIES])
async def test_history_replays_on_current_code(path: Path) -> None:
    history = WorkflowHistory.from_json(f"replay-{path.stem}", path.read_text())
    result = await Replayer(workflows=WORKFLOWS, data_converter=podmedic_data_converter).replay_workflow(
        history, raise_on_replay_failure=True)
    assert result.replay_failure is None
