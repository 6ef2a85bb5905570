"""The store's copies: ``json_copy`` is a deep copy of JSON values, and ``mutate`` never changes
what a reader already holds (stored objects are never changed in place)."""

from __future__ import annotations

from typing import Any

from podmedic_sim.store import Store, json_copy


def test_json_copy_is_equal_and_shares_nothing_mutable() -> None:
    original: dict[str, Any] = {"metadata": {"name": "p", "labels": {"a": "b"}},
                                "spec": {"containers": [{"name": "c", "ports": [1, 2]}]}, "n": 3, "x": None}
    copied = json_copy(original)
    assert copied == original
    copied["metadata"]["labels"]["a"] = "changed"
    copied["spec"]["containers"][0]["ports"].append(3)
    copied["spec"]["containers"].append({"name": "d"})
    assert original == {"metadata": {"name": "p", "labels": {"a": "b"}},
                        "spec": {"containers": [{"name": "c", "ports": [1, 2]}]}, "n": 3, "x": None}


def test_mutate_leaves_the_object_a_reader_holds_as_it_was() -> None:
    store = Store()
    store.create("pods", {"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": "p", "namespace": "default", "annotations": {"step": "1"}}})
    held = store.get("pods", "default", "p")
    store.mutate("pods", "default", "p", lambda pod: pod["metadata"]["annotations"].update(step="2"))
    assert held["metadata"]["annotations"] == {"step": "1"}
    assert store.get("pods", "default", "p")["metadata"]["annotations"] == {"step": "2"}
