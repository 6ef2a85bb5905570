"""``SimEngine``: the cluster's behaviours behind the simulated API server.

It wires the device inventory, claim book, scheduler, kubelet, Job controller,
device-taint eviction controller and training workloads to the store's change feed,
and runs them on one timer wheel on the simulator's event loop.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

from aiohttp import web

from podmedic.domain.base import Obj
from podmedic_sim import training
from podmedic_sim.admission import PodAdmission
from podmedic_sim.claims import ClaimBook
from podmedic_sim.config import SimConfig
from podmedic_sim.device_plugins import PluginDevices
from podmedic_sim.devices import DeviceRegistry, Fault
from podmedic_sim.disruption import DisruptionController
from podmedic_sim.eviction import EvictionController
from podmedic_sim.health_stream import HealthStreams, Mode
from podmedic_sim.in_place_restart import InPlaceRestarts
from podmedic_sim.jobs import JobController
from podmedic_sim.jobsets import JobSetController
from podmedic_sim.kubelet import Kubelet
from podmedic_sim.kubelet_status import UNLISTED
from podmedic_sim.leaderworkersets import LeaderWorkerSetController
from podmedic_sim.node_lifecycle import NodeLifecycle
from podmedic_sim.nvml_view import NvmlView
from podmedic_sim.parts import SimParts, set_pod_condition
from podmedic_sim.proxy import Proxy
from podmedic_sim.recorder import Recorder
from podmedic_sim.scheduler import Scheduler
from podmedic_sim.statefulsets import StatefulSetController
from podmedic_sim.store import NotFound, Store, WatchEvent, now_rfc3339
from podmedic_sim.timers import Timers
from podmedic_sim.topology import bootstrap
from podmedic_sim.workload import Workloads

_WATCHED = frozenset({"nodes", "pods", "resourceslices", "resourceclaims", "devicetaintrules", "jobs",
                      "statefulsets", "jobsets", "leaderworkersets", "poddisruptionbudgets"})


T = TypeVar("T")
P = ParamSpec("P")


def _on_store(build: Callable[Concatenate[Store, P], T]) -> Callable[Concatenate[SimEngine, P], T]:
    """``SimEngine.<name>(...)``: ``build(engine.store, ...)``, with ``build``'s signature."""

    def call(engine: SimEngine, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return build(engine.store, *args, **kwargs)

    call.__name__ = build.__name__
    call.__doc__ = build.__doc__
    return call


class SimEngine:
    """Scheduler, kubelet, controllers and workloads of the simulated cluster."""

    def __init__(self, store: Store, config: SimConfig) -> None:
        self.store = store
        self.config = config
        self.rng = random.Random(config.seed)
        self.timers = Timers()
        self.recorder = Recorder(store)
        self.devices = DeviceRegistry(store)
        self.claims = ClaimBook(store, self.rng)
        self.plugin_devices = PluginDevices(store, config.device_plugins)
        self.admission = PodAdmission(store)
        parts = SimParts(store, config, self.timers, self.devices, self.claims, self.recorder, self.plugin_devices,
                         self.admission)
        self.scheduler = Scheduler(parts)
        self.kubelet = Kubelet(parts)
        self.kubelet.node_has_image = self.scheduler.node_has_image
        self.jobs = JobController(parts, self.rng, self._delete)
        self.eviction = EvictionController(parts, self._delete)
        self.nodes = NodeLifecycle(parts, self.kubelet, self.delete_pod)
        self.disruption = DisruptionController(parts)
        self.statefulsets = StatefulSetController(parts, self._delete)
        self.jobsets = JobSetController(parts)
        self.leaderworkersets = LeaderWorkerSetController(parts, self.statefulsets, self._delete)
        self.in_place = InPlaceRestarts(parts, self.kubelet)
        self.workloads = Workloads(store, config, self.timers, self.kubelet, self.jobs, self.in_place.at_barrier)
        self.proxy = Proxy(self)
        self.nvml = NvmlView(store, self.devices)
        self.streams = HealthStreams(self.devices, self.timers)
        self.streams.sync_device = self.kubelet.resync
        self.devices.streams = self.streams
        self._handlers = (
            self.devices.on_event,
            self.claims.on_event,
            self.scheduler.on_event,
            self.kubelet.on_event,
            self.jobs.on_event,
            self.eviction.on_event,
            self.nodes.on_event,
            self.disruption.on_event,
            self.workloads.on_event,
            self.statefulsets.on_event,
            self.jobsets.on_event,
            self.in_place.on_event,
            self.leaderworkersets.on_event,
        )
        for resource in (
            "nodes",
            "resourceslices",
            "devicetaintrules",
            "resourceclaims",
            "jobs",
            "pods",
            "statefulsets",
            "jobsets",
            "leaderworkersets",
            "poddisruptionbudgets",
        ):
            for obj in store.list(resource):
                self._on_event(WatchEvent("ADDED", resource, obj, store.resource_version))
        store.add_listener(self._on_event)

    def _on_event(self, ev: WatchEvent) -> None:
        if ev.resource in _WATCHED:
            for handler in self._handlers:
                handler(ev)

    # -- lifecycle -----------------------------------------------------------------------
    def bootstrap(self) -> None:
        """Namespaces, nodes, DeviceClasses and ResourceSlices (synchronous, fast)."""
        bootstrap(self.store, self.config)

    async def run(self) -> None:
        """Run every simulated component until cancelled."""
        await self.timers.run()

    def routes(self) -> list[web.RouteDef]:
        """The ``/sim/v1/`` routes (fault injection, workloads, state)."""
        from podmedic_sim.sim_routes import make_routes

        return make_routes(self) + self.proxy.sim_routes() + self.nvml.routes()

    def proxy_routes(self) -> list[web.RouteDef]:
        """Pod and node proxy subresources, matched before the generic Kubernetes routes."""
        return self.proxy.routes()

    # -- actions -------------------------------------------------------------------------
    def set_device_health(
        self,
        driver: str,
        pool: str,
        device: str,
        health: str,
        reason: str = "",
        code: int | None = None,
        message: str = "",
        crash: bool = False,
        clears_on_restart: bool = False,
    ) -> None:
        """Inject (or clear, with ``Healthy``) a device fault; ``KeyError`` for unknown devices,
        ``ValueError`` for a bad health value."""
        self.devices.set_health((driver, pool, device), Fault(health, reason, code, message, crash, clears_on_restart))

    def set_slice_taint(
        self,
        driver: str,
        pool: str,
        device: str,
        key: str,
        value: str = "",
        effect: str = "NoExecute",
        remove: bool = False,
    ) -> Obj:
        """Add/replace or remove a driver taint on a device in its ResourceSlice."""
        return self.devices.set_slice_taint((driver, pool, device), key, value, effect, remove=remove)

    def set_health_stream(self, driver: str, node: str, mode: str) -> None:
        """A driver's health stream on a node: ``streaming``, ``silent`` (its devices turn Unknown in
        pod status after the plugin's health timeout) or ``ended`` (Unknown now); ``KeyError`` when the
        node has none of the driver's devices."""
        timeout = self.config.plugins.get(driver, UNLISTED).health_timeout_s
        self.streams.set_mode(driver, node, cast("Mode", mode), timeout)

    def crash_pod(self, namespace: str, name: str, exit_code: int = 1) -> None:
        """The pod's running containers exit with ``exit_code`` (no device says why); ``KeyError`` when the
        kubelet runs no such pod."""
        rt = self.kubelet.pods.get((namespace, name))
        if rt is None:
            raise KeyError(f"no running pod {namespace}/{name}")
        for c in rt.containers:
            if c.state == "running" and not self.workloads.absorbs_failure(rt, c):
                self.kubelet.exit_container(rt, c, exit_code, "Error")

    def set_plugin_device_health(self, node: str, resource: str, device: str, health: str) -> None:
        """A device plugin reports one of its devices ``Healthy`` or ``Unhealthy`` (node allocatable and the
        holders' pod status follow); ``KeyError`` when the node lists no such device."""
        self.plugin_devices.set_health(node, resource, device, health)

    def set_prepare_failure(self, driver: str, pool: str, device: str, message: str = "", clear: bool = False) -> None:
        """Make the driver fail to prepare the device for pods starting on it (``clear``:
        stop); pods waiting on it start at their next retry. ``KeyError`` for unknown devices,
        ``ValueError`` for an empty message."""
        self.devices.set_prepare_failure((driver, pool, device), message, clear=clear)

    def delete_pod(self, namespace: str, name: str, grace_seconds: int | None = None) -> Obj:
        """Delete a pod like the API server: bound, running pods get a deletionTimestamp and
        are removed by the kubelet after the grace period; others go at once."""
        pod = self.store.get("pods", namespace, name)
        if "deletionTimestamp" in pod["metadata"]:
            return pod
        if not pod.get("spec", {}).get("nodeName") or grace_seconds == 0:
            return self.store.delete("pods", namespace, name)

        def mark(p: Obj) -> None:
            p["metadata"]["deletionTimestamp"] = now_rfc3339()
            spec_grace = p.get("spec", {}).get("terminationGracePeriodSeconds", 30)
            p["metadata"]["deletionGracePeriodSeconds"] = spec_grace if grace_seconds is None else grace_seconds

        return self.store.mutate("pods", namespace, name, mark)

    def evict(self, namespace: str, name: str) -> None:
        """The eviction subresource after PDB checks: mark the disruption, delete the pod."""

        def mark(p: Obj) -> None:
            set_pod_condition(
                p,
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": "EvictionByEvictionAPI",
                    "message": "Eviction API: evicting",
                },
            )

        self.store.mutate("pods", namespace, name, mark)
        self.delete_pod(namespace, name)

    def _delete(self, pod: Obj, reason: str) -> None:
        meta = pod["metadata"]
        with contextlib.suppress(NotFound):
            self.delete_pod(meta.get("namespace", "default"), meta["name"])

    # Create a training Job and its ResourceClaimTemplate (see the workload protocol).
    create_training_job = _on_store(training.create_training_job)

    # -- state ---------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The JSON of ``GET /sim/v1/state``."""
        from podmedic_sim.state import build_state

        return build_state(self)
