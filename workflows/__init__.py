"""Deterministic workflow code: no I/O, no clocks, no randomness outside the SDK's.

One package per concern (docs/architecture.md, "The workflows, read top-down"): ``device/`` (the device
incident's pipeline), ``waiting/`` (approval gates, guard permits, storm turns), ``closing/`` (heal, vendor
ticket, untaint), ``node/`` (node watch, quarantine, maintenance), ``fleet/`` (guard, storm turns, pool
fences), ``pod_reports/``, ``record/`` (what an incident says), and ``workload_stall.py``.
"""
