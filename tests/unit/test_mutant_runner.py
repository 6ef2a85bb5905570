"""The mutant runner judges a bug only with tests that pass without it.

A copy of the tree that cannot run its tests (a tool missing from the copy, a broken fixture) makes
every mutant fail, and such a failure proves nothing: the verdict must be "broken", not "killed".
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.mutants.catalog import Mutant
from tests.mutants.run import BROKEN, KILLED, run_mutant


def _repo(root: Path, test_body: str) -> Path:
    (root / "value.py").write_text("VALUE = 1\n")
    (root / "checks").mkdir()
    (root / "checks" / "test_value.py").write_text(f"from value import VALUE\n\n\ndef test_value() -> None:\n"
                                                   f"    {test_body}\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


BUG = Mutant("value-two", "the value is one", "value.py", "VALUE = 1", "VALUE = 2", ("checks/test_value.py",))


def test_a_test_that_fails_on_the_bug_kills_it(tmp_path: Path) -> None:
    outcome = run_mutant(BUG, 60, _repo(tmp_path, "assert VALUE == 1"))
    assert outcome.verdict == KILLED and outcome.failed


def test_a_test_that_fails_without_the_bug_proves_nothing(tmp_path: Path) -> None:
    outcome = run_mutant(BUG, 60, _repo(tmp_path, "assert VALUE == 3"))
    assert outcome.verdict == BROKEN and "without the bug" in outcome.tail
