"""How each Llama 3 interruption cause shows in the simulated cluster, and what a real one costs.

Every cause of the Llama 3 table (``benchmarks/llama3.py``) is here, those no device health watcher
can see included. Three ways a cause shows:

- ``xid``: the GPU reports it (an XID in the node agent's NVML events, the device Unhealthy in pod
  status, and the DRA driver's ResourceSlice taint, KEP-5055, which keeps new pods off it under
  every policy): faulty GPU (XID 79), HBM3 (XID 48, double-bit ECC), GPU SRAM (XID 95, uncontained
  ECC), NVLink switch/cable (XID 74), and software (XID 13, a graphics exception the workload made).
- ``maintenance``: announced before it happens. Compute Engine gives GPU VMs a 1-hour notice of a
  host maintenance event ("Handle GPU host maintenance events", cloud.google.com/compute/docs/gpus/
  gpu-host-maintenance); the only warning window used here. No other cause is given one: no
  source documents a warning before an HBM3, SRAM or NVLink error kills the process.
- ``silent``: the process dies and no device says anything: GPU system processor (GSP), NIC, NCCL
  watchdog timeouts, silent data corruption (found later, by a loss spike), thermal, and the host
  causes (SSD, power supply, chassis, IO board, dependency, CPU, system memory). Only the Job's own
  restart helps, under every policy.

Costs, in real seconds (scaled like everything else): the Job controller's back-off after a failed
pod, 10 s doubling to 6 minutes (kubernetes.io, Jobs, "Pod backoff failure policy"); a restart's
start-up (image present: checkpoint load and NCCL initialisation) and an image pull on a node
without it are assumptions, stated here and in the results (``RESTART_S``, ``PULL_S``).
"""

from __future__ import annotations

from typing import Any

Kind = dict[str, Any]

KINDS: dict[str, Kind] = {
    "faulty_gpu": {"signal": "xid", "code": 79, "crash": True, "clears_on_restart": False,
                   "message": "XID 79: GPU has fallen off the bus"},
    "hbm3": {"signal": "xid", "code": 48, "crash": True, "clears_on_restart": False,
             "message": "XID 48: double-bit ECC error (HBM3)"},
    "gpu_sram": {"signal": "xid", "code": 95, "crash": True, "clears_on_restart": False,
                 "message": "XID 95: uncontained ECC error (SRAM)"},
    "switch_cable": {"signal": "xid", "code": 74, "crash": True, "clears_on_restart": False,
                     "message": "XID 74: NVLink error"},
    "software": {"signal": "xid", "code": 13, "crash": True, "clears_on_restart": True,
                 "message": "XID 13: graphics exception"},
    "host_maintenance": {"signal": "maintenance", "code": None, "crash": False, "clears_on_restart": False,
                         "reason": "NodeMaintenance", "message": "host maintenance scheduled in 1 hour",
                         "warn_real_s": 3600.0},  # WARN_REAL_S
}
SILENT = ("gpu_system_processor", "nic", "nccl_watchdog", "silent_data_corruption", "gpu_thermal", "ssd",
          "power_supply", "server_chassis", "io_expansion_board", "dependency", "cpu", "system_memory")
KINDS.update({cause: {"signal": "silent"} for cause in SILENT})

BACKOFF_BASE_REAL_S = 10.0
BACKOFF_MAX_REAL_S = 360.0
RESTART_REAL_S = 120.0
"""Assumed: a restarted pod's start-up before its first step (checkpoint load, NCCL initialisation)."""
PULL_REAL_S = 120.0
"""Assumed: pulling the trainer image on a node that lacks it."""
CHECKPOINT_SAVE_REAL_S = 30.0
"""Assumed: saving a checkpoint on request or on SIGTERM, the job stopped meanwhile. The job's own
periodic saves are taken as asynchronous and free (as with torch.distributed.checkpoint's async_save)."""
GRACE_REAL_S = 30.0
"""A pod's ``terminationGracePeriodSeconds`` by default (kubernetes.io, "Pod Lifecycle"): a save on
SIGTERM must finish within it."""
WARN_REAL_S = 3600.0
"""How far ahead an announced fault is announced: Compute Engine's GPU host maintenance notice."""
