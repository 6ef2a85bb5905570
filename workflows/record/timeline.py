"""The record of an incident kept as plain lines (the stall and maintenance incidents'), shown as it grows.

``PlainTimeline`` is mixed into such a workflow: its lines, the ``get_timeline`` query, and ``_note``.

Each line starts with the workflow time; the last twelve are the run's current details, which the Temporal UI
shows on the workflow's page.
"""

from __future__ import annotations

from temporalio import workflow

SHOWN = 12


def note(timeline: list[str], line: str) -> None:
    """Add ``line`` to ``timeline`` at the workflow's time and show the latest lines in the Temporal UI."""
    timeline.append(f"{workflow.now():%H:%M:%S} {line}")
    workflow.set_current_details("\n".join(f"- {t}" for t in timeline[-SHOWN:]))


class PlainTimeline:
    """Mixed into a workflow whose record is plain lines (it sets ``timeline`` in its ``__init__``)."""

    timeline: list[str]

    @workflow.query
    def get_timeline(self) -> list[str]:
        """What the incident did so far, one line each."""
        return list(self.timeline)

    def _note(self, line: str) -> None:
        note(self.timeline, line)
