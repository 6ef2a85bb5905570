"""The driver policy an incident runs under: named by digest in its input, carried in its memo.

``podmedic/domain/policy_ref.py`` says why.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from podmedic.domain.policy import DriverPolicy
    from podmedic.domain.policy_ref import POLICY_MEMO, PolicyRef, packed_digest, unpack


def policy_in_force(ref: PolicyRef) -> tuple[DriverPolicy, str]:
    """The policy the input's ``ref`` names, and why it cannot be used (``""`` when it can): the memo
    missing, unreadable, or not the content the digest names. An unusable policy is replaced by the
    built-in defaults only so that the incident can close and say why; it acts on nothing."""
    try:
        packed = workflow.memo_value(POLICY_MEMO, None, type_hint=bytes)
        policy = unpack(packed) if packed is not None else None
        digest = packed_digest(packed) if packed is not None else ""
    except Exception as exc:  # a memo of another shape: said, not raised (a raise would retry the task forever)
        return _defaults(ref.driver), f"policy {ref.short}: the memo {POLICY_MEMO!r} cannot be read: {exc}"
    if policy is None:
        return _defaults(ref.driver), f"policy {ref.short}: the start carried no memo {POLICY_MEMO!r}"
    if digest != ref.digest:
        return _defaults(ref.driver), f"policy {ref.short}: the memo holds {digest}, not the digest the input names"
    return policy, ""


def _defaults(driver: str) -> DriverPolicy:
    # Built only for an unusable memo: built "just in case", every cached incident would hold a copy.
    return DriverPolicy(driver=driver)
