"""The simulated API server calls mutating webhooks as the real one does.

Expected behaviour from upstream, not from the simulator: k8s.io/apiserver
pkg/admission/plugin/webhook/mutating/dispatcher.go and pkg/admission/plugin/webhook/errors
(a denial is ``admission webhook "<name>" denied the request: <message>`` with the webhook's code; a
call that fails is ``failed calling webhook "<name>": ...`` as an InternalError (500) under
``failurePolicy: Fail``, the default, and skipped under ``Ignore``), the response's ``uid`` must be
the request's, and the patch is a base64 JSONPatch (admission.k8s.io/v1 ``AdmissionResponse``).
"""

from __future__ import annotations

import base64
import http.server
import json
import ssl
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from podmedic_sim import SimCluster
from workers.admission.certs import self_signed

Answer = Callable[[dict[str, Any]], dict[str, Any]]


class _Webhook:
    """An HTTPS webhook on a free port whose answer a test sets."""

    def __init__(self, certs: Path) -> None:
        self.answer: Answer = lambda request: {"uid": request["uid"], "allowed": True}
        self.seen: list[dict[str, Any]] = []
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                hook.seen.append(body)
                data = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                   "response": hook.answer(body["request"])}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                return

        files = self_signed(certs, ["127.0.0.1"])
        self.ca = files.ca.read_bytes() if files.ca else b""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(files.cert), str(files.key))
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}/mutate"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def webhook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Webhook]:
    hook = _Webhook(tmp_path_factory.mktemp("webhook-tls"))
    yield hook
    hook.server.shutdown()
    hook.server.server_close()


@pytest.fixture
def apis(sim: SimCluster) -> Iterator[tuple[client.CoreV1Api, client.AdmissionregistrationV1Api]]:
    api = config.new_client_from_config(str(sim.kubeconfig_path))
    admission = client.AdmissionregistrationV1Api(api)
    yield client.CoreV1Api(api), admission
    for found in admission.list_mutating_webhook_configuration().items:
        admission.delete_mutating_webhook_configuration(found.metadata.name)
    api.close()


def _register(admission: client.AdmissionregistrationV1Api, client_config: dict[str, Any],
              policy: str | None = None, selector: dict[str, Any] | None = None) -> None:
    hook: dict[str, Any] = {"name": "pin.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                            "clientConfig": client_config, "timeoutSeconds": 2,
                            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                                       "resources": ["pods"]}]}
    if policy:
        hook["failurePolicy"] = policy
    if selector is not None:
        hook["objectSelector"] = selector
    admission.create_mutating_webhook_configuration({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": f"test-{uuid.uuid4().hex[:6]}"}, "webhooks": [hook]})


def _pod(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"containers": [{"name": "c", "image": "registry.local/x:1"}]}}


def _trusted(webhook: _Webhook) -> dict[str, Any]:
    return {"url": webhook.url, "caBundle": base64.b64encode(webhook.ca).decode()}


def test_the_patch_is_applied_and_the_review_carries_the_pod(webhook: _Webhook, apis: Any) -> None:
    core, admission = apis
    ops = [{"op": "add", "path": "/metadata/labels/pinned", "value": "yes"}]
    webhook.answer = lambda r: {"uid": r["uid"], "allowed": True, "patchType": "JSONPatch",
                                "patch": base64.b64encode(json.dumps(ops).encode()).decode()}
    _register(admission, _trusted(webhook))
    made = core.create_namespaced_pod("default", _pod("patched"))
    assert made.metadata.labels == {"pinned": "yes"}
    request = webhook.seen[-1]["request"]
    assert (request["operation"], request["namespace"], request["object"]["metadata"]["name"]) == \
        ("CREATE", "default", "patched")
    assert request["kind"] == {"group": "", "version": "v1", "kind": "Pod"} and request["dryRun"] is False


def test_a_dry_run_create_calls_the_webhook_and_stores_nothing(webhook: _Webhook, apis: Any) -> None:
    core, admission = apis
    webhook.answer = lambda r: {"uid": r["uid"], "allowed": True}
    _register(admission, _trusted(webhook))
    core.create_namespaced_pod("default", _pod("probe"), dry_run="All")
    assert webhook.seen[-1]["request"]["dryRun"] is True
    assert "probe" not in [p.metadata.name for p in core.list_namespaced_pod("default").items]


def test_a_denial_refuses_the_create_with_the_webhooks_words(webhook: _Webhook, apis: Any) -> None:
    core, admission = apis
    webhook.answer = lambda r: {"uid": r["uid"], "allowed": False, "status": {"code": 403, "message": "not here"}}
    _register(admission, _trusted(webhook))
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod("default", _pod("denied"))
    assert refused.value.status == 403
    assert 'admission webhook \\"pin.example.com\\" denied the request: not here' in refused.value.body


@pytest.mark.parametrize("broken", ["untrusted", "service", "wrong-uid"])
def test_a_failing_call_refuses_under_fail_and_is_skipped_under_ignore(
        sim: SimCluster, webhook: _Webhook, apis: Any, broken: str) -> None:
    core, admission = apis
    webhook.answer = lambda r: {"uid": "not-" + r["uid"] if broken == "wrong-uid" else r["uid"], "allowed": True}
    config_of = {"untrusted": {"url": webhook.url},  # no caBundle: the self-signed certificate is not trusted
                 "service": {"service": {"namespace": "podmedic", "name": "gone", "path": "/mutate"}},
                 "wrong-uid": _trusted(webhook)}[broken]
    _register(admission, config_of, selector={"matchLabels": {"case": broken}})
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod("default", _pod(f"fail-{broken}", {"case": broken}))
    assert refused.value.status == 500 and 'failed calling webhook \\"pin.example.com\\"' in refused.value.body
    for found in admission.list_mutating_webhook_configuration().items:
        admission.delete_mutating_webhook_configuration(found.metadata.name)
    _register(admission, config_of, "Ignore", selector={"matchLabels": {"case": broken}})
    before = len(sim.admission.log.failed_open)
    assert core.create_namespaced_pod("default", _pod(f"ignore-{broken}", {"case": broken})).metadata.name
    assert len(sim.admission.log.failed_open) == before + 1


def test_an_object_selector_that_does_not_match_calls_nothing(webhook: _Webhook, apis: Any) -> None:
    core, admission = apis
    _register(admission, {"service": {"namespace": "podmedic", "name": "gone"}},
              selector={"matchLabels": {"team": "a"}})
    assert core.create_namespaced_pod("default", _pod("unmatched", {"team": "b"})).metadata.name == "unmatched"


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"sideEffects": "Some"}, "webhooks[0].sideEffects", 'Unsupported value: "Some"'),
    ({"name": "pin"}, "webhooks[0].name", "at least three segments"),
    ({"timeoutSeconds": 31}, "webhooks[0].timeoutSeconds", "between 1 and 30 seconds"),
    ({"clientConfig": {"url": "http://127.0.0.1:1/m"}}, "webhooks[0].clientConfig.url", "'https' is the only"),
    ({"clientConfig": {}}, "webhooks[0].clientConfig", "exactly one of url or service"),
])
def test_a_configuration_v1_refuses_is_refused_at_its_field(apis: Any, change: dict[str, Any], field: str,
                                                             words: str) -> None:
    _, admission = apis
    hook = {"name": "pin.example.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "clientConfig": {"url": "https://127.0.0.1:1/m"}, **change}
    with pytest.raises(ApiException) as refused:
        admission.create_mutating_webhook_configuration({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "invalid"}, "webhooks": [hook]})
    assert refused.value.status == 422
    causes = json.loads(refused.value.body)["details"]["causes"]
    assert any(c["field"] == field and words in c["message"] for c in causes), causes
