"""MutatingWebhookConfiguration (admissionregistration.k8s.io/v1) rules the strict schema cannot express.

Upstream: kubernetes/kubernetes pkg/apis/admissionregistration/validation/validation.go
(``validateMutatingWebhook``/``validateWebhook``, v1 rules): a webhook name is a qualified domain of
at least three segments and unique in the configuration; ``admissionReviewVersions`` and
``sideEffects`` are required in v1 (``None`` or ``NoneOnDryRun`` only: so every v1 webhook can be
called on a dry run); ``failurePolicy`` Ignore|Fail; ``matchPolicy`` Exact|Equivalent;
``reinvocationPolicy`` Never|IfNeeded; ``timeoutSeconds`` from 1 to 30; ``clientConfig`` exactly one
of ``url`` (https) and ``service``.
"""

from __future__ import annotations

from podmedic.domain.base import Obj
from podmedic_sim.handlers_common import Cause

REVIEW_VERSIONS = ("v1", "v1beta1")


def _one_of(value: object, allowed: tuple[str, ...], field: str, required: bool) -> list[Cause]:
    if value in (None, ""):
        if required:
            return [Cause("FieldValueRequired", f"Required value: must specify one of {', '.join(allowed)}", field)]
        return []
    if value not in allowed:
        quoted = ", ".join(f'"{a}"' for a in allowed)
        return [Cause("FieldValueNotSupported", f'Unsupported value: "{value}": supported values: {quoted}', field)]
    return []


def _client_config(config: Obj, field: str) -> list[Cause]:
    url, service = config.get("url"), config.get("service")
    if bool(url) == bool(service):
        return [Cause("FieldValueRequired", "Required value: exactly one of url or service is required", field)]
    if url and not str(url).startswith("https://"):
        return [Cause("FieldValueInvalid", f'Invalid value: "{url}": \'https\' is the only allowed URL scheme',
                      f"{field}.url")]
    return []


def mutating_webhook_causes(obj: Obj) -> list[Cause]:
    """Causes for every webhook of the configuration that v1 refuses."""
    causes: list[Cause] = []
    seen: set[str] = set()
    for i, hook in enumerate(obj.get("webhooks") or []):
        at = f"webhooks[{i}]"
        name = str(hook.get("name") or "")
        if len(name.split(".")) < 3:
            causes.append(Cause("FieldValueInvalid", f'Invalid value: "{name}": should be a domain with at least '
                                                     "three segments separated by dots", f"{at}.name"))
        elif name in seen:
            causes.append(Cause("FieldValueDuplicate", f'Duplicate value: "{name}"', f"{at}.name"))
        seen.add(name)
        versions = hook.get("admissionReviewVersions") or []
        if not any(v in REVIEW_VERSIONS for v in versions):
            causes.append(Cause("FieldValueRequired", "Required value: must specify one of v1, v1beta1",
                                f"{at}.admissionReviewVersions"))
        causes += _one_of(hook.get("sideEffects"), ("None", "NoneOnDryRun"), f"{at}.sideEffects", True)
        causes += _one_of(hook.get("failurePolicy"), ("Ignore", "Fail"), f"{at}.failurePolicy", False)
        causes += _one_of(hook.get("matchPolicy"), ("Exact", "Equivalent"), f"{at}.matchPolicy", False)
        causes += _one_of(hook.get("reinvocationPolicy"), ("Never", "IfNeeded"), f"{at}.reinvocationPolicy", False)
        timeout = hook.get("timeoutSeconds")
        if timeout is not None and not 1 <= int(timeout) <= 30:
            causes.append(Cause("FieldValueInvalid", f"Invalid value: {timeout}: the timeout value must be between "
                                                     "1 and 30 seconds", f"{at}.timeoutSeconds"))
        causes += _client_config(hook.get("clientConfig") or {}, f"{at}.clientConfig")
    return causes
