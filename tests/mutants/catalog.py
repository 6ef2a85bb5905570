"""The mutants: one deliberate bug each, and the tests that must fail because of it.

Each mutant breaks one claim of the README's "What the tests prove" the way a real regression would
(a parser that refuses everything, a 202 sent before the event is delivered, a role that lost a verb,
a workflow change without its patch marker). ``python -m tests.mutants`` applies each to a copy of
the tree and runs its tests there: a test that still passes with the bug in place proves nothing.
The claims of the engine's safety are in ``safety.py``, those that give GPU time back in ``goodput.py``.
"""

from __future__ import annotations

from tests.mutants.goodput import GOODPUT
from tests.mutants.mutant import Mutant
from tests.mutants.safety import SAFETY

__all__ = ["MUTANTS", "Mutant"]

MUTANTS: tuple[Mutant, ...] = (*SAFETY, *GOODPUT)
