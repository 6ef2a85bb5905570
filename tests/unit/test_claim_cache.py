"""ReservedClaims: a claim answers from memory only for a running pod it is reserved for."""

from __future__ import annotations

from activities.claim_cache import ReservedClaims
from podmedic.domain.base import Obj


def pod(uid: str, phase: str = "Running", ns: str = "ml") -> Obj:
    return {"metadata": {"namespace": ns, "name": "train-0", "uid": uid}, "status": {"phase": phase}}


def claim(device: str, *reserved: str) -> Obj:
    return {"metadata": {"namespace": "ml", "name": "train-0-gpu", "uid": "c1", "labels": {"big": "x" * 100}},
            "status": {"allocation": {"devices": {"results": [
                {"driver": "gpu.nvidia.com", "pool": "node-0", "device": device}]}},
                "reservedFor": [{"resource": "pods", "name": "train-0", "uid": u} for u in reserved]}}


class Api:
    """The cluster's answer, changed by the test; counts the GETs."""

    def __init__(self, answer: Obj | None) -> None:
        self.answer, self.gets, self.fresh = answer, 0, 0
        self.watched: Obj | None = None  # what a lagging watch cache answers instead, when set

    async def get(self, namespace: str, name: str, *, fresh: bool = False) -> Obj | None:
        assert (namespace, name) == ("ml", "train-0-gpu")
        self.gets += 1
        self.fresh += fresh
        return self.watched if self.watched is not None and not fresh else self.answer


def device_of(found: Obj | None) -> str:
    assert found is not None
    return str(found["status"]["allocation"]["devices"]["results"][0]["device"])


async def test_a_reserved_claim_is_read_once_for_its_running_pod() -> None:
    api = Api(claim("gpu-3", "u1"))
    claims = ReservedClaims(api.get)
    first = await claims.claim_of(pod("u1"), "train-0-gpu")
    api.answer = claim("gpu-5", "u1")  # could not happen while reserved: proves the second answer is memory's
    again = await claims.claim_of(pod("u1"), "train-0-gpu")
    assert (device_of(first), device_of(again), api.gets, claims.hits) == ("gpu-3", "gpu-3", 1, 1)
    assert again is not None and "labels" not in again["metadata"]  # only what discovery reads is kept


async def test_a_pod_recreated_under_the_same_name_reads_the_claim_again() -> None:
    api = Api(claim("gpu-3", "u1"))
    claims = ReservedClaims(api.get)
    await claims.claim_of(pod("u1"), "train-0-gpu")
    api.answer = claim("gpu-6", "u2")
    assert device_of(await claims.claim_of(pod("u2"), "train-0-gpu")) == "gpu-6"
    assert api.gets == 2 and claims.hits == 0


async def test_a_finished_pod_and_an_unreserved_claim_are_always_read() -> None:
    api = Api(claim("gpu-3", "u1"))
    claims = ReservedClaims(api.get)
    for _ in range(2):
        await claims.claim_of(pod("u1", phase="Failed"), "train-0-gpu")
    api.answer = claim("gpu-3")  # allocated, reserved for nobody: it may be deallocated at any time
    for _ in range(2):
        await claims.claim_of(pod("u1"), "train-0-gpu")  # not reserved for the running pod: read again, fresh
    assert (api.gets, api.fresh, claims.hits, len(claims)) == (6, 2, 0, 0)


async def test_a_watched_claim_behind_its_pods_reservation_is_read_fresh() -> None:
    # The worker's get_claim answers from a watch of every claim (podmedic/kube/object_cache.py), which
    # may not yet show the reservation the scheduler made for a pod the pod watch already shows running.
    api = Api(claim("gpu-6", "u2"))
    api.watched = claim("gpu-3", "u1")
    found = await ReservedClaims(api.get).claim_of(pod("u2"), "train-0-gpu")
    assert (device_of(found), api.gets, api.fresh) == ("gpu-6", 2, 1)


async def test_a_claim_gone_is_forgotten() -> None:
    api = Api(claim("gpu-3", "u1"))
    claims = ReservedClaims(api.get)
    await claims.claim_of(pod("u1", phase="Succeeded"), "train-0-gpu")
    await claims.claim_of(pod("u1"), "train-0-gpu")
    assert len(claims) == 1
    api.answer = None
    await claims.claim_of(pod("u2"), "train-0-gpu")  # another uid: read, and gone
    assert len(claims) == 0 and await claims.claim_of(pod("u1"), "train-0-gpu") is None


async def test_the_least_recently_used_claims_are_dropped_beyond_the_bound() -> None:
    api = Api(claim("gpu-3", "u1"))
    async def fetch(ns: str, name: str, *, fresh: bool = False) -> Obj | None:
        return api.answer if name.endswith("-gpu") else None

    claims = ReservedClaims(fetch, max_claims=2)
    for namespace in ("a", "b", "c"):
        await claims.claim_of(pod("u1", ns=namespace), "train-0-gpu")
    assert len(claims) == 2
    await claims.claim_of(pod("u1", ns="a"), "train-0-gpu")  # dropped first: read again
    assert claims.hits == 0 and claims.reads == 4
    await claims.claim_of(pod("u1", ns="c"), "train-0-gpu")
    assert claims.hits == 1
