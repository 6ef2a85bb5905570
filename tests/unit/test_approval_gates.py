"""Which policy gate holds a step (``Approvals.gate_holding``), as docs/operators.md "Approval gates" says:
``taint_no_execute`` holds only NoExecute taints, and the pending step is then ``taint``."""

from __future__ import annotations

from podmedic.domain.policy import Approvals, Gate


def test_a_step_is_held_by_its_own_gate_and_a_noexecute_taint_also_by_taint_no_execute() -> None:
    only_no_execute = Approvals(gates=(Gate(action="taint_no_execute"),))
    assert only_no_execute.gate_holding("taint") is None  # a NoSchedule taint is not held
    held = only_no_execute.gate_holding("taint", no_execute=True)
    assert held is not None and held.action == "taint_no_execute"
    assert only_no_execute.gate_holding("same_node", no_execute=True) is None

    both = Approvals(gates=(Gate(action="taint_no_execute"), Gate(action="taint", timeout_s=5)))
    own = both.gate_holding("taint", no_execute=True)
    assert own is not None and own.action == "taint"  # the step's own gate first
