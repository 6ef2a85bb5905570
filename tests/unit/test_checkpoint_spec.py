"""Reading a pod's checkpoint declaration: every accepted form and every refusal names its annotation."""

from __future__ import annotations

import pytest

from activities.checkpoints.spec import DEFAULT_PATH, DEFAULT_PORT, BadDeclaration, MethodSpec, parse


def test_no_method_and_each_method() -> None:
    assert parse({}, ["trainer"]) is None
    assert parse({"podmedic.io/checkpoint-method": " "}, ["trainer"]) is None
    assert parse({"podmedic.io/checkpoint-method": "annotation"}, ["t"]) == MethodSpec("annotation")
    assert parse({"podmedic.io/checkpoint-method": "none"}, ["t"]) == MethodSpec("none")
    assert parse({"podmedic.io/checkpoint-method": "http"}, ["t"]) == MethodSpec("http", DEFAULT_PORT, DEFAULT_PATH)
    assert parse({"podmedic.io/checkpoint-method": "kubelet"}, ["a", "b"]).containers == ("a", "b")  # type: ignore[union-attr]


def test_http_port_and_path() -> None:
    spec = parse({"podmedic.io/checkpoint-method": "http", "podmedic.io/checkpoint-port": "9090",
                  "podmedic.io/checkpoint-path": "/save/now"}, ["t"])
    assert spec == MethodSpec("http", 9090, "/save/now")


def test_kubelet_containers_subset() -> None:
    notes = {"podmedic.io/checkpoint-method": "kubelet", "podmedic.io/checkpoint-containers": "b"}
    assert parse(notes, ["a", "b"]) == MethodSpec("kubelet", containers=("b",))


@pytest.mark.parametrize(("notes", "annotation", "words"), [
    ({"podmedic.io/checkpoint-method": "criu"}, "podmedic.io/checkpoint-method",
     "unknown method 'criu' (valid: annotation, http, kubelet, none)"),
    ({"podmedic.io/checkpoint-method": "http", "podmedic.io/checkpoint-port": "http"},
     "podmedic.io/checkpoint-port", "'http' is not a port number"),
    ({"podmedic.io/checkpoint-method": "http", "podmedic.io/checkpoint-port": "70000"},
     "podmedic.io/checkpoint-port", "not a port number (1-65535)"),
    ({"podmedic.io/checkpoint-method": "http", "podmedic.io/checkpoint-path": "save"},
     "podmedic.io/checkpoint-path", "not an absolute URL path"),
    ({"podmedic.io/checkpoint-method": "http", "podmedic.io/checkpoint-path": "/a/../b"},
     "podmedic.io/checkpoint-path", "without '..'"),
    ({"podmedic.io/checkpoint-method": "http", "podmedic.io/checkpoint-path": "/a?x=1"},
     "podmedic.io/checkpoint-path", "query"),
    ({"podmedic.io/checkpoint-method": "kubelet", "podmedic.io/checkpoint-containers": "ghost"},
     "podmedic.io/checkpoint-containers", "container 'ghost' is not in the pod (it has a)"),
    ({"podmedic.io/checkpoint-method": "kubelet", "podmedic.io/checkpoint-containers": "Bad_Name"},
     "podmedic.io/checkpoint-containers", "'Bad_Name' is not a container name"),
])
def test_refusals_name_the_annotation_and_reason(notes: dict[str, str], annotation: str, words: str) -> None:
    with pytest.raises(BadDeclaration) as err:
        parse(notes, ["a"])
    assert err.value.annotation == annotation
    assert words in str(err.value) and str(err.value).startswith(annotation + ": ")


def test_kubelet_needs_containers() -> None:
    with pytest.raises(BadDeclaration, match="no containers"):
        parse({"podmedic.io/checkpoint-method": "kubelet"}, [])
