"""Mutating admission webhooks, called over HTTPS the way the API server calls them.

Upstream: k8s.io/apiserver/pkg/admission/plugin/webhook (``mutating/dispatcher.go``,
``generic/webhook.go``, ``request/admissionreview.go``) and the admissionregistration.k8s.io/v1
and admission.k8s.io/v1 types. For every MutatingWebhookConfiguration whose rules match the
operation and resource, and whose namespaceSelector and objectSelector match, the server POSTs an
``AdmissionReview`` (``request.uid``, ``kind``, ``resource``, ``namespace``, ``operation``,
``userInfo``, ``object``, ``dryRun``) to ``clientConfig.url`` with the ``caBundle`` as the only
trusted CA, waits ``timeoutSeconds`` (default 10), and applies the response's base64 JSONPatch.
A call that fails (connection, TLS, timeout, a bad response) rejects the request with
``failurePolicy: Fail`` (the default) and is skipped with ``Ignore``. A webhook that denies
rejects the request with its status. A ``clientConfig.service`` is answered "no endpoints
available" (the simulator runs no Services), which is what a real cluster says when the
webhook's Deployment has no ready pod. Not simulated: ``matchConditions``, ``matchPolicy``
conversions, ``reinvocationPolicy``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp

from podmedic.domain.base import Obj
from podmedic_sim.admission_builtin import admit_builtin
from podmedic_sim.handlers_common import ApiError
from podmedic_sim.handlers_defaults import pod_spec_defaults
from podmedic_sim.patching import json_patch
from podmedic_sim.selectors import label_selector_object
from podmedic_sim.store import Store, StoreError

CONFIGS = "mutatingwebhookconfigurations"
POD = {"group": "", "version": "v1", "kind": "Pod"}
POD_RESOURCE = {"group": "", "version": "v1", "resource": "pods"}


@dataclass
class AdmissionLog:
    """What the simulated API server's admission did: calls made, failures ignored (the
    ``failed-open.mutation.webhook.admission.k8s.io`` audit annotations of a real server)."""

    calls: list[tuple[str, str]] = field(default_factory=list)  # (webhook, pod name)
    failed_open: list[tuple[str, str]] = field(default_factory=list)  # (webhook, error)


def _listed(values: list[str] | None, value: str) -> bool:
    return bool(values) and ("*" in (values or []) or value in (values or []))


def _rule_matches(rule: Obj, operation: str) -> bool:
    return (_listed(rule.get("operations"), operation) and _listed(rule.get("apiGroups"), "")
            and _listed(rule.get("apiVersions"), "v1") and _listed(rule.get("resources"), "pods")
            and rule.get("scope", "*") in ("*", "Namespaced"))


def matching_webhooks(store: Store, pod: Obj, namespace: str, operation: str = "CREATE") -> list[Obj]:
    """The mutating webhooks (in configuration name order, as the server sorts them) that apply."""
    ns = store.find("namespaces", None, namespace) or {"metadata": {"labels": {}}}
    found = []
    for config in sorted(store.list(CONFIGS), key=lambda c: str(c["metadata"]["name"])):
        for hook in config.get("webhooks") or []:
            if not any(_rule_matches(r, operation) for r in hook.get("rules") or []):
                continue
            if not label_selector_object(hook.get("namespaceSelector"))(ns):
                continue
            if not label_selector_object(hook.get("objectSelector"))(pod):
                continue
            found.append(hook)
    return found


def _ssl_context(hook: Obj) -> ssl.SSLContext:
    bundle = (hook.get("clientConfig") or {}).get("caBundle")
    context = ssl.create_default_context()
    if bundle:
        context = ssl.create_default_context(cadata=base64.b64decode(bundle).decode())
    return context


def _review(pod: Obj, namespace: str, dry_run: bool) -> Obj:
    return {
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": str(uuid.uuid4()), "kind": POD, "resource": POD_RESOURCE, "requestKind": POD,
                    "requestResource": POD_RESOURCE, "name": pod["metadata"].get("name", ""),
                    "namespace": namespace, "operation": "CREATE",
                    "userInfo": {"username": "system:serviceaccount:kube-system:simulated-controller"},
                    "object": pod, "oldObject": None, "dryRun": dry_run,
                    "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}},
    }


async def _call(hook: Obj, review: Obj) -> Obj:
    """POST the review; the response's ``response``, or an exception saying why not."""
    config = hook.get("clientConfig") or {}
    if not config.get("url"):
        svc = config.get("service") or {}
        raise ConnectionError(f'no endpoints available for service "{svc.get("namespace")}/{svc.get("name")}"')
    timeout = aiohttp.ClientTimeout(total=float(hook.get("timeoutSeconds") or 10))
    async with aiohttp.ClientSession(timeout=timeout) as session, \
            session.post(config["url"], json=review, ssl=_ssl_context(hook)) as answer:
        if answer.status != 200:
            raise ConnectionError(f"the server responded with HTTP {answer.status}")
        body = await answer.json(content_type=None)
    response = (body or {}).get("response") if isinstance(body, dict) else None
    if not isinstance(response, dict) or response.get("uid") != review["request"]["uid"]:
        raise ValueError("expected response.uid to match the request.uid")
    return response


async def admit_pod(store: Store, pod: Obj, namespace: str, dry_run: bool, log: AdmissionLog) -> Obj:
    """Run the matching mutating webhooks on a pod to be created; the pod as they left it."""
    for hook in matching_webhooks(store, pod, namespace):
        name = str(hook.get("name"))
        log.calls.append((name, str(pod["metadata"].get("name") or pod["metadata"].get("generateName", ""))))
        try:
            response = await _call(hook, _review(pod, namespace, dry_run))
        except (TimeoutError, aiohttp.ClientError, ConnectionError, ValueError, ssl.SSLError) as err:
            why = f"{type(err).__name__}: {err}" if not str(err) else str(err)
            if (hook.get("failurePolicy") or "Fail") == "Ignore":
                log.failed_open.append((name, why))
                continue
            raise ApiError(500, f'Internal error occurred: failed calling webhook "{name}": {why}',
                           "InternalError") from err
        if not response.get("allowed"):
            status = response.get("status") or {}
            raise ApiError(int(status.get("code") or 400),
                           f'admission webhook "{name}" denied the request: {status.get("message", "")}')
        if response.get("patch"):
            if response.get("patchType") != "JSONPatch":
                raise ApiError(500, f'Internal error occurred: webhook "{name}": unsupported patch type')
            pod = json_patch(pod, json.loads(base64.b64decode(response["patch"])))
    return pod


Create = Callable[[Obj], Obj]


class PodAdmission:
    """Pod creation by the simulated controllers, through admission as the API server does it.

    Without a matching webhook the pod is created at once (``create`` returns it); with one, the
    call runs on the event loop and ``create`` returns ``None``: the controller counts it as
    expected, as client-go controllers keep "expectations" for creations in flight.
    """

    def __init__(self, store: Store) -> None:
        self._store = store
        self.log = AdmissionLog()
        self._tasks: set[asyncio.Task[None]] = set()

    async def admit(self, pod: Obj, namespace: str, dry_run: bool) -> Obj:
        """The API handlers' hook: a pod CREATE through the webhooks."""
        return await admit_pod(self._store, pod, namespace, dry_run, self.log)

    def create(self, pod: Obj, created: Create, done: Callable[[Obj | None], None]) -> Obj | None:
        """Create ``pod`` via ``created`` (a store write) after admission; ``done`` gets the result
        (``None`` when admission refused it) when it was not immediate."""
        namespace = pod["metadata"].get("namespace", "default")
        # A controller's pod gets the API server's defaults and built-in admission as any other pod.
        if isinstance(pod.get("spec"), dict):
            pod_spec_defaults(pod["spec"])
        admit_builtin(pod)
        if not matching_webhooks(self._store, pod, namespace):
            return created(pod)

        async def run() -> None:
            try:
                admitted = await self.admit(pod, namespace, False)
            except ApiError:
                done(None)
                return
            try:
                done(created(admitted))
            except StoreError:
                done(None)

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return None

