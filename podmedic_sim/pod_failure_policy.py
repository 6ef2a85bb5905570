"""A Job's ``podFailurePolicy`` and ``podReplacementPolicy``, as the Job controller applies them.

Source: kubernetes/kubernetes ``pkg/controller/job/pod_failure_policy.go`` (rules in order, the first
that matches decides: ``FailJob`` fails the Job at once, ``Ignore`` does not count the failure toward
``backoffLimit``, ``Count`` counts it; ``onExitCodes`` matches a container terminated with a non-zero
code that is ``In`` or ``NotIn`` the values, of ``containerName`` when set; ``onPodConditions`` matches a
condition of that type and status, ``True`` by default) and ``pkg/apis/batch/v1/defaults.go``
(``podReplacementPolicy`` is ``Failed`` when a ``podFailurePolicy`` is set, else ``TerminatingOrFailed``:
with ``Failed`` a replacement waits until the pod it replaces is gone or failed, not just Terminating).
"""

from __future__ import annotations

from podmedic.domain.base import Obj


def _exit_codes_match(rule: Obj, pod: Obj) -> str | None:
    """The first matching container's message part, if ``onExitCodes`` matches."""
    requirement = rule.get("onExitCodes")
    if not requirement:
        return None
    values, operator = set(requirement.get("values") or []), requirement.get("operator")
    name = requirement.get("containerName")
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        done = (status.get("state") or {}).get("terminated")
        if done is None or (name and status.get("name") != name):
            continue
        code = int(done.get("exitCode", 0))
        if code != 0 and ((operator == "In" and code in values) or (operator == "NotIn" and code not in values)):
            return f"Container {status.get('name')} for pod {pod['metadata'].get('namespace')}/" \
                   f"{pod['metadata']['name']} failed with exit code {code}"
    return None


def _conditions_match(rule: Obj, pod: Obj) -> str | None:
    for pattern in rule.get("onPodConditions") or []:
        for condition in (pod.get("status") or {}).get("conditions") or []:
            if condition.get("type") == pattern.get("type") and \
                    condition.get("status") == pattern.get("status", "True"):
                return f"Pod {pod['metadata'].get('namespace')}/{pod['metadata']['name']} has condition " \
                       f"{condition['type']} matching"
    return None


def failure_action(job: Obj, pod: Obj) -> tuple[str, str]:
    """What the Job's ``podFailurePolicy`` does with a failed ``pod``: ``(action, message)``; ``Count``
    without a policy or a matching rule."""
    for index, rule in enumerate((job.get("spec", {}).get("podFailurePolicy") or {}).get("rules") or []):
        matched = _exit_codes_match(rule, pod) or _conditions_match(rule, pod)
        if matched:
            action = str(rule.get("action", "Count"))
            return action, f"{matched} {action} rule at index {index}"
    return "Count", ""


def replaces_terminating(job: Obj) -> bool:
    """Whether a Terminating pod is replaced at once (``podReplacementPolicy: TerminatingOrFailed``)."""
    spec = job.get("spec", {})
    policy = spec.get("podReplacementPolicy") or ("Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed")
    return bool(policy == "TerminatingOrFailed")
