"""Replay the recorded histories of every supported release against the current workflow code, and hold the
patch lifecycle (``workflows/patches.py``).

A workflow change that would make a running workflow of a supported release take a different path (a new
activity before an old one, a removed timer) raises a nondeterminism error here, so it fails CI before a
new worker meets the old release's workflows. Histories come from ``tests/replay/record*.py`` and live in
``tests/replay/histories/<release>/``: a supported release's histories are only ever added to, and a
release's directory leaves with the release (``test_histories_of_a_supported_release_are_never_rewritten``
enforces it from git's record).

The lifecycle is Temporal's (https://docs.temporal.io/develop/python/versioning#patching): a patch is asked
(``workflow.patched``) in the release that adds it, deprecated (``workflow.deprecate_patch``) in the next,
and gone in the one after.
"""

from __future__ import annotations

import ast
import importlib
import shutil
import subprocess
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

import podmedic
from podmedic.temporal.converter import podmedic_data_converter
from workers.worker.main import WORKFLOWS
from workflows import patches

HERE = Path(__file__).with_name("histories")
ROOT = Path(__file__).resolve().parents[2]
HISTORIES = sorted(path for release in patches.SUPPORTED for path in (HERE / release).glob("*.json"))
WORKFLOW_CODE = sorted((ROOT / "workflows").glob("*.py"))


def test_each_supported_release_has_its_histories() -> None:
    """Every supported release recorded the demo's three kinds at least (``record.py``), and the release
    this code is (``RELEASE``) is the package's version and the newest supported."""
    assert podmedic.__version__ == patches.RELEASE and patches.SUPPORTED[0] == patches.RELEASE
    assert len(patches.SUPPORTED) <= 2, "the current release and the one before, no more"
    for release in patches.SUPPORTED:
        kinds = {path.stem.split("_2")[0] for path in (HERE / release).glob("*.json")}
        assert {"device_transient_in_place", "device_permanent_ticket", "node_incident"} <= kinds, (release, kinds)


def test_no_history_outlives_its_release() -> None:
    on_file = sorted(p.name for p in HERE.iterdir() if not p.name.startswith("."))
    assert on_file == sorted(patches.SUPPORTED), (
        f"histories on file {on_file}: a release's histories leave with the release, and nothing lies outside "
        f"a release's directory (supported: {patches.SUPPORTED})")


async def _replay(path: Path) -> None:
    history = WorkflowHistory.from_json(f"replay-{path.stem}", path.read_text())
    result = await Replayer(workflows=WORKFLOWS, data_converter=podmedic_data_converter).replay_workflow(
        history, raise_on_replay_failure=True)
    assert result.replay_failure is None


@pytest.mark.parametrize("path", HISTORIES, ids=[f"{h.parent.name}/{h.stem}" for h in HISTORIES])
async def test_history_replays_on_current_code(path: Path) -> None:
    await _replay(path)


def _patch_calls(path: Path, package: str) -> list[tuple[str, str, int]]:
    """``(function, patch id, line)`` for each ``workflow.patched``/``deprecate_patch`` call in ``path``; an id
    named by a module constant is looked up in the module (imported from ``package``)."""
    tree = ast.parse(path.read_text())
    module = None
    calls: list[tuple[str, str, int]] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("patched", "deprecate_patch") and node.args):
            continue
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            calls.append((node.func.attr, arg.value, node.lineno))
            continue
        module = module or importlib.import_module(f"{package}.{path.stem}" if package else path.stem)
        names = vars(module)
        value = (names.get(arg.id) if isinstance(arg, ast.Name)
                 else getattr(names.get(arg.value.id), arg.attr, None)
                 if isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) else None)
        assert isinstance(value, str), f"{path.name}:{node.lineno}: a patch id must be a string constant"
        calls.append((node.func.attr, value, node.lineno))
    return calls


def lifecycle_problems(paths: list[Path], package: str) -> list[str]:
    """Each patch call in ``paths`` that the lifecycle does not allow, saying why."""
    previous = patches.SUPPORTED[1] if len(patches.SUPPORTED) > 1 else None
    wrong: list[str] = []
    for path in paths:
        for call, patch_id, line in _patch_calls(path, package):
            added = patches.PATCHES.get(patch_id)
            where = f"workflows/{path.name}:{line} {call}({patch_id!r})"
            if added is None:
                wrong.append(f"{where}: not in workflows/patches.py PATCHES")
            elif call == "patched" and added != patches.RELEASE:
                wrong.append(f"{where}: added in {added}; deprecate it in {patches.RELEASE} (deprecate_patch)")
            elif call == "deprecate_patch" and added != previous:
                wrong.append(f"{where}: added in {added}; a deprecated patch is removed the release after")
    return wrong


def test_every_patch_follows_the_lifecycle() -> None:
    wrong = lifecycle_problems(WORKFLOW_CODE, "workflows")
    assert not wrong, wrong


def test_the_lifecycle_check_catches_a_patch_left_too_long(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The check, against a module that asks an unlisted patch and one added a release ago and still asked."""
    module = tmp_path / "lingering_patches.py"
    module.write_text('from temporalio import workflow\n\nOLD = "old-patch"\n\n\ndef f() -> bool:\n'
                      '    return workflow.patched(OLD) or workflow.patched("unlisted")\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(patches.PATCHES, "old-patch", "0.0.9")
    wrong = lifecycle_problems([module], "")
    assert any("'old-patch'): added in 0.0.9; deprecate it" in w for w in wrong), wrong
    assert any("'unlisted'): not in workflows/patches.py PATCHES" in w for w in wrong), wrong


def test_histories_of_a_supported_release_are_never_rewritten() -> None:
    """Git's record: no commit modified, renamed or deleted a recorded history of a supported release."""
    git = shutil.which("git")
    if git is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the record of which commits touched the histories is not here")
    for release in patches.SUPPORTED:
        where = f"tests/replay/histories/{release}"
        done = subprocess.run([git, "log", "--format=%h", "--diff-filter=MDR", "--", where], cwd=ROOT,
                              capture_output=True, text=True, check=True)
        assert not done.stdout.split(), (
            f"commits {done.stdout.split()} rewrote histories of release {release}: add a new file beside the "
            "old one (tests/replay/record.py), never re-record")
        status = subprocess.run([git, "status", "--porcelain", "--", where], cwd=ROOT,
                                capture_output=True, text=True, check=True).stdout.splitlines()
        touched = [line for line in status if not line.startswith("??") and not line.startswith("A ")]
        assert not touched, f"uncommitted changes to recorded histories: {touched}"
