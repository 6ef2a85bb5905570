"""The goodput benchmark's fault model: how each Llama 3 interruption cause shows, and what it costs.

Every number the model uses is in ``PARAMETERS`` with its source and whether it is measured,
documented or chosen; docs/BENCHMARKS.md prints that table. How each cause shows is a mix of:

- ``crash``: the failing rank's process exits (``POST /sim/v1/workloads/crash``, or the device's own
  crash for a device-visible cause);
- ``hang``: the rank is stuck (Running and Ready, no step, no checkpoint): its peers abort when the
  collective timeout fires (``POST /sim/v1/workloads/hang``; ``podmedic_sim/collectives.py``);
- ``slow``: the rank steps ``SLOW_FACTOR`` times slower for ``SLOW_REAL_S``, and so does the job;
- ``sdc``: silent data corruption found late: the job crashes and its last checkpoint is unusable;
- ``planned``: an announced interruption the team makes (firmware, configuration, data): every rank is
  deleted gracefully and saves on SIGTERM.

A cause's ``xid`` is what a device watcher sees (the node agent through NVML, the pod's device health);
``None`` is nothing device-visible. ``repair`` is what brings the hardware back: ``none`` (nothing is
broken once the process restarts), ``reset`` (minutes; the driver's health taint stays, since NVIDIA's
DRA driver does not remove it), ``reboot`` (tens of minutes; the plugin restarts and its taints go), ``rma``
(days: longer than any run, the GPU stays out).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from benchmarks.llama3 import LLAMA3_MIX


@dataclass(frozen=True)
class Cause:
    """How one cause of Llama 3's Table 5 shows and is repaired."""

    shows: tuple[tuple[str, float], ...]
    xid: int | None
    repair: tuple[tuple[str, float], ...]
    source: str
    host: bool = False  # the node goes down with the rank: unschedulable until its reboot

    def draw(self, rng: random.Random) -> tuple[str, str]:
        """The manifestation and the repair of one occurrence."""
        shows = rng.choices([s for s, _ in self.shows], weights=[w for _, w in self.shows])[0]
        repair = rng.choices([r for r, _ in self.repair], weights=[w for _, w in self.repair])[0]
        return shows, repair


_NONE = (("none", 1.0),)
_HOST = Cause((("crash", 1.0),), None, (("reboot", 1.0),),
              "a host part failing takes the node's processes down with no GPU error; the host reboots (chosen)",
              host=True)
_NETWORK = Cause((("crash", 0.5), ("hang", 0.5)), None, _NONE,
                 "network faults show as NCCL errors or hangs, no GPU XID (Llama 3 3.3.4; goodput-facts); "
                 "half each chosen; the path fails over once the job restarts (chosen)")

CAUSES: dict[str, Cause] = {
    "faulty_gpu": Cause((("crash", 0.5), ("hang", 0.5)), 79, (("reboot", 0.8), ("rma", 0.2)),
                        "XID 79, fallen off the bus; Llama 3 3.3.4: a failed GPU 'often' shows as stalled "
                        "load/store (half hang chosen); a reboot brings most back, a fifth replaced (chosen)"),
    "hbm3": Cause((("crash", 1.0),), 48, (("reset", 0.9), ("rma", 0.1)),
                  "XID 48, double-bit ECC: the processes using the memory end (NVIDIA memory error recovery); "
                  "a reset remaps the row (share replaced chosen)"),
    "gpu_sram": Cause((("crash", 1.0),), 95, (("reset", 1.0),),
                      "XID 95, uncontained ECC: every process on the GPU ends, a reset is needed (NVIDIA)"),
    "gpu_system_processor": Cause((("hang", 1.0),), 119, (("reboot", 1.0),),
                                  "XID 119/120 (GSP), visible to NVML; GSP faults tend to hang the GPU and need a "
                                  "reboot (Delta study, second-hand: chosen)"),
    "gpu_thermal": Cause((("slow", 1.0),), None, _NONE,
                         "thermal and sensor faults throttle the clocks (no XID); slowdown chosen"),
    "software": Cause((("crash", 1.0),), None, _NONE, "a bug in the job: the process exits, no device fault"),
    "dependency": Cause((("crash", 1.0),), None, _NONE, "an outside dependency fails: the process exits"),
    "nccl_watchdog": Cause((("hang", 1.0),), None, _NONE,
                           "the collective hung until the watchdog fired (Llama 3 Table 5's own name)"),
    "silent_data_corruption": Cause((("sdc", 1.0),), None, _NONE,
                                    "found late (a loss spike): the newest checkpoint holds bad state (chosen: one)"),
    "switch_cable": _NETWORK,
    "nic": _NETWORK,
    "host_maintenance": _HOST,  # Table 5's "unplanned" maintenance: not announced
    "ssd": _HOST, "power_supply": _HOST, "server_chassis": _HOST, "io_expansion_board": _HOST, "cpu": _HOST,
    "system_memory": _HOST,
    "planned": Cause((("planned", 1.0),), None, _NONE,
                     "Llama 3 3.3.4: 47 planned interruptions (firmware, configuration, dataset updates)"),
}

PLANNED = 47
INTERVAL_H = 54 * 24 / (419 + PLANNED)
"""Hours between one job's interruptions, planned ones included: 2.78."""
MIX: dict[str, int] = {**LLAMA3_MIX, "planned": PLANNED}
"""Table 5's 419 unexpected interruptions and the 47 planned ones of the same 54 days: 466 in all."""

# -- costs, in real seconds (the benchmark scales them) -------------------------------------------
JOB_BACKOFF_BASE_REAL_S = 10.0
JOB_BACKOFF_MAX_REAL_S = 360.0
KUBELET_BACKOFF_MAX_REAL_S = 300.0
KUBELET_BACKOFF_RESET_REAL_S = 600.0
STARTUP_REAL_S = 120.0
STARTUP_PER_NODE_REAL_S = (768.0 - 454.0) / ((16384 - 2048) / 8)
"""What each node adds to a restart of the whole job: ByteRobust's requeue took 454 s at 2,048 GPUs and
768 s at 16,384 (arXiv 2509.16293): 0.175 s a node."""
PULL_REAL_S = 120.0
IN_JOB_RESTART_REAL_S = 60.0
IN_JOB_PER_NODE_REAL_S = (65.0 - 46.0) / ((16384 - 2048) / 8)
"""What each node adds to an in-place restart: ByteRobust's hot update, 46 s at 2,048 GPUs, 65 s at 16,384."""
IN_JOB_RESTARTS = 3
NVRX_SAFETY_FACTOR = 5.0
HEARTBEAT_GAP_REAL_S = 30.0
"""The longest gap between a healthy rank's heartbeats: a checkpoint save (no heartbeats meanwhile)."""
NVRX_HANG_DETECT_REAL_S = NVRX_SAFETY_FACTOR * HEARTBEAT_GAP_REAL_S
"""NVIDIA Resiliency Extension's rank heartbeat timeout as its client computes it from the observed
intervals (safety_factor 5.0 by default): a hung rank is ended and the workers restarted after 150 s."""
NODE_MONITOR_GRACE_REAL_S = 50.0
NODE_TOLERATION_REAL_S = 300.0
RELAPSE: dict[str, float] = {"reset": 0.2, "reboot": 0.1}
"""The share of repairs that do not fix: the device fails again within ``RELAPSE_AFTER_REAL_S``."""
RELAPSE_AFTER_REAL_S = (600.0, 7200.0)
CHECKPOINT_SAVE_REAL_S = 30.0
GRACE_REAL_S = 30.0
PEER_EXIT_REAL_S = 5.0
COLLECTIVE_TIMEOUT_REAL_S = 600.0
SLOW_FACTOR = 2.0
SLOW_REAL_S = 1800.0
REPAIR_REAL_S: dict[str, tuple[float, float]] = {
    "none": (0.0, 0.0), "reset": (300.0, 900.0), "reboot": (1200.0, 3600.0), "rma": (2 * 86400.0, 5 * 86400.0)}
"""Uniform ranges of each repair class."""
CHECKPOINT_EVERY_REAL_S = 300.0

PARAMETERS: tuple[tuple[str, str, str, str], ...] = (
    ("interruptions per job", "466 in 54 days (419 unexpected + 47 planned): one every 2.78 h",
     "Llama 3, arXiv 2407.21783, 3.3.4 and Table 5", "documented"),
    ("causes and their counts", "Table 5's 18 causes, with planned added", "Llama 3, Table 5", "documented"),
    ("how each cause shows, what a device sees, its repair", "the cause table below",
     "per cause, in the table below", "documented / chosen"),
    ("Job pod-failure back-off", f"{JOB_BACKOFF_BASE_REAL_S:g} s doubling to {JOB_BACKOFF_MAX_REAL_S:g} s",
     "kubernetes.io Jobs, 'Pod backoff failure policy'; pkg/controller/job", "documented"),
    ("kubelet crash-loop back-off", f"{JOB_BACKOFF_BASE_REAL_S:g} s doubling to {KUBELET_BACKOFF_MAX_REAL_S:g} s, "
     f"reset after {KUBELET_BACKOFF_RESET_REAL_S:g} s running", "kubernetes.io 'Pod Lifecycle', container restarts",
     "documented"),
    ("termination grace period", f"{GRACE_REAL_S:g} s", "k8s.io/api core/v1 terminationGracePeriodSeconds default",
     "documented"),
    ("peer exit noticed", f"{PEER_EXIT_REAL_S:g} s", "a closed peer connection is an NCCL error in seconds "
     "(goodput-facts)", "chosen"),
    ("collective (NCCL) timeout", f"{COLLECTIVE_TIMEOUT_REAL_S:g} s", "torch.distributed.init_process_group "
     "default (pytorch/pytorch#110947); production 30-60 min (ByteRobust)", "documented"),
    ("trainer start-up (process, NCCL init, checkpoint load)",
     f"{STARTUP_REAL_S:g} s + {STARTUP_PER_NODE_REAL_S:.3f} s a node",
     "base: no cited figure at <= 4 nodes (chosen); growth: ByteRobust (arXiv 2509.16293) requeue 454 s at "
     "2,048 GPUs, 768 s at 16,384", "documented / chosen"),
    ("restart paths", "in place (kubelet): start-up only; one pod rescheduled: scheduling, image if absent, "
     "start-up; whole workload: every pod rescheduled, its slowest rank sets the pace; DRA prepare inside "
     "start-up", "kubelet, Job, JobSet controllers as upstream (the simulator)", "documented / chosen"),
    ("image pull on a node without it", f"{PULL_REAL_S:g} s", "trainer images of 10-20 GB", "chosen"),
    ("in-job restart (torchrun agent)",
     f"{IN_JOB_RESTART_REAL_S:g} s + {IN_JOB_PER_NODE_REAL_S:.4f} s a node, up to {IN_JOB_RESTARTS} per agent",
     "ByteRobust in-place hot update 46 s at 2,048 GPUs, 65 s at 16,384; torchrun --max-restarts (default 0)",
     "documented / chosen"),
    ("in-job hang detection", f"{NVRX_HANG_DETECT_REAL_S:g} s: NVRx's safety factor {NVRX_SAFETY_FACTOR:g} x the "
     f"longest heartbeat gap ({HEARTBEAT_GAP_REAL_S:g} s, a checkpoint save); then the agent ends the hung rank "
     "and restarts the workers", "NVIDIA Resiliency Extension FaultToleranceConfig (safety_factor=5.0; "
     "timeouts calculated from observed heartbeat intervals take precedence over the 45 min default)",
     "documented"),
    ("checkpoint save on request or SIGTERM", f"{CHECKPOINT_SAVE_REAL_S:g} s, the job stopped meanwhile",
     "fits the default grace period", "chosen"),
    ("periodic checkpoint", f"every {CHECKPOINT_EVERY_REAL_S:g} s, asynchronous (free)",
     "torch.distributed.checkpoint async_save", "chosen"),
    ("slow rank", f"x{SLOW_FACTOR:g} for {SLOW_REAL_S:g} s", "thermal throttling", "chosen"),
    ("repair: reset / reboot / RMA", "5-15 min / 20-60 min / 2-5 days, uniform",
     "orders of magnitude only (a reset minutes, a reboot tens of minutes, an RMA days); no published "
     "distribution", "chosen"),
    ("DRA driver health taints", "off (alpha, off by default); on in `k8s-only+taints`: NoSchedule, removed "
     "only by a reboot", "dra-driver-nvidia-gpu 'GPU health checking'", "documented"),
    ("a host fault", f"the node dies: Unknown and tainted unreachable after {NODE_MONITOR_GRACE_REAL_S:g} s, its "
     f"pods bound until their {NODE_TOLERATION_REAL_S:g} s toleration runs out, then Terminating (the Job "
     "replaces them) until the node is back from its reboot", "kube-controller-manager "
     "--node-monitor-grace-period (50 s); DefaultTolerationSeconds; pkg/controller/tainteviction; "
     "pkg/controller/job isPodFailed", "documented"),
    ("repeat offenders", f"a reset fails to fix {RELAPSE['reset']:.0%}, a reboot {RELAPSE['reboot']:.0%}: the "
     f"device fails the same way again {RELAPSE_AFTER_REAL_S[0] / 60:g}-{RELAPSE_AFTER_REAL_S[1] / 60:g} min "
     "after, and stays out for the run (its RMA takes days)", "lemon nodes are real (Kokolis et al., arXiv "
     "2410.21680, second-hand); no published share per repair", "chosen"),
    ("spare nodes", "2 beyond the jobs' nodes",
     "the benchmark's cluster (Setup.nodes): room to move a job without waiting for a repair", "chosen"),
)
"""Every parameter of the model: name, value, source, kind."""


def model_changes(measured: list[list[str]] | None) -> list[str]:
    """The parameters whose row differs between ``measured`` (a result's ``parameters``) and ``PARAMETERS``:
    a result measured on another model is not this model's figure."""
    then = {row[0]: list(row) for row in measured or []}
    now = {row[0]: list(row) for row in PARAMETERS}
    return [name for name in {**then, **now} if then.get(name) != now.get(name)]


def draw_faults(count: int, seed: int, duration_s: float, causes: tuple[str, ...] = ()) -> list[tuple[float, str]]:
    """``count`` (time, cause) pairs: causes in ``MIX``'s proportions (only ``causes``, in theirs, when given: a
    targeted run of one kind of fault), times spread over the middle of the run."""
    rng = random.Random(seed)
    mix = {k: v for k, v in MIX.items() if not causes or k in causes}
    kinds = rng.choices(list(mix), weights=list(mix.values()), k=count)
    times = sorted(rng.uniform(0.1 * duration_s, 0.7 * duration_s) for _ in range(count))
    return list(zip(times, kinds, strict=True))
