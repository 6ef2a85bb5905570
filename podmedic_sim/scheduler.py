"""The simulated kube-scheduler: filters, scores, allocates DRA devices and binds pods.

Pending pods are queued by a store listener and scheduled in coalesced passes. Pods that
fit nowhere wait in an unschedulable set until the cluster changes (a node, slice, claim,
taint rule or pod deletion), like kube-scheduler's unschedulable queue.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from podmedic.domain.base import Obj
from podmedic_sim.affinity import matches_node, node_ready, pinned_nodes, preferred_score, untolerated_node_taint
from podmedic_sim.allocator import DeviceAllocator, claim_node
from podmedic_sim.devices import DevKey
from podmedic_sim.parts import SimParts, set_pod_condition
from podmedic_sim.store import NotFound, WatchEvent
from podmedic_sim.timers import Coalescer

PodKey = tuple[str, str]
_BATCH = 500  # pods per pass, so HTTP handlers get the loop between passes
_MIN_FEASIBLE = 20  # like percentageOfNodesToScore: stop searching after this many fits
_CLAIMS_MSG = "cannot allocate all claims"
_AFFINITY_MSG = "didn't match Pod's node affinity/selector"


@dataclass
class _Fit:
    node: str
    score: float
    index: int
    allocations: list[tuple[Obj, list[dict[str, str]]]]


def pod_images(pod: Obj) -> list[str]:
    """Images of the pod's init and regular containers."""
    spec = pod.get("spec", {})
    return [
        c["image"]
        for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])
        if c.get("image")
    ]


class Scheduler:
    """Schedules pods that have no ``spec.nodeName``."""

    def __init__(self, parts: SimParts) -> None:
        self._store = parts.store
        self._devices = parts.devices
        self._claims = parts.claims
        self._recorder = parts.recorder
        self._plugin_devices = parts.plugin_devices
        self.pending: dict[PodKey, None] = {}
        self.unschedulable: set[PodKey] = set()
        self.nodes: dict[str, Obj] = {}
        self._order: list[str] = []
        self._pos: dict[str, int] = {}
        self._current: PodKey | None = None
        self._image_nodes: dict[str, set[str]] = {}
        self._node_images: dict[str, set[str]] = {}
        self._next_start = 0
        self._allocator = DeviceAllocator(parts.devices, parts.claims)
        self._pass = Coalescer(parts.timers, parts.config.timings.scheduler_interval_s, self.schedule_pending)
        self._retry = Coalescer(parts.timers, parts.config.timings.scheduler_interval_s, self._requeue)

    # -- queueing ----------------------------------------------------------------------
    def on_event(self, ev: WatchEvent) -> None:
        """Store listener: queue pods, index nodes, requeue on cluster changes."""
        if ev.resource == "pods":
            meta = ev.obj["metadata"]
            key = (meta.get("namespace", "default"), meta["name"])
            if ev.type == "DELETED":
                self.pending.pop(key, None)
                self.unschedulable.discard(key)
                self._retry.kick()
            elif (
                self._needs_scheduling(ev.obj)
                and key != self._current
                and key not in self.pending
                and key not in self.unschedulable
            ):
                self.pending[key] = None
                self._pass.kick()
        elif ev.resource == "nodes":
            self._index_node(ev.obj, deleted=ev.type == "DELETED")
            if ev.type != "MODIFIED" or self.unschedulable:
                self._retry.kick()
        elif ev.resource in ("resourceslices", "devicetaintrules") or (
            ev.resource == "resourceclaims" and ev.type != "ADDED"
        ):
            self._retry.kick()

    @staticmethod
    def _needs_scheduling(pod: Obj) -> bool:
        return (
            not pod.get("spec", {}).get("nodeName")
            and not pod.get("spec", {}).get("schedulingGates")  # KEP-3521: gated pods wait
            and "deletionTimestamp" not in pod["metadata"]
            and pod.get("status", {}).get("phase", "Pending") == "Pending"
        )

    def _requeue(self) -> None:
        if self.unschedulable:
            for key in self.unschedulable:
                self.pending[key] = None
            self.unschedulable.clear()
            self._pass.kick(0)

    def _index_node(self, node: Obj, *, deleted: bool) -> None:
        name = node["metadata"]["name"]
        if deleted:
            if self.nodes.pop(name, None) is not None:
                self._order.remove(name)
                self._pos = {n: i for i, n in enumerate(self._order)}
        else:
            if name not in self.nodes:
                self._pos[name] = len(self._order)
                self._order.append(name)
            self.nodes[name] = node
        images = (
            set()
            if deleted
            else {
                n
                for img in node.get("status", {}).get("images") or []
                for n in img.get("names") or []
            }
        )
        old = self._node_images.get(name, set())
        for img in old - images:
            self._image_nodes.get(img, set()).discard(name)
        for img in images - old:
            self._image_nodes.setdefault(img, set()).add(name)
        self._node_images[name] = images

    def node_has_image(self, node: str, image: str) -> bool:
        """Whether the node lists the image in ``status.images``."""
        return image in self._node_images.get(node, ())

    # -- scheduling --------------------------------------------------------------------
    def schedule_pending(self) -> None:
        """One pass over queued pods; re-arms itself while pods remain."""
        for _ in range(min(_BATCH, len(self.pending))):
            key = next(iter(self.pending))
            del self.pending[key]
            pod = self._store.find("pods", key[0], key[1])
            if pod is not None and self._needs_scheduling(pod):
                self._current = key
                try:
                    self.schedule_one(pod)
                finally:
                    self._current = None
        if self.pending:
            self._pass.kick(0)

    def schedule_one(self, pod: Obj) -> bool:
        """Try to place one pod; records Scheduled or FailedScheduling."""
        meta = pod["metadata"]
        key = (meta.get("namespace", "default"), meta["name"])
        ensured = self._claims.ensure_pod_claims(pod)
        if isinstance(ensured, str):
            return self._fail(pod, key, f"0/{len(self.nodes)} nodes are available: {ensured}.")
        pod, claims = ensured
        fixed = {n for n in (claim_node(c) for c in claims) if n}
        pinned = pinned_nodes(pod)
        if fixed:
            candidates: Iterable[str] = [n for n in fixed if pinned is None or n in pinned]
        elif pinned is not None:
            candidates = sorted(pinned)
        else:
            candidates = self._candidates(pod)
        reasons: Counter[str] = Counter()
        fits: list[_Fit] = []
        limit = _MIN_FEASIBLE
        for name in candidates:
            fit_or_reason = self._fit(pod, claims, name)
            if isinstance(fit_or_reason, str):
                reasons[fit_or_reason] += 1
            else:
                fits.append(fit_or_reason)
                if len(fits) >= limit:
                    break
        if not fits:
            others = len(self.nodes) - sum(reasons.values())
            if others > 0 and (fixed or pinned is not None):
                reasons[_AFFINITY_MSG] += others
            detail = ", ".join(f"{n} node(s) {r}" for r, n in sorted(reasons.items()))
            return self._fail(pod, key, f"0/{len(self.nodes)} nodes are available: {detail}.")
        best = max(fits, key=lambda f: (f.score, -f.index))
        self._bind(pod, best)
        return True

    def _candidates(self, pod: Obj) -> Iterator[str]:
        """Nodes with the pod's images first (image locality), then a rotating scan; lazy,
        because the search stops after enough feasible nodes."""
        first: dict[str, None] = {}
        if (pod.get("spec", {}).get("affinity") or {}).get("nodeAffinity", {}).get(
            "preferredDuringSchedulingIgnoredDuringExecution"
        ):
            # Nodes a preferred term matches first, so the search never stops before them.
            first.update((n, None) for n in self._order if preferred_score(pod, self.nodes[n]) > 0)
        for img in pod_images(pod):
            first.update(dict.fromkeys(sorted(self._image_nodes.get(img, ()))))
        yield from first
        n = len(self._order)
        start = self._next_start % n if n else 0
        self._next_start = start + 1
        for i in range(n):
            name = self._order[(start + i) % n]
            if name not in first:
                yield name

    def _fit(self, pod: Obj, claims: list[Obj], name: str) -> _Fit | str:
        node = self.nodes.get(name)
        if node is None:
            return "were not found"
        if not node_ready(node):
            return "were not ready"
        if not matches_node(pod, node):
            return _AFFINITY_MSG
        taint = untolerated_node_taint(pod, node)
        if taint is not None:
            if taint["key"] == "node.kubernetes.io/unschedulable":
                return "were unschedulable"
            return f"had untolerated taint {{{taint['key']}: {taint.get('value', '')}}}"
        if (short := self._plugin_devices.fits(pod, name)) is not None:  # extended resources (device plugins)
            return short
        allocations: list[tuple[Obj, list[dict[str, str]]]] = []
        taken: set[DevKey] = set()
        for claim in claims:
            if (claim.get("status") or {}).get("allocation"):
                continue
            results = self._allocator.allocate(claim, name, taken)
            if results is None:
                return _CLAIMS_MSG
            allocations.append((claim, results))
        images = pod_images(pod)
        present = sum(1 for img in images if self.node_has_image(name, img))
        score = (100.0 * present / len(images) if images else 0.0) + 2.0 * min(
            preferred_score(pod, node), 100
        )
        return _Fit(name, score, self._pos.get(name, 0), allocations)

    def _bind(self, pod: Obj, fit: _Fit) -> None:
        meta = pod["metadata"]
        for claim, results in fit.allocations:
            self._claims.allocate(claim, results, fit.node, pod)
        for _, ckey in self._claims.pod_claim_keys(pod):
            found = self._store.find("resourceclaims", ckey[0], ckey[1]) if ckey else None
            if found is not None and not any(
                r.get("uid") == meta["uid"]
                for r in found.get("status", {}).get("reservedFor") or []
            ):
                self._claims.allocate(found, [], fit.node, pod)

        def bind(p: Obj) -> None:
            p["spec"]["nodeName"] = fit.node
            _set_condition(p, {"type": "PodScheduled", "status": "True"})

        try:
            bound = self._store.mutate("pods", meta.get("namespace"), meta["name"], bind)
        except NotFound:
            return
        self._recorder.event(
            bound,
            "Scheduled",
            f"Successfully assigned {meta.get('namespace', 'default')}/{meta['name']} to {fit.node}",
            component="default-scheduler",
        )

    def _fail(self, pod: Obj, key: PodKey, message: str) -> bool:
        self.unschedulable.add(key)
        cond = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
        }
        current = next(
            (
                c
                for c in pod.get("status", {}).get("conditions") or []
                if c.get("type") == "PodScheduled"
            ),
            None,
        )
        if current is None or current.get("message") != message:
            pod = self._store.mutate("pods", key[0], key[1], lambda p: _set_condition(p, cond))
        self._recorder.event(
            pod, "FailedScheduling", message, type_="Warning", component="default-scheduler"
        )
        return False


def _set_condition(pod: Obj, cond: dict[str, str]) -> None:
    pod.setdefault("status", {}).setdefault("phase", "Pending")
    set_pod_condition(pod, cond)
