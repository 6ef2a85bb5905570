"""The fault suite's table: printed, written as JSON, and written as ``docs/RELIABILITY.md``."""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.faults.effects import ScenarioResult

HEADERS = ("scenario", "faults injected", "incidents", "duplicated effects", "lost events", "completed", "time s")


@dataclass
class Report:
    """Every scenario's row."""

    results: list[ScenarioResult]
    quick: bool
    seconds: float
    when: str = field(default_factory=lambda: dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"))

    @property
    def ok(self) -> bool:
        """Every row has no duplicate, nothing lost and every incident completed."""
        return bool(self.results) and all(r.ok for r in self.results)

    def totals(self) -> dict[str, Any]:
        """The sums over all scenarios."""
        rs = self.results
        return {"faults_injected": sum(r.faults_injected for r in rs), "incidents": sum(r.incidents for r in rs),
                "duplicated_effects": sum(r.duplicated_effects for r in rs),
                "lost_events": sum(r.lost_events for r in rs), "completed": sum(r.completed for r in rs)}

    def rows(self) -> list[tuple[str, ...]]:
        """The table's rows, totals last."""
        rows: list[tuple[str, ...]] = [(r.scenario, str(r.faults_injected), str(r.incidents), str(r.duplicated_effects),
                 str(r.lost_events), f"{r.completed}/{r.incidents}", f"{r.seconds:.0f}") for r in self.results]
        t = self.totals()
        rows.append(("total", str(t["faults_injected"]), str(t["incidents"]), str(t["duplicated_effects"]),
                     str(t["lost_events"]), f"{t['completed']}/{t['incidents']}", f"{self.seconds:.0f}"))
        return rows

    def print_table(self) -> None:
        """The table on stdout, then each scenario's notes."""
        widths = [max(len(h), *(len(r[i]) for r in self.rows())) for i, h in enumerate(HEADERS)]
        print("  ".join(h.ljust(w) for h, w in zip(HEADERS, widths, strict=True)))
        for row in self.rows():
            print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
        for r in self.results:
            print(f"{r.scenario}: {r.fault}")
            for note in r.notes:
                print(f"  - {note}")
        print("all scenarios passed" if self.ok else "SOME SCENARIOS FAILED (see details in the JSON)")

    def _machine(self) -> str:
        return f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"

    def write_json(self, out: Path, command: str) -> None:
        """``bench/results/faults.json``."""
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"command": command, "when": self.when, "machine": self._machine(),
                                   "quick": self.quick, "seconds": self.seconds, "ok": self.ok,
                                   "totals": self.totals(), "scenarios": [r.as_json() for r in self.results]},
                                  indent=2) + "\n")

    def write_markdown(self, doc: Path, command: str) -> None:
        """``docs/RELIABILITY.md``: the table, the machine, the command and the date."""
        lines = ["# Reliability: faults survived", "",
                 f"Written by `{command}` on {self.when} ({self._machine()}); "
                 f"{'quick' if self.quick else 'full'} suite, {self.seconds:.0f} s in all. "
                 "How the figures are counted: [reliability-suite.md](reliability-suite.md).", "",
                 "| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
        lines += ["| " + " | ".join(row) + " |" for row in self.rows()]
        lines += ["", "Duplicated effects and lost events must be 0, and every incident must complete "
                      f"with its expected outcome: **{'yes' if self.ok else 'NO'}**.", ""]
        for r in self.results:
            lines.append(f"## {r.scenario}")
            lines.append("")
            lines.append(r.fault)
            lines.append("")
            lines += [f"- {note}" for note in r.notes]
            lines.append("")
        doc.parent.mkdir(parents=True, exist_ok=True)
        doc.write_text("\n".join(lines))
