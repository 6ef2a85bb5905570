"""How operators steer an incident: updates with validators, the signals kept for older
callers, and the ``get_state`` query.

A validator runs before the update is written to history: a rejected update leaves no
trace in the incident and the caller gets the reason (``WorkflowUpdateFailedError``).
Accepted updates record who did what on the timeline and in ``decisions``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from podmedic.domain import workflow_names as names
    from podmedic.domain.incident import (
        STEPS,
        AbortRequest,
        ApprovalRequest,
        IncidentState,
        OperatorAnswer,
        Phase,
        Resolution,
        SkipRequest,
    )
    from podmedic.domain.policy import DriverPolicy
    from workflows import operator_checks
    from workflows.operator_checks import decision, require_actor, require_pending, require_unresolved, with_note


@dataclass
class OperatorRequests:
    """What operators (and vendors) asked of the incident, and the steps they may still skip."""

    abort_request: AbortRequest | None = None
    resolution: Resolution | None = None
    resolved_by_operator: bool = False
    """The resolution came from a person (the ``resolve`` update), not a vendor's signal: where nothing can see
    the device, it stands in for verification."""
    approved: set[str] = field(default_factory=set)
    """Steps whose gate was settled: not asked again in the incident."""
    running: str | None = None
    """The operator-visible step running now: it can no longer be skipped, only aborted."""
    done: set[str] = field(default_factory=set)
    """Steps that ran to their end."""


class OperatorHandlers:
    """Mixed into the incident workflow: every handler an operator (or vendor) calls."""

    state: IncidentState
    policy: DriverPolicy
    operator: OperatorRequests

    def note(self, step: str, message: str) -> None:
        """Add a line to the timeline (the workflow class provides it)."""
        raise NotImplementedError

    def refresh_details(self) -> None:
        """Rewrite the current details (the workflow class provides it)."""
        raise NotImplementedError

    def stop_work(self) -> None:
        """Cancel the incident's work where it waits (the workflow class provides it)."""
        raise NotImplementedError

    def _answer(self, accepted: str) -> OperatorAnswer:
        self.note("operator", accepted)
        self.refresh_details()
        return OperatorAnswer(incident_id=self.state.incident_id, accepted=accepted, phase=self.state.phase)

    def _decide(self, step: str, what: str, by: str, note: str) -> None:
        self.state.decisions.append(decision(step, what, by, note))

    def _open(self) -> None:
        if self.state.phase is Phase.CLOSED:
            raise ValueError(f"incident {self.state.incident_id} is closed")

    # -- approve -------------------------------------------------------------------------
    @workflow.update
    def approve(self, request: ApprovalRequest) -> OperatorAnswer:
        """Approve the step the incident waits on."""
        return self._answer(operator_checks.approve(self.state, request))

    @approve.validator
    def _validate_approve(self, request: ApprovalRequest) -> None:
        self._open()
        require_actor(request.by)
        require_pending(self.state.pending_approval, request.step, phase=self.state.phase.value,
                        subject="the incident")

    # -- skip ----------------------------------------------------------------------------
    @workflow.update
    def skip(self, request: SkipRequest) -> OperatorAnswer:
        """Do not take a step: the one waiting for approval, or one still ahead."""
        reason = request.reason or "no reason given"
        self.state.skip[request.step] = f"{reason} ({request.by})"
        self._decide(request.step, "skipped", request.by, reason)
        if self.state.pending_approval is not None and self.state.pending_approval.step == request.step:
            self.state.pending_approval = None
        return self._answer(f"{request.step} will be skipped ({request.by}: {reason})")

    @skip.validator
    def _validate_skip(self, request: SkipRequest) -> None:
        self._open()
        require_actor(request.by)
        if request.step not in STEPS:
            raise ValueError(f"unknown step {request.step!r}; steps: {', '.join(STEPS)}")
        if request.step in self.state.skip:
            raise ValueError(f"{request.step} is already skipped")
        if request.step == self.operator.running:
            raise ValueError(f"{request.step} is running now; abort the incident to stop it")
        if request.step in self.operator.done:
            raise ValueError(f"{request.step} already ran")

    # -- abort ---------------------------------------------------------------------------
    @workflow.update
    def abort(self, request: AbortRequest) -> OperatorAnswer:
        """Stop the incident now, at whatever it waits on (a step in flight is abandoned); what was done
        stays done and is recorded."""
        self._stop(request)
        return self._answer(f"abort requested by {request.by}: {request.reason}; "
                            "the incident stops where it is")

    @abort.validator
    def _validate_abort(self, request: AbortRequest) -> None:
        if self.operator.abort_request is not None:
            earlier = self.operator.abort_request
            raise ValueError(f"already aborted by {earlier.by}: {earlier.reason}")
        self._open()
        require_actor(request.by)
        if not request.reason.strip():
            raise ValueError("a reason is required to abort")

    def _stop(self, request: AbortRequest) -> None:
        self.operator.abort_request = request
        step = self.state.pending_approval.step if self.state.pending_approval else "incident"
        self._decide(step, "aborted", request.by, request.reason)
        self.stop_work()

    # -- resolve -------------------------------------------------------------------------
    @workflow.update(name=names.RESOLVE)
    def resolve_update(self, resolution: Resolution) -> OperatorAnswer:
        """The device was repaired or replaced: the incident untaints and closes when it gets there.

        A person's word: where nothing can see the device to verify it, it stands in for verification."""
        self._resolved(resolution)
        self.operator.resolved_by_operator = True
        return self._answer(with_note(f"resolved by {resolution.by}", resolution.note))

    @resolve_update.validator
    def _validate_resolve(self, resolution: Resolution) -> None:
        self._open()
        require_actor(resolution.by)
        require_unresolved(self.operator.resolution)

    def _resolved(self, resolution: Resolution) -> None:
        self.operator.resolution = resolution
        self._decide("resolve", "resolved", resolution.by, resolution.note)

    @workflow.signal(name=names.RESOLVE)
    def resolve(self, resolution: Resolution) -> None:
        """Signal form of ``resolve`` (vendor callbacks), without validation."""
        if self.operator.resolution is None:
            self._resolved(resolution)
            self.note("resolve", f"resolved by {resolution.by}: {resolution.note}")

    # -- read ----------------------------------------------------------------------------
    @workflow.query
    def get_state(self) -> IncidentState:
        """The incident as it is now: phase, pods, decisions, pending approval and timeline."""
        return self.state
