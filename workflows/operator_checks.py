"""What both incident workflows (device and node) check and record for an operator's update.

A validator raises ``ValueError`` to reject an update before it reaches history; the
caller sees the message. Deterministic: the only clock is ``workflow.now()``.
"""

from __future__ import annotations

from typing import Protocol

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from podmedic.domain.incident import ApprovalRequest, Decision, PendingApproval, Resolution


class ApprovableState(Protocol):
    """What an incident's state holds of approvals: the pending one and the decisions so far."""

    pending_approval: PendingApproval | None
    decisions: list[Decision]


def require_actor(by: str) -> None:
    """Every update names who acts: the record says who decided."""
    if not by.strip():
        raise ValueError("'by' must name who is acting")


def require_pending(pending: PendingApproval | None, step: str, *, phase: str, subject: str) -> None:
    """An approval must be for the step that ``subject`` (the incident) waits on."""
    if pending is None:
        raise ValueError(f"nothing waits for approval (phase {phase})")
    if step != pending.step:
        raise ValueError(f"{subject} waits for approval of {pending.step!r}, not {step!r}")


def require_unresolved(resolution: Resolution | None) -> None:
    """A resolution is given once."""
    if resolution is not None:
        raise ValueError(f"already resolved by {resolution.by}")


def decision(step: str, what: str, by: str, note: str) -> Decision:
    """The record of an operator's decision, stamped with workflow time."""
    return Decision(step=step, decision=what, by=by, at=workflow.now(), note=note)


def timed_out(step: str, on_timeout: str, timeout: float) -> Decision:
    """The policy's decision at an approval gate nobody answered within ``timeout`` seconds: proceed or abort."""
    what = "timed_out_proceed" if on_timeout == "proceed" else "timed_out_abort"
    return decision(step, what, "policy", f"no answer within {timeout:g}s")


def with_note(accepted: str, note: str) -> str:
    """``accepted``, followed by the operator's note when there is one."""
    return accepted + (f": {note}" if note else "")


def approve(state: ApprovableState, request: ApprovalRequest) -> str:
    """Record the approval of the pending step and clear it; returns what was accepted."""
    state.decisions.append(decision(request.step, "approved", request.by, request.note))
    state.pending_approval = None
    return with_note(f"{request.step} approved by {request.by}", request.note)
