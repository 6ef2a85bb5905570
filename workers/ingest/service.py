"""The ingest service: cluster sources and the HTTP front feeding one Deliverer.

Each cluster source runs in its own thread (the kubernetes client's watches block) and
hands observations over with a blocking ``emit`` that returns only once Temporal accepted
the observation, so a source advances its persisted resourceVersion only past what was
delivered: a crash loses nothing, a restart redelivers at most a little (deduplicated by
the workflow).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import Callable, Sequence

from temporalio.client import Client

from podmedic.domain.policy_file import PolicySet
from podmedic.kube.gateway import KubeGateway
from podmedic.kube.load_report import kube_load_reports
from podmedic.kube.startup import say_health_status
from podmedic.telemetry.probes import Check, Readiness, api_server_check, temporal_check
from workers.ingest.dedup import RecentStates
from workers.ingest.delivery import Deliverer
from workers.ingest.http.app import build_app, start_site
from workers.ingest.leader import LeaderElector, LeaseConfig
from workers.ingest.settings import IngestSettings
from workers.ingest.sources import cluster_sources
from workers.ingest.types import Observation, Source, Stopping

log = logging.getLogger("podmedic.ingest")

RETRY_FIRST_S = 0.5
JOIN_S = 5.0
"""How long a stop waits for the source threads to end."""
RETRY_MAX_S = 10.0


class BlockingEmitter:
    """The ``emit`` given to source threads: delivers on the service's loop, retrying until
    Temporal accepts or the service stops."""

    def __init__(self, deliverer: Deliverer, loop: asyncio.AbstractEventLoop, halt: threading.Event) -> None:
        self.deliverer = deliverer
        self.loop = loop
        self.halt = halt

    def __call__(self, obs: Observation, *, listed: bool = False) -> None:
        future = asyncio.run_coroutine_threadsafe(self._deliver(obs, listed), self.loop)
        while True:
            try:
                future.result(timeout=0.5)
                return
            except concurrent.futures.TimeoutError:
                if self.halt.is_set():
                    future.cancel()
                    raise Stopping(f"stopped before {obs.event_id} was delivered") from None
            except concurrent.futures.CancelledError:
                raise Stopping(f"stopped before {obs.event_id} was delivered") from None

    async def _deliver(self, obs: Observation, listed: bool) -> None:
        delay = RETRY_FIRST_S
        while True:
            try:
                done = await self.deliverer.deliver(obs, listed=listed)
            except Exception as exc:  # Temporal unreachable or overloaded: keep the event, retry
                if self.halt.is_set():
                    raise Stopping(str(exc)) from exc
                log.warning("delivering %s failed (%s); retrying in %.1fs", obs.event_id, exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX_S)
                continue
            if not done.deduplicated and done.incident_id:
                log.info("%s -> incident %s %s", obs.event_id, done.incident_id, done.note)
            return


async def run_sources(sources: Sequence[Source], deliverer: Deliverer, stop: asyncio.Event) -> None:
    """Run every source in its own thread until ``stop`` is set, then stop them."""
    halt = threading.Event()
    emit = BlockingEmitter(deliverer, asyncio.get_running_loop(), halt)
    threads = []
    for source in sources:
        thread = threading.Thread(target=_run_source, args=(source, emit, halt), name=f"source-{source.name}",
                                  daemon=True)
        thread.start()
        threads.append(thread)
    log.info("ingest sources running: %s", ", ".join(s.name for s in sources) or "none")
    try:
        await stop.wait()
    finally:
        halt.set()
        # Sources notice ``halt`` within a watch timeout; daemon threads never block exit. Waited for here by
        # polling, not by joins in the default executor: its few threads would all be taken by the joins, and
        # every other blocking call of the process (the Lease's release, which hands the watches over) would
        # wait behind them.
        deadline = asyncio.get_running_loop().time() + JOIN_S
        while any(t.is_alive() for t in threads) and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)


def _run_source(source: Source, emit: BlockingEmitter, halt: threading.Event) -> None:
    """Run one source; a crash is logged and the source restarted, so one bug never silences detection."""
    delay = 1.0
    while not halt.is_set():
        try:
            source.run(emit, halt)
            return
        except Stopping:
            return
        except Exception:
            log.exception("source %s crashed; restarting in %.0fs", source.name, delay)
            halt.wait(delay)
            delay = min(delay * 2, 30.0)


def _checks(client: Client, kube: KubeGateway, sources: Sequence[Source],
            elector: LeaderElector | None = None) -> dict[str, Check]:
    """What the ingest needs to turn signals into incidents: Temporal, and with watches the API
    server and every watch having listed once (before that, a device's state may be unseen).
    A standby replica is ready once it knows who leads: its HTTP front serves, and the watches are the leader's."""
    checks: dict[str, Check] = {"temporal": temporal_check(client)}
    if not sources:
        return checks

    async def synced() -> str | None:
        if elector is not None and not elector.leading:
            return None if elector.holder else "no Lease holder known yet (electing a leader)"
        waiting = [s.name for s in sources if (stats := getattr(s, "stats", None)) is not None
                   and stats.lists == 0 and stats.watches == 0]
        return f"not listed yet: {', '.join(waiting)}" if waiting else None
    checks["api server"] = api_server_check(kube.server_version)
    checks["watches"] = synced
    return checks


async def tell_guard(deliverer: Deliverer, policies: PolicySet, stop: asyncio.Event, retry_s: float = 10.0) -> None:
    """Tell the fleet guard the policy in force (``GuardSightings.tell_policy``), again every ``retry_s`` while
    Temporal cannot be reached: a guard told late keeps its spares late, so it is told until it is."""
    while not stop.is_set():
        try:
            log.info("%s", await deliverer.sightings.tell_policy(policies.guard))
            return
        except Exception as err:
            log.warning("the fleet guard was not told the policy in force (%s); trying again in %gs", err, retry_s)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(retry_s):
                await stop.wait()


async def run_ingest(
    client: Client,
    kube: KubeGateway,
    policies: PolicySet,
    settings: IngestSettings,
    task_queue: str,
    stop: asyncio.Event,
    *,
    watch: bool = True,
    http: bool = True,
    on_ready: Callable[[str | None], None] | None = None,
    election: LeaseConfig | None = None,
) -> None:
    """The whole ingest service until ``stop``: cluster watches and the HTTP front, one Deliverer.

    ``on_ready`` receives the HTTP front's base URL (``None`` without one) once serving. With
    ``election``, the cluster watches run only while this replica holds the Lease (``leader.py``);
    the HTTP front serves on every replica.
    """
    deliverer = Deliverer(client, policies, task_queue,
                          dedup=RecentStates(settings.dedup.ttl_s, settings.dedup.max_entries))
    sources = cluster_sources(kube, policies, settings.state_dir) if watch else []
    # Its requests say they are the ingest's, as the sources' do (the RBAC proof: tests/deploy).
    elector = LeaderElector(kube.for_component("ingest"), election) if election is not None and sources else None
    readiness = Readiness(_checks(client, kube, sources, elector))
    runner = None
    url = None
    if http:
        runner, url = await start_site(build_app(deliverer, settings, readiness.verdict), settings.http)
        log.info("ingest HTTP front on %s (POST /v1/events, /v1/alertmanager)", url)
    if on_ready is not None:
        on_ready(url)
    told = asyncio.create_task(tell_guard(deliverer, policies, stop)) if watch else None
    if watch:
        await say_health_status(kube)
    try:
        async with readiness.running(), kube_load_reports(kube.limiter):
            if elector is None:
                await run_sources(sources, deliverer, stop)
            else:
                lease = elector.config
                log.info("cluster watches run on the leader of Lease %s/%s; this replica is %s",
                         lease.namespace, lease.name, lease.identity)
                await elector.run(stop, lambda lost: run_sources(sources, deliverer, lost))
    finally:
        if told is not None:
            told.cancel()
        if runner is not None:
            await runner.cleanup()
        log.info("ingest stopped: %d delivered, %d deduplicated", deliverer.delivered, deliverer.deduplicated)
