"""Placement holds and the webhook's answer, one function at a time.

Expected shapes from upstream, not from the code under test: ``NodeSelector`` in k8s.io/api
core/v1 types.go ("A list of node selector terms. The terms are ORed." / a term's "requirements ...
are ANDed"), ``PreferredSchedulingTerm`` (a ``weight`` of 1-100 and a ``preference`` term; a node
field selector takes ``In``/``NotIn`` with exactly one value, pkg/apis/core/validation), the labels
JobSet puts on its pods (``jobset.sigs.k8s.io/jobset-name``, sigs.k8s.io/jobset api/jobset/v1alpha2)
and LeaderWorkerSet on a group's pods (``leaderworkerset.sigs.k8s.io/name`` and ``group-index``),
RFC 6902 for the patch (``~1`` escapes ``/`` in a key), and admission.k8s.io/v1
``AdmissionReview`` (``response.uid`` = ``request.uid``, ``patchType: JSONPatch``, base64 patch).
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from podmedic.domain.placement_holds import (
    KEPT_OFF_BY,
    KEPT_OFF_NODE,
    PINNED_BY,
    PINNED_NODE,
    Hold,
    fellow_rank_hold,
    group_of,
    hold_key,
    identity_of,
    keep_off_patch,
    matching_hold,
    parse_holds,
    pin_patch,
)
from podmedic_sim.patching import json_patch
from workers.admission.review import BadReview, ReviewStats, review

NOW = 1_000_000.0


def _hold(**changes: Any) -> Hold:
    base = {"namespace": "ml", "labels": {"statefulset.kubernetes.io/pod-name": "web-1"}, "node": "node-7",
            "incident_id": "device/gpu/node-7/gpu-0", "expires_at": NOW + 60}
    return Hold.model_validate({**base, **changes})


def _pod(labels: dict[str, str], affinity: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "i"}]}
    if affinity is not None:
        spec["affinity"] = affinity
    return {"metadata": {"name": "web-1", "labels": labels}, "spec": spec}


def test_a_pod_keeps_its_own_node_terms_and_gains_the_node_in_each() -> None:
    own = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100"]}]},
        {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h200"]}]}]}}}
    pod = _pod({"statefulset.kubernetes.io/pod-name": "web-1"}, own)
    patched = json_patch(pod, pin_patch(pod, _hold()))
    terms = patched["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"]
    # ORed terms: the node must be required in every one of them, or the other term would let the pod go elsewhere.
    assert [t["matchExpressions"][0]["values"] for t in terms] == [["h100"], ["h200"]]
    assert all(t["matchFields"] == [{"key": "metadata.name", "operator": "In", "values": ["node-7"]}] for t in terms)
    assert patched["metadata"]["annotations"] == {PINNED_BY: "device/gpu/node-7/gpu-0", PINNED_NODE: "node-7"}


def test_a_pod_without_affinity_or_annotations_gets_one_term() -> None:
    pod = _pod({"statefulset.kubernetes.io/pod-name": "web-1"})
    patched = json_patch(pod, pin_patch(pod, _hold()))
    required = patched["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert required == {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["node-7"]}]}]}


def test_only_an_unexpired_hold_of_the_namespace_whose_labels_all_match_pins() -> None:
    labels = {"batch.kubernetes.io/job-name": "js-node-0", "batch.kubernetes.io/job-completion-index": "3"}
    hold = _hold(labels=labels)
    assert matching_hold(_pod({**labels, "extra": "x"}), "ml", [hold], NOW) is hold
    assert matching_hold(_pod(labels), "other", [hold], NOW) is None
    assert matching_hold(_pod({**labels, "batch.kubernetes.io/job-completion-index": "4"}), "ml", [hold], NOW) is None
    assert matching_hold(_pod(labels), "ml", [hold], NOW + 61) is None


def test_identity_is_the_labels_a_replacement_carries_again() -> None:
    pod = _pod({"statefulset.kubernetes.io/pod-name": "web-1", "controller-revision-hash": "web-abc", "app": "w"})
    assert identity_of(pod) == {"statefulset.kubernetes.io/pod-name": "web-1"}
    assert identity_of(_pod({"app": "w"})) == {}
    assert hold_key("req-1") == hold_key("req-1") != hold_key("req-2")


def test_a_bad_entry_is_named_and_the_good_ones_kept() -> None:
    holds, errors = parse_holds({"a": _hold().model_dump_json(), "b": "{not json", "c": json.dumps({"node": "n"})})
    assert [h.node for h in holds] == ["node-7"]
    assert [e.split(":")[0] for e in errors] == ["podmedic-placement-holds data[b]", "podmedic-placement-holds data[c]"]


def _review(obj: dict[str, Any], operation: str = "CREATE") -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u-1", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "namespace": "ml",
                        "operation": operation, "object": obj}}


def test_the_review_answers_with_the_request_uid_and_a_base64_json_patch() -> None:
    pod, stats = _pod({"statefulset.kubernetes.io/pod-name": "web-1"}), ReviewStats()
    answer, done = review(_review(pod), lambda ns: {"h": _hold().model_dump_json()}, NOW, stats)
    response = answer["response"]
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["kind"] == "AdmissionReview"
    assert response["uid"] == "u-1" and response["allowed"] is True and response["patchType"] == "JSONPatch"
    patched = json_patch(pod, json.loads(base64.b64decode(response["patch"])))
    assert patched["metadata"]["annotations"][PINNED_NODE] == "node-7"
    assert done == f"pinned to node node-7 for incident {_hold().incident_id}"
    assert (stats.reviewed, stats.pinned, stats.kept_off) == (1, 1, 0)


def test_unreadable_holds_admit_the_pod_unchanged_with_a_warning() -> None:
    def broken(namespace: str) -> dict[str, str]:
        raise OSError("connection refused")

    answer, done = review(_review(_pod({})), broken, NOW, ReviewStats())
    assert answer["response"]["allowed"] is True and "patch" not in answer["response"] and done is None
    assert "placement holds not read (connection refused)" in answer["response"]["warnings"][0]


@pytest.mark.parametrize(("body", "why"), [
    ([], "not a JSON object"),
    ({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}, "expected apiVersion"),
    ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}, "request.uid"),
    ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "u"}}, "request.object"),
])
def test_a_body_that_is_no_review_is_refused_saying_what_is_wrong(body: Any, why: str) -> None:
    with pytest.raises(BadReview, match=why):
        review(body, lambda ns: {}, NOW, ReviewStats())


JOBSET_RANK_0 = {"batch.kubernetes.io/job-name": "llm-node-0", "batch.kubernetes.io/job-completion-index": "0",
                 "jobset.sigs.k8s.io/jobset-name": "llm"}
JOBSET_RANK_1 = {**JOBSET_RANK_0, "batch.kubernetes.io/job-name": "llm-node-1"}


def test_a_jobset_or_leaderworkerset_rank_names_its_group_and_a_lone_pod_none() -> None:
    assert group_of(_pod(JOBSET_RANK_0)) == {"jobset.sigs.k8s.io/jobset-name": "llm"}
    lws = {"leaderworkerset.sigs.k8s.io/name": "ws", "leaderworkerset.sigs.k8s.io/group-index": "2",
           "leaderworkerset.sigs.k8s.io/worker-index": "1"}
    assert group_of(_pod(lws)) == {"leaderworkerset.sigs.k8s.io/name": "ws",
                                   "leaderworkerset.sigs.k8s.io/group-index": "2"}
    assert group_of(_pod({"batch.kubernetes.io/job-name": "train"})) == {}


def test_only_another_rank_of_the_held_group_is_kept_off() -> None:
    hold = _hold(labels={k: JOBSET_RANK_0[k] for k in ("batch.kubernetes.io/job-name",
                                                        "batch.kubernetes.io/job-completion-index")},
                 group={"jobset.sigs.k8s.io/jobset-name": "llm"})
    assert fellow_rank_hold(_pod(JOBSET_RANK_1), "ml", [hold], NOW) is hold
    assert fellow_rank_hold(_pod(JOBSET_RANK_0), "ml", [hold], NOW) is None, "the held place itself is pinned instead"
    other_jobset = {**JOBSET_RANK_1, "jobset.sigs.k8s.io/jobset-name": "other"}
    assert fellow_rank_hold(_pod(other_jobset), "ml", [hold], NOW) is None
    assert fellow_rank_hold(_pod(JOBSET_RANK_1), "ml", [hold], NOW + 61) is None
    assert fellow_rank_hold(_pod(JOBSET_RANK_1), "ml", [_hold(labels=hold.labels)], NOW) is None, "a hold with no group"


def test_a_fellow_rank_gains_a_preference_away_and_keeps_its_own_terms() -> None:
    own = {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100"]}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}}]}}
    pod = _pod(JOBSET_RANK_1, own)
    patched = json_patch(pod, keep_off_patch(pod, _hold(group={"jobset.sigs.k8s.io/jobset-name": "llm"})))
    node_affinity = patched["spec"]["affinity"]["nodeAffinity"]
    required, preferred = (own["nodeAffinity"][k] for k in ("requiredDuringSchedulingIgnoredDuringExecution",
                                                             "preferredDuringSchedulingIgnoredDuringExecution"))
    assert node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] == required, \
        "never a requirement: it may still land there"
    away = {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["node-7"]}]}
    assert node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] == [
        preferred[0], {"weight": 100, "preference": away}]
    assert patched["metadata"]["annotations"] == {KEPT_OFF_BY: "device/gpu/node-7/gpu-0", KEPT_OFF_NODE: "node-7"}


def test_the_review_keeps_a_fellow_rank_off_and_says_so() -> None:
    hold = _hold(labels={"batch.kubernetes.io/job-name": "llm-node-0"}, group={"jobset.sigs.k8s.io/jobset-name": "llm"})
    stats = ReviewStats()
    answer, done = review(_review(_pod(JOBSET_RANK_1)), lambda ns: {"h": hold.model_dump_json()}, NOW, stats)
    response = answer["response"]
    patched = json_patch(_pod(JOBSET_RANK_1), json.loads(base64.b64decode(response["patch"])))
    annotations = patched["metadata"]["annotations"]
    assert annotations[KEPT_OFF_NODE] == "node-7" and PINNED_NODE not in annotations
    assert done is not None and done.startswith("kept off node node-7 (preferred)")
    assert response["warnings"] == [f"podmedic: {done}"]
    assert (stats.pinned, stats.kept_off) == (0, 1)


def test_a_hold_written_before_groups_existed_still_reads() -> None:
    old = {"namespace": "ml", "labels": {"batch.kubernetes.io/job-name": "j"}, "node": "n", "incident_id": "i",
           "expires_at": NOW + 60}
    holds, errors = parse_holds({"hold-a": json.dumps(old)})
    assert errors == [] and holds[0].group == {}
