"""What every orchestration benchmark runs with: the server settings compared, the policy, the simulator's pace.

The benchmark policy is built in ONE place, ``bench_policy``: the embedded default policy with
the waits a person would wait (heal, anti-flap, vendor) compressed to fractions of a second.
Whatever a benchmark must turn off for all benchmarks (a guard, say) belongs there.
"""

from __future__ import annotations

from typing import Any

import yaml

from benchmarks.stack import StackConfig
from podmedic.domain.policy_file import PolicySet, parse_policy
from podmedic.domain.policy_layers import embedded_text, overlay
from podmedic_sim.config import SimTimings

SERVERS: dict[str, dict[str, tuple[str, ...]]] = {
    # The dev server as `temporal server start-dev` starts it: SQLite, default pragmas, default config.
    "default": {"pragmas": (), "dynamic": ()},
    # The tuned setting: the transfer queue polled without a rate cap, SQLite in WAL without fsync;
    # and the search-attribute cache kept as a production server keeps it. The dev server forces a
    # reload of it from SQLite on every read, so that an attribute created a moment ago is usable at
    # once: 63 cluster-metadata and 24 namespace reads per incident (server metrics, 100 incidents).
    # History caches sized for a storm's open workflows (defaults: 512 executions' state and 512 KB
    # of events per shard): with 12,500 open in the 10,000-device storm, every workflow task reloaded
    # its execution from SQLite (the server at 1.3 cores reading pages, 14 workflow tasks a second).
    "tuned": {"pragmas": ("journal_mode=WAL", "synchronous=OFF"),
              "dynamic": ("history.transferProcessorMaxPollRPS=10000",
                          "system.forceSearchAttributesCacheRefreshOnRead=false",
                          "history.cacheMaxSize=20000",
                          "history.eventsCacheMaxSizeBytes=268435456")},
}
"""Temporal dev server settings by name: SQLite pragmas and dynamic config values."""

# Overlaid on the default policy's `default` driver entry. Checkpoints are instant in the
# simulator (checkpoint_save_s 0), looked for every 20 ms; the incident closes 0.2 s after the
# device is healthy again; no vendor ticket is filed (no URL). Node quarantine is off so that
# every device gets its own DeviceTaintRule: with it on, 3 failures on one node make the node
# the incident and the devices get no rule of their own (node correlation still runs).
_OVERRIDES: dict[str, Any] = {
    "checkpoint": {"timeout_s": 10, "poll_s": 0.02},
    # The default ladders and their timeouts: with 30 s rungs, 76 of 100 in-place restarts on the
    # default server at load 8 did not verify in time and their incidents closed `cleared`.
    "recovery": {"verify_poll_s": 0.05},
    "close": {"heal_wait_s": 5, "anti_flap_s": 0.2, "poll_s": 0.1},
    "ticket": {"url": "", "poll_s": 0.5, "wait_resolution_s": 2, "verify_s": 1},
    "node_quarantine": {"enabled": False},
    # Many incidents at once are a storm to the shipped policy; only `storm` measures the storm fence.
    "detection": {"storm_fence": {"enabled": False}},
}

BENCH_TIMINGS = SimTimings(image_pull_s=0.0, container_start_s=0.05, kubelet_report_s=0.2, backoff_base_s=0.1,
                           backoff_max_s=1.0, scheduler_interval_s=0.05, workload_step_s=0.5, checkpoint_save_s=0.0,
                           crash_after_s=0.05, termination_grace_s=0.05, job_requeue_s=0.02, progress_write_s=1.0,
                           eviction_interval_s=0.05)
"""The simulator's pace in benchmarks: instant checkpoints, no image pull; a training step every 0.5 s and
progress written every 1 s, which bounds how soon a restarted pod verifies as progressing (and keeps a
thousand training jobs from eating a core of their own)."""


STORM_POLLS: dict[str, Any] = {"checkpoint": {"poll_s": 1}, "recovery": {"verify_poll_s": 2}, "close": {"poll_s": 15}}
"""The storm polls at the default policy's pace (checkpoint answers every 1 s, verification every 2 s, the
device's health every 15 s), not the other benchmarks' 20-100 ms: a thousand incidents each polling the
cluster 20 times a second is a load no deployment makes, and it took the CPU the fences need."""

STORM_TIMINGS = BENCH_TIMINGS.model_copy(update={"workload_step_s": 2.0, "progress_write_s": 2.0})
"""The storm's pace: a training step and a progress write every 2 s. A thousand jobs at the benchmark pace
kept the simulator at 0.8 of a core before anything failed, CPU the 2-core machine then lacked for podmedic
(an in-place restart still verifies within about 4 s)."""


def storm_timings(devices: int) -> SimTimings:
    """``STORM_TIMINGS``, with the training steps and progress writes slowed past 2,000 devices so the
    simulator writes at most 1,000 pods a second (10,000 jobs writing every 2 s would be 5,000 writes a
    second, which the simulator and every pod watch would pay before anything failed)."""
    pace = max(STORM_TIMINGS.progress_write_s, devices / 1000)
    return STORM_TIMINGS.model_copy(update={"workload_step_s": pace, "progress_write_s": pace})


def bench_policy(**overrides: Any) -> PolicySet:
    """The policy every orchestration benchmark delivers with; ``overrides`` go over the driver default."""
    return _benchmark(_unguarded_default(), overrides, "benchmark policy")


def shipped_guard_policy(**overrides: Any) -> PolicySet:
    """``bench_policy`` with the embedded default's fleet guard as it ships (``python -m benchmarks
    storm-guard``)."""
    return _benchmark(yaml.safe_load(embedded_text()), overrides, "benchmark policy with the shipped guard")


def _benchmark(raw: dict[str, Any], overrides: dict[str, Any], name: str) -> PolicySet:
    raw["drivers"]["default"] = overlay(overlay(raw["drivers"]["default"], _OVERRIDES), overrides)
    return parse_policy(yaml.safe_dump(raw), name)


def unguarded_default_policy(**overrides: Any) -> PolicySet:
    """The embedded default policy as it is, but for the fleet guard (``python -m benchmarks detection``);
    ``overrides`` go over the driver default (``python -m benchmarks cost``)."""
    raw = _unguarded_default()
    raw["drivers"]["default"] = overlay(raw["drivers"]["default"], overrides)
    return parse_policy(yaml.safe_dump(raw), "default policy without the fleet guard")


def _unguarded_default() -> dict[str, Any]:
    raw: dict[str, Any] = yaml.safe_load(embedded_text())
    # The guard would hold a storm by design (that is its job); the benchmarks measure the pipeline
    # itself. The guard's own answer rate: `python -m benchmarks.fleet_guard`.
    raw["guard"] = {"enabled": False}
    return raw


DEVICES_PER_NODE = 8
"""GPUs on each simulated node of the benchmark stacks."""


def stack_config(server: str, nodes: int, *, bare: bool = False, timings: SimTimings = BENCH_TIMINGS,
                 worker: bool = True, checkpoint_every_steps: int = 0,
                 worker_env: tuple[tuple[str, str], ...] = ()) -> StackConfig:
    """A stack on the named server setting (``SERVERS``) with the benchmark simulator pace."""
    chosen = SERVERS[server]
    return StackConfig(nodes=nodes, devices_per_node=DEVICES_PER_NODE, task_queue=f"bench-{server}",
                       sqlite_pragmas=chosen["pragmas"],
                       temporal_args=tuple(f"--dynamic-config-value={kv}" for kv in chosen["dynamic"]),
                       sim_timings=timings.model_dump_json(), worker=worker, bare_worker=bare,
                       checkpoint_every_steps=checkpoint_every_steps, worker_env=worker_env)
