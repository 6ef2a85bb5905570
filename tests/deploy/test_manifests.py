"""deploy/: the kustomize base and overlays render with ``kubectl kustomize``, validate against the
Kubernetes 1.37 strict schemas, and keep the properties the docs promise."""

from __future__ import annotations

import copy
import os
import re
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from podmedic.domain import search
from podmedic.domain.base import Obj
from podmedic.domain.policy_file import load_policy, parse_policy
from podmedic.domain.ticket_policy import ticket_variables
from podmedic.settings import PROCESSES
from podmedic.settings.base import variables
from podmedic_sim.resources import TAINT_RULE_VERSIONS
from tests.deploy.conftest import ROOT, kustomize
from workers.admission.registration import placement_webhook_configuration
from workers.cli.main import build_parser

KUSTOMIZE = ROOT / "deploy" / "kustomize"
TARGETS = ["base", "overlays/production", "overlays/kind"]


@pytest.fixture(scope="module", params=TARGETS)
def rendered(request: pytest.FixtureRequest) -> list[Obj]:
    """Every object one kustomization renders."""
    return [d for d in yaml.safe_load_all(kustomize(KUSTOMIZE / request.param)) if d]


def _workloads(objs: list[Obj]) -> list[Obj]:
    return [o for o in objs if o["kind"] in ("Deployment", "DaemonSet")]


def _find(objs: list[Obj], kind: str, name: str) -> Obj:
    return next(o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name)


def test_every_object_passes_the_strict_1_37_schema(rendered: list[Obj]) -> None:
    for obj in rendered:
        kubernetes_validate.validate(obj, "1.37", strict=True)


def test_strict_validation_refuses_an_unknown_field(rendered: list[Obj]) -> None:
    bad = copy.deepcopy(_workloads(rendered)[0])
    bad["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] = {}
    with pytest.raises(kubernetes_validate.ValidationError, match="readinessProbes"):
        kubernetes_validate.validate(bad, "1.37", strict=True)


def test_no_literal_secrets(rendered: list[Obj]) -> None:
    assert not [o for o in rendered if o["kind"] == "Secret"]


def test_pods_run_unprivileged_with_resources(rendered: list[Obj]) -> None:
    for obj in _workloads(rendered):
        pod = obj["spec"]["template"]["spec"]
        name = obj["metadata"]["name"]
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", name
        for c in pod["containers"]:
            sc = c["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True, name
            assert sc["capabilities"]["drop"] == ["ALL"], name
            assert set(c["resources"]) == {"requests", "limits"}, name


def test_worker_and_ingest_have_probes_budgets_and_network_policies(rendered: list[Obj]) -> None:
    budgets = {o["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"]
               for o in rendered if o["kind"] == "PodDisruptionBudget"}
    policed = {o["spec"]["podSelector"].get("matchLabels", {}).get("app.kubernetes.io/name")
               for o in rendered if o["kind"] == "NetworkPolicy"}
    assert any(o["kind"] == "NetworkPolicy" and o["spec"]["podSelector"] == {} for o in rendered), "default deny"
    for name in ("podmedic-worker", "podmedic-ingest"):
        container = _find(rendered, "Deployment", name)["spec"]["template"]["spec"]["containers"][0]
        assert {"startupProbe", "readinessProbe", "livenessProbe"} <= set(container), name
        assert name in budgets and name in policed, name


def test_container_args_are_podmedic_commands(rendered: list[Obj]) -> None:
    """Flags that drift from the CLI would crash-loop in the cluster; argparse catches them here."""
    parser = build_parser()
    for obj in _workloads(rendered):
        if obj["metadata"]["name"].startswith("podmedic-"):
            args = obj["spec"]["template"]["spec"]["containers"][0]["args"]
            assert parser.parse_args(args).func is not None, args


def test_policy_config_map_is_the_default_policy(rendered: list[Obj]) -> None:
    cm = next(o for o in rendered if o["kind"] == "ConfigMap" and o["metadata"]["name"].startswith("podmedic-policy"))
    shipped = (ROOT / "podmedic" / "domain" / "default_policy.yaml").read_text()
    assert cm["data"]["policy.yaml"] == shipped, "deploy/kustomize/base/policy.yaml differs: copy it again"
    assert parse_policy(cm["data"]["policy.yaml"]).drivers.keys() == load_policy(None).drivers.keys()


def test_kind_dev_server_registers_every_search_attribute() -> None:
    objs = [d for d in yaml.safe_load_all(kustomize(KUSTOMIZE / "overlays/kind")) if d]
    args = _find(objs, "Deployment", "temporal-dev")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert [a for a in args if a.startswith("--search-attribute")] == search.dev_server_flags()
    assert not [o for o in objs if o["kind"] == "DaemonSet"], "kind has no NVML: the agent stays out"


# Variables set for a reason other than podmedic's settings: the NVIDIA container runtime and Python.
NOT_PODMEDIC = {"NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", "PYTHONUNBUFFERED"}


def test_every_variable_the_manifests_set_is_read_and_valid(rendered: list[Obj]) -> None:
    """A misspelt variable would be ignored silently in the cluster; a bad value would crash-loop."""
    maps = {o["metadata"]["name"]: o.get("data", {}) for o in rendered if o["kind"] == "ConfigMap"}
    named = {v for d in load_policy(None).drivers.values() for v in ticket_variables(d.ticket)}
    for obj in (o for o in _workloads(rendered) if o["metadata"]["name"].startswith("podmedic-")):
        container = obj["spec"]["template"]["spec"]["containers"][0]
        literal = {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
        for source in container.get("envFrom", []):
            literal.update(maps[source["configMapRef"]["name"]])
        given = {e["name"] for e in container.get("env", [])} | set(literal)
        model = PROCESSES[container["args"][0]]
        reads = {v for field in model.model_fields.values() for v in variables(field)}
        everyone = {v for m in PROCESSES.values() for field in m.model_fields.values() for v in variables(field)}
        unread = given - everyone - named - NOT_PODMEDIC
        assert not unread, f"{obj['metadata']['name']}: no podmedic process reads {sorted(unread)}"
        model.load({k: v for k, v in literal.items() if k in reads})  # raises SettingsError naming the variable


def test_the_image_is_named_as_make_image_names_it(rendered: list[Obj], request: pytest.FixtureRequest) -> None:
    """Production and base: by tag and digest. kind: the name containerd gives `make image`'s archive on
    `kind load image-archive` (its io.containerd.image.name, docker.io/library/podmedic:<version>)."""
    version = (ROOT / "podmedic" / "__init__.py").read_text().split('__version__ = "')[1].split('"')[0]
    images = {c["image"] for o in _workloads(rendered) if o["metadata"]["name"].startswith("podmedic-")
              for c in o["spec"]["template"]["spec"]["containers"]}
    target = request.node.callspec.params["rendered"]
    if target == "overlays/kind":
        assert images == {f"podmedic:{version}"}
    else:
        [image] = images
        assert re.fullmatch(rf"ghcr\.io/podmedic/podmedic:{re.escape(version)}@sha256:[0-9a-f]{{64}}", image), image


def test_the_cert_manager_component_serves_its_certificate(tmp_path: Path) -> None:
    """deploy/kustomize/components/admission-cert-manager on the base: the webhook mounts the Certificate's
    Secret, leaves caBundle to cert-manager's CA injector (``cert-manager.io/inject-ca-from``, cert-manager's
    documented annotation), and its flags are the CLI's."""
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [os.path.relpath(KUSTOMIZE / "base", tmp_path)],
        "components": [os.path.relpath(KUSTOMIZE / "components/admission-cert-manager", tmp_path)]}))
    objs = [d for d in yaml.safe_load_all(kustomize(tmp_path)) if d]
    cert = _find(objs, "Certificate", "podmedic-admission")
    assert cert["metadata"]["namespace"] == "podmedic"
    assert "podmedic-admission.podmedic.svc" in cert["spec"]["dnsNames"]
    pod = _find(objs, "Deployment", "podmedic-admission")["spec"]["template"]["spec"]
    args = build_parser().parse_args(pod["containers"][0]["args"])
    assert (args.cert_dir, args.webhook_configuration) == (Path("/etc/podmedic/tls"), "")
    secret = next(v["secret"]["secretName"] for v in pod["volumes"] if v["name"] == "tls")
    assert secret == cert["spec"]["secretName"]
    hooks = _find(objs, "MutatingWebhookConfiguration", "podmedic-placement")
    assert hooks["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == "podmedic/podmedic-admission"


def test_the_placement_webhook_never_blocks_pods(rendered: list[Obj]) -> None:
    """Registered so that a webhook that is down or slow never stops a pod being created, and never sees
    podmedic's own pods or the control plane's."""
    [hook] = _find(rendered, "MutatingWebhookConfiguration", "podmedic-placement")["webhooks"]
    assert hook["failurePolicy"] == "Ignore" and hook["timeoutSeconds"] <= 5 and hook["sideEffects"] == "None"
    excluded = hook["namespaceSelector"]["matchExpressions"][0]
    assert excluded["operator"] == "NotIn" and {"podmedic", "kube-system"} <= set(excluded["values"])


def test_podmedic_up_registers_the_webhook_the_manifests_register(rendered: list[Obj]) -> None:
    """`podmedic up` (workers/stack/placement_webhook.py) and the e2e tests build the configuration with
    workers.admission.registration: the same webhook as deploy/'s, but for its client (a URL, no Service)."""
    config = _find(rendered, "MutatingWebhookConfiguration", "podmedic-placement")
    [hook] = config["webhooks"]
    built = placement_webhook_configuration(config["metadata"]["name"], hook["clientConfig"],
                                            hook["namespaceSelector"]["matchExpressions"][0]["values"])
    assert built["webhooks"] == config["webhooks"]
    assert {k: v for k, v in built.items() if k != "metadata"} == \
        {k: v for k, v in config.items() if k != "metadata"}


def test_the_kind_cluster_switches_on_what_podmedic_needs_on_each_release() -> None:
    """DRA and device taints (KEP-5055: DRADeviceTaints, and DRADeviceTaintRules for the rule API, alpha in
    1.35 and beta but off in 1.36), device health in pod status (KEP-4680: ResourceHealthStatus, off through
    1.35), and every resource.k8s.io version a supported release serves DeviceTaintRule at (v1alpha3 in
    1.35 and v1beta2 in 1.36 are off unless runtimeConfig serves them)."""
    cluster = yaml.safe_load((ROOT / "deploy" / "kind" / "cluster.yaml").read_text())
    gates = cluster["featureGates"]
    for gate in ("DynamicResourceAllocation", "DRADeviceTaints", "DRADeviceTaintRules", "ResourceHealthStatus"):
        assert gates.get(gate) is True, f"{gate} is not switched on"
    for version in TAINT_RULE_VERSIONS:
        assert cluster["runtimeConfig"].get(f"resource.k8s.io/{version}") == "true", version
