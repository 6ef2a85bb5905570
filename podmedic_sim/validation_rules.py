"""Semantic checks the Kubernetes JSON schemas lack: name syntax and enum fields.

Only rules the real API server enforces are here, for the fields podmedic, its tests and
the simulated workloads write; each returns ``Cause`` objects with the real field paths.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from podmedic.domain.base import Obj
from podmedic_sim.handlers_common import Cause
from podmedic_sim.validation_lease import lease_causes
from podmedic_sim.validation_webhooks import mutating_webhook_causes

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
# Kinds whose metadata.name must be a DNS label rather than a DNS subdomain.
LABEL_NAMED_KINDS = {"Namespace"}

POD_RESTART_POLICIES = ("Always", "OnFailure", "Never")
JOB_RESTART_POLICIES = ("OnFailure", "Never")
TOLERATION_OPERATORS = ("Exists", "Equal")
NODE_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
DEVICE_TAINT_EFFECTS = ("None", "NoSchedule", "NoExecute")
RESTART_RULE_ACTIONS = ("Restart", "RestartAllContainers")  # KEP-5307, KEP-5532
EXIT_CODE_OPERATORS = ("In", "NotIn")
ALLOCATION_MODES = ("ExactCount", "All")


def is_qualified_name(value: str) -> bool:
    """A label key / taint key: optional DNS-subdomain prefix and a 63-char name."""
    prefix, _, name = value.rpartition("/")
    if prefix and (len(prefix) > 253 or not DNS_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_NAME_PART.match(name))


def is_label_value(value: str) -> bool:
    """A label value: empty, or up to 63 alphanumerics with ``-_.`` inside."""
    return value == "" or (len(value) <= 63 and bool(_NAME_PART.match(value)))


def name_causes(obj: Obj, kind: str) -> list[Cause]:
    """metadata.name/namespace and label syntax, as the real server checks on every write."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return [Cause("FieldValueRequired", "Required value: metadata", "metadata")]
    causes: list[Cause] = []
    name = meta.get("name")
    if not name:
        causes.append(
            Cause(
                "FieldValueRequired",
                "Required value: name or generateName is required",
                "metadata.name",
            )
        )
    elif kind in LABEL_NAMED_KINDS:
        if len(name) > 63 or not DNS_LABEL.match(name):
            causes.append(
                Cause(
                    "FieldValueInvalid",
                    f'Invalid value: "{name}": a lowercase RFC 1123 '
                    "label must consist of lower case alphanumeric characters or '-'",
                    "metadata.name",
                )
            )
    elif len(name) > 253 or not DNS_SUBDOMAIN.match(name):
        causes.append(
            Cause(
                "FieldValueInvalid",
                f'Invalid value: "{name}": a lowercase RFC 1123 '
                "subdomain must consist of lower case alphanumeric characters, '-' or '.'",
                "metadata.name",
            )
        )
    labels = meta.get("labels") or {}
    if isinstance(labels, dict):
        for key, value in labels.items():
            if not is_qualified_name(str(key)):
                causes.append(
                    Cause(
                        "FieldValueInvalid",
                        f'Invalid value: "{key}": name part must '
                        "consist of alphanumeric characters, '-', '_' or '.'",
                        "metadata.labels",
                    )
                )
            if not isinstance(value, str) or not is_label_value(value):
                causes.append(
                    Cause(
                        "FieldValueInvalid",
                        f'Invalid value: "{value}": a valid label '
                        "must be an empty string or consist of alphanumeric characters",
                        f"metadata.labels.{key}",
                    )
                )
    return causes


def _enum(value: Any, allowed: tuple[str, ...], field: str, required: bool = False) -> list[Cause]:
    if value is None or value == "":
        if required:
            return [Cause("FieldValueRequired", "Required value", field)]
        return []
    if value not in allowed:
        quoted = ", ".join(f'"{a}"' for a in allowed)
        return [
            Cause(
                "FieldValueNotSupported",
                f'Unsupported value: "{value}": supported values: {quoted}',
                field,
            )
        ]
    return []


def _tolerations(items: Any, field: str, effects: tuple[str, ...]) -> list[Cause]:
    causes: list[Cause] = []
    for i, tol in enumerate(items or []):
        path = f"{field}[{i}]"
        causes += _enum(tol.get("operator"), TOLERATION_OPERATORS, f"{path}.operator")
        causes += _enum(tol.get("effect"), effects, f"{path}.effect")
        if tol.get("operator") == "Exists" and tol.get("value"):
            causes.append(
                Cause(
                    "FieldValueInvalid",
                    "Invalid value: value must be empty when `operator` is 'Exists'",
                    f"{path}.operator",
                )
            )
        if tol.get("key") and not is_qualified_name(tol["key"]):
            causes.append(
                Cause("FieldValueInvalid", f'Invalid value: "{tol["key"]}"', f"{path}.key")
            )
    return causes


def _containers(items: Any, field: str) -> list[Cause]:
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, ctr in enumerate(items or []):
        path = f"{field}[{i}]"
        name = ctr.get("name") or ""
        if not DNS_LABEL.match(name) or len(name) > 63:
            causes.append(Cause("FieldValueInvalid", f'Invalid value: "{name}"', f"{path}.name"))
        elif name in seen:
            causes.append(
                Cause("FieldValueDuplicate", f'Duplicate value: "{name}"', f"{path}.name")
            )
        seen.add(name)
        if not ctr.get("image") and field.endswith(".containers"):
            causes.append(Cause("FieldValueRequired", "Required value", f"{path}.image"))
        causes += _enum(ctr.get("restartPolicy"), POD_RESTART_POLICIES, f"{path}.restartPolicy")
        for j, rule in enumerate(ctr.get("restartPolicyRules") or []):
            rpath = f"{path}.restartPolicyRules[{j}]"
            causes += _enum(rule.get("action"), RESTART_RULE_ACTIONS, f"{rpath}.action", True)
            codes = rule.get("exitCodes") or {}
            causes += _enum(
                codes.get("operator"), EXIT_CODE_OPERATORS, f"{rpath}.exitCodes.operator"
            )
    return causes


def pod_spec_causes(spec: Obj, field: str, restart_policies: tuple[str, ...]) -> list[Cause]:
    """Checks of a PodSpec at ``field`` (``spec`` or ``spec.template.spec``)."""
    causes = _enum(
        spec.get("restartPolicy"),
        restart_policies,
        f"{field}.restartPolicy",
        required=restart_policies is JOB_RESTART_POLICIES,
    )
    if not spec.get("containers"):
        causes.append(Cause("FieldValueRequired", "Required value", f"{field}.containers"))
    causes += _containers(spec.get("containers"), f"{field}.containers")
    causes += _containers(spec.get("initContainers"), f"{field}.initContainers")
    causes += _tolerations(spec.get("tolerations"), f"{field}.tolerations", NODE_TAINT_EFFECTS)
    for i, claim in enumerate(spec.get("resourceClaims") or []):
        if not claim.get("name") or not DNS_LABEL.match(claim["name"]):
            causes.append(
                Cause(
                    "FieldValueInvalid",
                    "Invalid value: a DNS label is required",
                    f"{field}.resourceClaims[{i}].name",
                )
            )
    return causes


def _claim_spec_causes(spec: Obj, field: str) -> list[Cause]:
    causes: list[Cause] = []
    for i, req in enumerate((spec.get("devices") or {}).get("requests") or []):
        path = f"{field}.devices.requests[{i}]"
        exact = req.get("exactly") or {}
        causes += _enum(
            exact.get("allocationMode"), ALLOCATION_MODES, f"{path}.exactly.allocationMode"
        )
        causes += _tolerations(
            exact.get("tolerations"), f"{path}.exactly.tolerations", DEVICE_TAINT_EFFECTS
        )
        for j, sub in enumerate(req.get("firstAvailable") or []):
            causes += _tolerations(
                sub.get("tolerations"),
                f"{path}.firstAvailable[{j}].tolerations",
                DEVICE_TAINT_EFFECTS,
            )
    return causes


LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
             "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
             "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
                 "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
                 "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")


def device_selector_causes(selector: Obj, field: str) -> list[Cause]:
    """``validateDeviceTaintSelector`` (kubernetes/kubernetes pkg/apis/resource/validation/validation.go):
    the driver is a CSI driver name (a DNS subdomain of at most 63 characters), the pool one or
    more DNS subdomains joined by ``/`` (at most 253), the device a DNS label."""
    causes: list[Cause] = []
    driver, pool, device = selector.get("driver"), selector.get("pool"), selector.get("device")
    if driver is not None and (len(driver) > 63 or not DNS_SUBDOMAIN.match(str(driver).lower())):
        causes.append(Cause("FieldValueInvalid", f'Invalid value: "{driver}": {SUBDOMAIN_MSG}', f"{field}.driver"))
    if pool is not None and (not pool or len(pool) > 253 or not all(
            DNS_SUBDOMAIN.match(part) and len(part) <= 253 for part in str(pool).split("/"))):
        causes.append(Cause("FieldValueInvalid", f'Invalid value: "{pool}": {SUBDOMAIN_MSG}', f"{field}.pool"))
    if device is not None and (len(device) > 63 or not DNS_LABEL.match(str(device))):
        causes.append(Cause("FieldValueInvalid", f'Invalid value: "{device}": {LABEL_MSG}', f"{field}.device"))
    return causes


def _device_taint_rule(obj: Obj) -> list[Cause]:
    spec = obj.get("spec") or {}
    taint = spec.get("taint") or {}
    causes = device_selector_causes(spec.get("deviceSelector") or {}, "spec.deviceSelector")
    causes += _enum(taint.get("effect"), DEVICE_TAINT_EFFECTS, "spec.taint.effect", required=True)
    key = taint.get("key") or ""
    if not is_qualified_name(key):
        causes.append(
            Cause(
                "FieldValueInvalid",
                f'Invalid value: "{key}": must be a label name',
                "spec.taint.key",
            )
        )
    if not is_label_value(taint.get("value") or ""):
        causes.append(
            Cause("FieldValueInvalid", "Invalid value: must be a label value", "spec.taint.value")
        )
    return causes


def _node(obj: Obj) -> list[Cause]:
    causes: list[Cause] = []
    for i, taint in enumerate((obj.get("spec") or {}).get("taints") or []):
        causes += _enum(taint.get("effect"), NODE_TAINT_EFFECTS, f"spec.taints[{i}].effect", True)
    return causes


def _pdb(obj: Obj) -> list[Cause]:
    spec = obj.get("spec") or {}
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        return [Cause("FieldValueInvalid", "Invalid value: minAvailable and maxUnavailable cannot be both set", "spec")]
    return []


RULES: dict[str, Callable[[Obj], list[Cause]]] = {
    "Pod": lambda o: pod_spec_causes(o.get("spec") or {}, "spec", POD_RESTART_POLICIES),
    "Job": lambda o: pod_spec_causes(
        ((o.get("spec") or {}).get("template") or {}).get("spec") or {},
        "spec.template.spec",
        JOB_RESTART_POLICIES,
    ),
    "ResourceClaim": lambda o: _claim_spec_causes(o.get("spec") or {}, "spec"),
    "ResourceClaimTemplate": lambda o: _claim_spec_causes(
        (o.get("spec") or {}).get("spec") or {}, "spec.spec"
    ),
    "DeviceTaintRule": _device_taint_rule,
    "Node": _node,
    "PodDisruptionBudget": _pdb,
    "Lease": lease_causes,
    "MutatingWebhookConfiguration": mutating_webhook_causes,
}


def semantic_causes(obj: Obj, kind: str) -> list[Cause]:
    """Causes from the kind's semantic rules (run after the schema passed)."""
    rule = RULES.get(kind)
    return rule(obj) if rule else []
