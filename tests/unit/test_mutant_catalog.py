"""The mutant catalog fits the code as it is: each bug's text is there exactly once, and its tests exist.

Running the mutants is ``python -m tests.mutants`` (minutes each); this keeps the catalog from rotting
silently when the code it mutates changes.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.mutants.catalog import MUTANTS, Mutant
from tests.mutants.run import ROOT, CatalogError, mutated


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_each_mutant_applies_once_and_names_existing_tests(mutant: Mutant) -> None:
    changed = mutated(mutant)
    assert changed != (ROOT / mutant.path).read_text()
    for test in mutant.tests:
        assert (ROOT / test.split("::")[0]).exists(), test


def test_a_mutant_whose_text_is_gone_is_refused_with_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "f.py").write_text("x = 1\nx = 1\n")
    twice = Mutant("twice", "c", "f.py", "x = 1", "x = 2", ("t",))
    with pytest.raises(CatalogError, match=r"twice: f.py has its text 2 times, not once; update tests/mutants"):
        mutated(twice, tmp_path)
    with pytest.raises(CatalogError, match="0 times"):
        mutated(Mutant("gone", "c", "f.py", "y = 1", "y = 2", ("t",)), tmp_path)


def test_names_are_unique() -> None:
    assert len({m.name for m in MUTANTS}) == len(MUTANTS)
