"""What the incident workflows' helper modules may see of a running incident.

The stage, gate, notice, recovery and closing helpers receive one of these protocols, not the
workflow class: they read and write the incident's record through a narrow surface, and no
helper module imports the workflow module that imports it. ``DeviceIncidentWorkflow`` and
``NodeIncidentWorkflow`` satisfy them structurally; mypy checks that wherever a workflow passes ``self``.

Mutable state is grouped by owner: ``state`` is the incident's record (what the UI and the outcome show),
``operator`` what operators asked (``device/operator_updates.py`` writes it), ``waits`` what the waits were
told and asked (``waiting/``), ``notices`` the pod notices in flight (``record/pod_notices.py``),
``placements`` the pods just placed (``device/move_off.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from temporalio import workflow
from temporalio.common import SearchAttributeKey

with workflow.unsafe.imports_passed_through():
    from podmedic.domain.incident import (
        IncidentOutcome,
        IncidentState,
        Phase,
        Resolution,
        VendorWaitCarry,
    )
    from podmedic.domain.models import DeviceHealthEvent, Health, IncidentInput, Outcome
    from podmedic.domain.node import NodeIncidentState, NodeWatchInput
    from podmedic.domain.policy import DriverPolicy
    from workflows.waiting.wait import WaitState

if TYPE_CHECKING:
    from workflows.device.move_off import Placements
    from workflows.device.operator_updates import OperatorRequests
    from workflows.record.pod_notices import PodNotices


class IncidentContext(Protocol):
    """One device incident as its helpers see it: its input, record, operator requests and steps."""

    inp: IncidentInput
    policy: DriverPolicy
    state: IncidentState
    events: list[DeviceHealthEvent]
    operator: OperatorRequests
    waits: WaitState
    notices: PodNotices
    placements: Placements
    carry: VendorWaitCarry | None
    """What the run this one continues handed over (``workflows/closing/vendor_wait_carry.py``); ``None`` in a
    first run."""

    @property
    def permanent(self) -> bool:
        """Whether the failure is one a restart will not clear (as known now)."""

    def request_id(self, purpose: str, attempt: int = 0) -> str:
        """A request id that is the same on every retry and replay of this run's step."""

    def check_abort(self) -> None:
        """End the incident if an operator asked to."""

    def enter(self, phase: Phase, step: str | None, doing: str | None = None) -> None:
        """Move to ``phase`` doing ``doing``."""

    def finished(self, step: str) -> None:
        """An operator-visible step ran to its end."""

    def refresh_details(self) -> None:
        """Rewrite the incident's current details in the Temporal UI."""

    def note(self, step: str, message: str) -> None:
        """Add a line to the timeline."""

    def upsert(self, key: SearchAttributeKey[Any], value: object | None) -> None:
        """Set (``None``: unset) a search attribute."""

    def finish(self, outcome: Outcome, explanation: str) -> IncidentOutcome:
        """Close the record with an outcome."""

    def track_pods(self) -> None:
        """Keep ``PodmedicPods`` naming every pod the incident touched."""



class ClosingContext(Protocol):
    """The closing stage as the ticket helpers see it: the incident, its policy, waits and reads."""

    wf: IncidentContext
    policy: DriverPolicy
    unverified: str
    """Why the device's taint is kept although the vendor resolved its ticket ("" while it is not)."""
    resolved_by: str
    """Who ended the vendor wait: "vendor" (its backend), the name on a resolution, or "" (the device
    reported Healthy with the ticket still open)."""
    read_healthy: bool
    """A read answered Healthy (pod status, the driver): a source that can see the device did."""

    async def sleep(self, seconds: float, summary: str, wake: Callable[[], bool] | None = None) -> None:
        """A durable timer an operator's abort, or ``wake`` turning true, cuts short."""

    async def read_health(self) -> Health:
        """The device's health as the cluster reports it now."""


class NodeContext(Protocol):
    """One node incident as its guard and quarantine helpers see it."""

    inp: NodeWatchInput
    state: NodeIncidentState
    resolution: Resolution | None
    waits: WaitState

    def skipped(self) -> bool:
        """Whether an operator skipped the node's quarantine."""

    def details(self, text: str) -> None:
        """The node incident's current details in the Temporal UI."""

    def upsert(self, phase: str, awaiting: str | None = None) -> None:
        """Mirror the phase (and a pending approval) into the search attributes."""

    def note(self, message: str, step: str = "node") -> None:
        """Add a line to the node incident's timeline."""

    def failed(self) -> list[str]:
        """Every failed device of the incident: DRA devices and device-plugin devices."""

    async def tell_devices(self) -> None:
        """Tell every device incident not yet told that its node is the incident."""
