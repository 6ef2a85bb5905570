"""``kubectl create``/``apply``/``explain`` as against a cluster: OpenAPI v3 and server-side field validation.

kubectl reads ``/openapi/v3`` and the group-version's document; when the kind's PATCH operation
lists the ``fieldValidation`` parameter it leaves validation to the server and sends
``fieldValidation=Strict`` (k8s.io/cli-runtime ``resource/query_param_verifier_v3.go``;
k8s.io/kubectl ``cmd/util/factory_client_access.go`` ``Validator``). The server answers an unknown
field as KEP-2885 says: Strict is 400 ``strict decoding error: unknown field "..."``, Warn drops it
with a ``Warning`` header that kubectl prints. ``kubectl explain`` renders the kind's schema from the
same document (k8s.io/kubectl ``pkg/explain/v2``); the DeviceTaintRule's fields are those of
kubernetes/api ``resource/v1/types.go``.
"""

from __future__ import annotations

import base64
import json

from tests.fidelity.conftest import Kubectl

POD = """apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  containers: [{{name: c, image: registry.local/app:1{extra}}}]
  nodeName: ghost-node
"""


def test_create_and_apply_validate_on_the_server(ns: str, kubectl: Kubectl) -> None:
    created = kubectl("create", "-n", ns, "-f", "-", stdin=POD.format(name="declared", extra=""))
    assert created.returncode == 0 and "pod/declared created" in created.stdout, created.stderr
    applied = kubectl("apply", "-n", ns, "-f", "-", stdin=POD.format(name="applied", extra=""))
    assert applied.returncode == 0 and "pod/applied created" in applied.stdout, applied.stderr
    again = kubectl("apply", "-n", ns, "-f", "-", stdin=POD.format(name="applied", extra=""))
    assert again.returncode == 0 and "pod/applied unchanged" in again.stdout, again.stderr


def test_an_unknown_field_is_refused_by_default_and_dropped_with_a_warning_when_asked(ns: str,
                                                                                      kubectl: Kubectl) -> None:
    manifest = POD.format(name="unknown", extra=", bogus: 1")
    refused = kubectl("create", "-n", ns, "-f", "-", stdin=manifest)
    assert refused.returncode != 0
    assert ('Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field '
            '"spec.containers[0].bogus"') in refused.stderr, refused.stderr
    warned = kubectl("create", "-n", ns, "--validate=warn", "-f", "-", stdin=manifest)
    assert warned.returncode == 0 and 'Warning: unknown field "spec.containers[0].bogus"' in warned.stderr
    stored = json.loads(kubectl("get", "pod", "unknown", "-n", ns, "-o", "json", check=True).stdout)
    assert "bogus" not in stored["spec"]["containers"][0]


def test_explain_prints_the_device_taint_rule_schema(kubectl: Kubectl) -> None:
    explained = kubectl("explain", "devicetaintrules.spec", check=True).stdout
    assert "KIND:       DeviceTaintRule" in explained and "GROUP:      resource.k8s.io" in explained
    assert "deviceSelector\t<DeviceTaintSelector>" in explained
    assert "taint\t<DeviceTaint> -required-" in explained
    effect = kubectl("explain", "devicetaintrules.spec.taint.effect", check=True).stdout
    assert "FIELD: effect <string>" in effect


def test_api_resources_name_each_resources_verbs(kubectl: Kubectl) -> None:
    lines = kubectl("api-resources", "-o", "wide", check=True).stdout.splitlines()
    rows = {line.split()[0]: line for line in lines[1:]}
    assert "create,delete,deletecollection,get,list,patch,update,watch" in rows["devicetaintrules"]
    assert "pods" in rows and "resourceslices" in rows


def test_imperative_creates_send_protobuf_and_are_read(ns: str, kubectl: Kubectl) -> None:
    """``kubectl create namespace``/``secret generic``/``configmap`` use client-go's typed clients, which
    send protobuf (``application/vnd.kubernetes.protobuf``): the objects are read field by field
    (kubernetes/api core/v1 generated.proto: Secret data 2, type 3; ConfigMap data 2), as docs/deploy.md's
    install steps need."""
    space = f"{ns}-made"
    made = kubectl("create", "namespace", space)
    assert made.returncode == 0 and f"namespace/{space} created" in made.stdout, made.stderr
    assert json.loads(kubectl("get", "namespace", space, "-o", "json", check=True).stdout)["metadata"]["name"] == space
    secret = kubectl("create", "secret", "generic", "token", "-n", ns, "--from-literal=token=s3cr\u00e9t")
    assert secret.returncode == 0, secret.stderr
    stored = json.loads(kubectl("get", "secret", "token", "-n", ns, "-o", "json", check=True).stdout)
    assert stored["type"] == "Opaque"
    assert base64.b64decode(stored["data"]["token"]).decode() == "s3cr\u00e9t"
    config = kubectl("create", "configmap", "settings", "-n", ns, "--from-literal=a=1", "--from-literal=b=two")
    assert config.returncode == 0, config.stderr
    data = json.loads(kubectl("get", "configmap", "settings", "-n", ns, "-o", "json", check=True).stdout)["data"]
    assert data == {"a": "1", "b": "two"}
    kubectl("delete", "namespace", space, check=True)


def test_a_secrets_string_data_is_folded_into_data_on_every_write(ns: str, kubectl: Kubectl) -> None:
    """``stringData`` is write-only: the API server merges it into ``data`` and never returns it, on a
    create and on an update alike (pkg/apis/core/v1/conversion.go Convert_v1_Secret_To_core_Secret)."""
    manifest = "apiVersion: v1\nkind: Secret\nmetadata: {{name: folded}}\nstringData: {{token: {value}}}\n"
    for value in ("first", "second"):
        applied = kubectl("apply", "-n", ns, "-f", "-", stdin=manifest.format(value=value))
        assert applied.returncode == 0, applied.stderr
        stored = json.loads(kubectl("get", "secret", "folded", "-n", ns, "-o", "json", check=True).stdout)
        assert "stringData" not in stored and stored["type"] == "Opaque", stored
        assert base64.b64decode(stored["data"]["token"]).decode() == value
