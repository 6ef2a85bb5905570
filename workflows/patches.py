"""Which version of the incident's code a run follows: one marker for every patch at once.

Each ``workflow.patched`` call records a marker, and the SDK upserts the
``TemporalChangeVersion`` search attribute with it: one more history event and visibility write
per patch per incident: five of the seventeen upserts of a storm incident (``python -m benchmarks
storm``) were the patches'. An incident started
since a bundle records that one marker and takes every patch in it (``BUNDLES``); a run recorded
before any has no such marker, so each patch is asked on its own, exactly as the run asked when
it was recorded (``tests/replay`` replays such histories).

A new patch goes through ``Patches.patched`` like the others; it joins a bundle only as a new
bundle, put first in ``BUNDLES`` (a run recorded under an older bundle must not take it).
"""

from __future__ import annotations

from temporalio import workflow

BLAME_THE_WORKLOAD = "blame-the-workload"
"""A fault the workload caused counts toward no node correlation and no repeat-offender count
(``workflows/correlate.py``, ``workflows/repeat.py``); asked only by such incidents."""

SAME_NODE_NOT_ON_A_FAILING_NODE = "same-node-not-on-a-failing-node"
"""The ``same_node`` rung is skipped while other devices of the node failed within the correlation
window (``workflows/node_cover.py``); asked only by such incidents."""

HEALTHY_AFTER_THE_FAILURE = "healthy-after-the-failure"
"""Only a Healthy report observed after the device's latest Unhealthy one counts as healed
(``workflows/closing.py``, ``workflows/ticketing.py``); asked only when an older one is all there is."""

SEEN_HEALTHY = "untaint-only-seen-healthy"
"""A taint goes only once a source that can see the device reported it Healthy after the failure;
an Unknown reading (nothing sees it) no longer passes, and the incident asks an operator instead
(``workflows/ticketing.py``, ``workflows/unverified.py``); asked when a vendor's fix is verified."""

FOLD_STEP_NOTICES = "fold-step-notices"
"""A step whose notice can wait rides on the next notice to the same pods: one pod Event, not two
(``workflows/notices.py``)."""

FLAPPING_WAITS_FOR_THE_VENDOR = "flapping-waits-for-the-vendor"
"""A flapping device's Healthy reports do not end the vendor wait: its episode stays one run until the
vendor or an operator resolves the ticket; and an outcome says "resolved by vendor" only when the vendor
did (``workflows/ticketing.py``, ``workflows/closing.py``); asked when an incident waits for a vendor."""

VENDOR_WAIT_CONTINUES = "vendor-wait-continues-as-new"
"""A vendor wait whose history grows past ``VENDOR_WAIT_HISTORY`` events (``podmedic/domain/incident.py``)
continues as a new run (``workflows/ticketing.py``); asked only then, so no run below the limit records it."""

STOPPED_LETS_GO = "stopped-lets-go-of-its-rule"
"""An incident that stops without verifying its device (aborted, canceled, a step gave up) takes its run off
its DeviceTaintRule, never deleting it, instead of leaving it held by a closed run; the fleet guard's sweep
settles a rule left with no holder by the device's health (``workflows/closing.py``); asked only by such
incidents."""

BUNDLES: dict[str, frozenset[str]] = {
    "incident-2027-01": frozenset({
        "taint-first", "fence-local-activity", "checkpoint-live-pods", "concurrent-open", "background-notices",
        "ticket-verify-after-resolution", "fleet-guard", "coalesced-search-attributes", FOLD_STEP_NOTICES,
        "storm-turns",
    }),
    "incident-2026-12": frozenset({
        "taint-first", "fence-local-activity", "checkpoint-live-pods", "concurrent-open", "background-notices",
        "ticket-verify-after-resolution", "fleet-guard", "coalesced-search-attributes", FOLD_STEP_NOTICES,
    }),
    "incident-2026-11": frozenset({
        "taint-first", "fence-local-activity", "checkpoint-live-pods", "concurrent-open", "background-notices",
        "ticket-verify-after-resolution", "fleet-guard", "coalesced-search-attributes",
    }),
}
"""Newest first. A new run records the newest bundle's marker and takes its patches; a run recorded
under an older bundle finds that bundle's marker on replay and takes exactly its patches."""


class Patches:
    """The patches of one incident run. ``start`` is called first thing in the run."""

    def __init__(self) -> None:
        self._bundled: frozenset[str] = frozenset()

    def start(self) -> None:
        """Ask for the bundles, newest first (a new run records the newest's marker)."""
        for name, patches in BUNDLES.items():
            if workflow.patched(name):
                self._bundled = patches
                return

    def patched(self, patch_id: str) -> bool:
        """``workflow.patched(patch_id)``, answered without a marker of its own in a bundled run."""
        if patch_id in self._bundled:
            return True
        return workflow.patched(patch_id)
