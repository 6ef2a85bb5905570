"""Apply one mutant to a copy of the tree and run its tests there."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.mutants.catalog import Mutant

ROOT = Path(__file__).resolve().parents[2]

KILLED, SURVIVED, BROKEN = "killed", "survived", "broken"
"""A mutant is killed when a test fails on it; it survived when its tests pass; anything else (an error
in set-up, nothing collected, a timeout) means the check itself is broken and proves nothing."""


class CatalogError(ValueError):
    """A mutant that no longer fits the code: its text is not there exactly once."""


@dataclass(frozen=True)
class Outcome:
    """What running one mutant's tests found."""

    name: str
    verdict: str
    seconds: float
    tail: str
    failed: tuple[str, ...] = ()

    def as_json(self) -> dict[str, object]:
        return {"mutant": self.name, "verdict": self.verdict, "seconds": round(self.seconds, 1),
                "failed": list(self.failed), "tail": self.tail}


def mutated(mutant: Mutant, root: Path = ROOT) -> str:
    """The mutant's file with the bug in place; ``CatalogError`` when its text is not there once."""
    text = (root / mutant.path).read_text()
    found = text.count(mutant.old)
    if found != 1:
        raise CatalogError(f"{mutant.name}: {mutant.path} has its text {found} times, not once; "
                           "update tests/mutants/safety.py or goodput.py (its entry) to the code as it is")
    if mutant.old == mutant.new:
        raise CatalogError(f"{mutant.name}: the replacement changes nothing")
    return text.replace(mutant.old, mutant.new)


def tracked_files(root: Path = ROOT) -> list[str]:
    """The tree as git sees it (tracked and new files, nothing ignored): what a clean checkout has."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, check=True,
                            capture_output=True).stdout.decode()
    return [name for name in listed.split("\0") if name and (root / name).is_file()]


def copy_tree(into: Path, root: Path = ROOT) -> None:
    for name in tracked_files(root):
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target)


def _pytest(tree: Path, tests: tuple[str, ...], timeout_s: float) -> subprocess.CompletedProcess[str] | str:
    """The tests run in ``tree`` by this interpreter (the project's venv: the copy's working directory comes
    first on ``sys.path``, so its packages, not the installed ones, are imported); the text of a timeout."""
    command = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", "not slow", *tests]
    try:
        return subprocess.run(command, cwd=tree, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        return f"timed out after {timeout_s:g}s\n{_tail(out)}"


def run_mutant(mutant: Mutant, timeout_s: float, root: Path = ROOT) -> Outcome:
    """Run ``mutant.tests`` on a copy of ``root``: first as it is, where they must pass (else the copy
    cannot judge anything: a missing tool, a broken fixture), then with the bug in place."""
    broken = mutated(mutant, root)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"mutant-{mutant.name}-") as tmp:
        tree = Path(tmp)
        copy_tree(tree, root)
        clean = _pytest(tree, mutant.tests, timeout_s)
        if isinstance(clean, str) or clean.returncode != 0:
            text = clean if isinstance(clean, str) else _tail(clean.stdout + clean.stderr)
            return Outcome(mutant.name, BROKEN, time.monotonic() - started,
                           f"its tests do not pass on the copy without the bug:\n{text}")
        (tree / mutant.path).write_text(broken)
        done = _pytest(tree, mutant.tests, timeout_s)
    if isinstance(done, str):
        return Outcome(mutant.name, BROKEN, time.monotonic() - started, done)
    failed = tuple(line.removeprefix("FAILED ")[:300] for line in done.stdout.splitlines()
                   if line.startswith("FAILED "))
    # The failed assertion itself, so a verdict shows the bug was caught for the right reason.
    why = [line[:300] for line in done.stdout.splitlines() if line.startswith("E ")][:8]
    # Exit 1 with no FAILED line is an error in set-up (a fixture, a collection): no test judged the bug.
    verdict = SURVIVED if done.returncode == 0 else KILLED if done.returncode == 1 and failed else BROKEN
    tail = "\n".join(why) if verdict == KILLED and why else _tail(done.stdout + done.stderr)
    return Outcome(mutant.name, verdict, time.monotonic() - started, tail, failed)


def _tail(text: str, lines: int = 12) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])
