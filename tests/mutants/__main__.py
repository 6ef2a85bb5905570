"""``python -m tests.mutants``: prove the tests behind the README's claims can fail.

Each mutant of ``tests/mutants/catalog.py`` (``safety.py``, ``goodput.py``) puts one deliberate bug in a
copy of the tree and runs the tests that must catch it. Exit status 0 only when every mutant was killed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path

from tests.mutants.catalog import MUTANTS
from tests.mutants.run import KILLED, CatalogError, Outcome, run_mutant


def _parser() -> argparse.ArgumentParser:
    names = ", ".join(m.name for m in MUTANTS)
    parser = argparse.ArgumentParser(
        prog="python -m tests.mutants", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  python -m tests.mutants --list\n  python -m tests.mutants rbac-exec-create-only\n"
               "  python -m tests.mutants --json bench/results/mutants.json")
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"mutants to run (default: all): {names}")
    parser.add_argument("--list", action="store_true", help="list the mutants, the claim each breaks, its tests")
    parser.add_argument("--timeout", type=float, default=1200.0, metavar="S",
                        help="seconds one mutant's tests may take (default 1200)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the verdicts to FILE")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    known = {m.name: m for m in MUTANTS}
    unknown = [n for n in args.names if n not in known]
    if unknown:
        print(f"error: unknown mutant(s) {', '.join(unknown)}; valid: {', '.join(known)}", file=sys.stderr)
        return 2
    chosen = [known[n] for n in args.names] or list(MUTANTS)
    if args.list:
        for m in chosen:
            print(f"{m.name}\n  breaks: {m.claim}\n  in:     {m.path}\n  caught by: {' '.join(m.tests)}")
        return 0
    outcomes: list[Outcome] = []
    for i, mutant in enumerate(chosen, 1):
        print(f"[{i}/{len(chosen)}] {mutant.name}: {mutant.claim} ...", flush=True)
        try:
            outcome = run_mutant(mutant, args.timeout)
        except CatalogError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        outcomes.append(outcome)
        print(f"    {outcome.verdict} in {outcome.seconds:.0f}s", flush=True)
        for failure in outcome.failed:
            print(f"    caught by {failure}", flush=True)
        if outcome.verdict != KILLED:
            print("    " + outcome.tail.replace("\n", "\n    "), flush=True)
    killed = sum(o.verdict == KILLED for o in outcomes)
    print(f"{killed} of {len(outcomes)} mutants killed")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({
            "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "mutants": [o.as_json() | {"claim": known[o.name].claim, "tests": list(known[o.name].tests)}
                        for o in outcomes]}, indent=2) + "\n")
        print(f"verdicts written to {args.json}")
    return 0 if killed == len(outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
