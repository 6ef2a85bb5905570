"""Least privilege, proven: the ClusterRoles in deploy/ grant exactly what podmedic's components
called during the end-to-end scenarios, nothing missing and nothing extra.

Nothing missing is also enforced as it happens: the end-to-end fixtures run the worker and the ingest
as their ServiceAccounts under these roles (tests/enforced.py), and the simulator authorizes every
request by RBAC (podmedic_sim/rbac.py), so a call no role grants is a 403 in the scenario itself.
This proof adds the other half (nothing extra) and the calls of modules that run as the admin.

Under ``make test`` the recorder has seen the whole suite by the time this runs (it runs last,
tests/deploy/conftest.py). Run alone, it first runs the end-to-end modules that exercise every
permission (``COVERING``) in a child pytest with the same audit directory.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
import yaml

from podmedic_sim.audit import ENV, UNSCOPED, WEBSOCKET, Access, checks, read_accesses
from tests.deploy.conftest import ROOT, kustomize

Rule = tuple[str, str, str]  # (verb, API group, resource[/subresource])

# Between them these modules make every call podmedic makes (tests/e2e_recover/test_bare_pdb.py is
# the only one deleting a pod). A module of the session is not run again.
COVERING = (
    "tests/e2e_sim/test_pipeline.py",
    "tests/e2e_recover",
    "tests/e2e_checkpoint/test_checkpoint_methods.py",
    "tests/e2e_node",
    "tests/e2e_ingest/test_cluster_sources.py",
    "tests/e2e_ingest/test_replicas.py",  # the ingest replicas' Lease
)
ROLES = {"worker": "podmedic-worker", "ingest": "podmedic-ingest", "admission": "podmedic-admission"}


def granted(rendered: str) -> dict[str, set[Rule]]:
    """Every (verb, group, resource) each podmedic ClusterRole grants, with its namespaced Role of the same
    name (the ingest's Lease); wildcards are refused outright."""
    roles: dict[str, set[Rule]] = {}
    for doc in yaml.safe_load_all(rendered):
        if not doc or doc.get("kind") not in ("ClusterRole", "Role"):
            continue
        rules: set[Rule] = set()
        for rule in doc.get("rules") or []:
            for field in ("verbs", "apiGroups", "resources"):
                assert "*" not in rule.get(field, []), f"{doc['metadata']['name']}: wildcard in {field}: {rule}"
            assert not rule.get("resourceNames") and not rule.get("nonResourceURLs"), rule
            rules |= {(v, g, r) for v in rule["verbs"] for g in rule["apiGroups"] for r in rule["resources"]}
        roles[doc["metadata"]["name"]] = roles.get(doc["metadata"]["name"], set()) | rules
    return roles


def used(accesses: Iterable[Access]) -> dict[str, set[Rule]]:
    """What each component called; exec upgrades (no User-Agent survives the WebSocket path) are the
    worker's, the only component that execs."""
    calls: dict[str, set[Rule]] = {}
    for a in accesses:
        component = "worker" if a.component == WEBSOCKET else a.component
        if component != UNSCOPED:
            calls.setdefault(component, set()).add(a.rule)
    return calls


def _session_modules(session: pytest.Session) -> set[str]:
    return {str(item.path.relative_to(ROOT)) for item in session.items}


def covering_modules() -> list[str]:
    """``COVERING`` a module each: a folder stands for every test module in it."""
    modules: list[str] = []
    for entry in COVERING:
        path = ROOT / entry
        found = sorted(path.rglob("test_*.py")) if path.is_dir() else [path]
        modules += [str(p.relative_to(ROOT)) for p in found]
    return modules


def missing_modules(ran: set[str]) -> list[str]:
    """The covering modules not in ``ran``, module by module: one module of a covering folder does not
    make the folder's calls."""
    return [m for m in covering_modules() if m not in ran]


def _run_missing(session: pytest.Session, audit: Path) -> None:
    missing = missing_modules(_session_modules(session))
    if not missing:
        return
    env = {**os.environ, ENV: str(audit)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow",
                           *missing], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, f"the covering e2e modules failed, so the record is incomplete:\n{done.stdout[-4000:]}"


def _diff(name: str, grants: set[Rule], calls: set[Rule]) -> list[str]:
    lines = [f"{name}: called but not granted: {' '.join(r)}" for r in sorted(calls - grants)]
    return lines + [f"{name}: granted but never called: {' '.join(r)}" for r in sorted(grants - calls)]


@pytest.mark.timeout(1000)  # run alone, it first runs the covering modules (up to 900 s)
def test_cluster_roles_grant_exactly_what_podmedic_calls(request: pytest.FixtureRequest) -> None:
    audit = Path(os.environ[ENV])
    _run_missing(request.session, audit)
    roles = granted(kustomize(ROOT / "deploy/kustomize/base"))
    assert set(roles) == set(ROLES.values()), roles.keys()
    calls = used(read_accesses(audit))
    assert set(calls) <= set(ROLES), f"unknown components called the API: {set(calls) - set(ROLES)}"
    problems = [line for component, role in ROLES.items()
                for line in _diff(role, roles[role], calls.get(component, set()))]
    report: dict[str, Any] = {c: sorted(" ".join(r) for r in rules) for c, rules in calls.items()}
    out = ROOT / "test-artifacts" / "rbac"
    out.mkdir(parents=True, exist_ok=True)
    (out / "observed.yaml").write_text(yaml.safe_dump(report, sort_keys=True))
    assert not problems, "\n".join(problems)


def test_a_covering_folder_is_run_module_by_module() -> None:
    # tests/e2e_recover/test_bare_pdb.py is the only module that deletes a pod (COVERING's comment): a run
    # holding another module of its folder must still run it, or the proof misses the worker's delete.
    missing = missing_modules({"tests/e2e_recover/test_in_place.py"})
    assert "tests/e2e_recover/test_bare_pdb.py" in missing and "tests/e2e_recover/test_in_place.py" not in missing
    assert all((ROOT / m).is_file() for m in missing)
    assert not missing_modules(set(covering_modules()))


def test_the_proof_fails_on_a_missing_or_extra_permission() -> None:
    roles = granted(kustomize(ROOT / "deploy/kustomize/base"))
    worker = roles["podmedic-worker"]
    called = set(worker)
    assert _diff("w", worker - {("delete", "", "pods")}, called) == ["w: called but not granted: delete  pods"]
    assert _diff("w", worker | {("delete", "", "nodes")}, called) == ["w: granted but never called: delete  nodes"]


# What the API server checks for an exec, from upstream, not from the simulator: the WebSocket upgrade is
# an HTTP GET, authorized as `get` (staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go maps
# GET to get); from 1.35 a synthetic `create` check is added for exec, attach and portforward
# (kubernetes/kubernetes#134577, KEP-4006, gate AuthorizePodWebsocketUpgradeCreatePermission, beta, on);
# SPDY is a POST, `create` (kubernetes/kubernetes#78741 describes the difference).
UPSTREAM_EXEC_CHECKS = {
    ("GET", True): {("get", "", "pods", "exec"), ("create", "", "pods", "exec")},
    ("GET", False): {("get", "", "pods", "exec")},
    ("POST", True): {("create", "", "pods", "exec")},
}


@pytest.mark.parametrize(("method", "from_1_35"), sorted(UPSTREAM_EXEC_CHECKS))
def test_the_recorder_checks_an_exec_as_the_api_server_does(method: str, from_1_35: bool) -> None:
    found = checks(method, "/api/v1/namespaces/ns/pods/p/exec", False, websocket_create=from_1_35)
    assert set(found) == UPSTREAM_EXEC_CHECKS[(method, from_1_35)]


def test_exec_upgrades_count_for_the_worker_and_test_setup_calls_for_nobody() -> None:
    accesses = [Access(WEBSOCKET, "get", "", "pods", "exec"), Access(WEBSOCKET, "create", "", "pods", "exec"),
                Access(UNSCOPED, "delete", "", "nodes"), Access("ingest", "watch", "", "pods")]
    assert used(accesses) == {"worker": {("get", "", "pods/exec"), ("create", "", "pods/exec")},
                              "ingest": {("watch", "", "pods")}}


LABELLED = re.compile(r"""component\s*=\s*["'](worker|ingest|admission)["']|for_component\(""")


def test_only_the_real_processes_speak_as_a_component() -> None:
    """A test's own gateway labelled ``worker`` or ``ingest`` would count toward the proof (and could
    satisfy its "nothing extra" half); only workers/worker/main.py and the ingest service label themselves.
    A test that needs labelled requests runs on a simulator without the recorder (``unaudited_sim``)."""
    offenders = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        if path.name != "test_rbac_proof.py" and LABELLED.search(text) and "unaudited_sim" not in text:
            offenders.append(str(path.relative_to(ROOT)))
    assert not offenders, f"test set-up speaking as a podmedic component on an audited simulator: {offenders}"
