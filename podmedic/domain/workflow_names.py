"""podmedic's workflow types and the messages sent to them from outside, by name.

The ingest, the CLI and the activities start, signal and update workflows by these names instead of
importing the workflow code: the foundation, the ingest and the activities never reach up into
``workflows/``. Each workflow declares itself and its handlers with the same constants
(``@workflow.defn(name=...)``, ``@workflow.signal(name=...)``), so a name cannot drift from its
handler. A name is what running workflows' histories recorded: renaming one strands their runs.
"""

from __future__ import annotations

# -- workflow types ----------------------------------------------------------------------------
DEVICE_INCIDENT = "DeviceIncident"
NODE_INCIDENT = "NodeIncident"
CONFIG_INCIDENT = "ConfigIncident"
UNRESOLVED_DEVICE = "UnresolvedDeviceIncident"
WORKLOAD_STALL = "WorkloadStall"
NODE_MAINTENANCE = "NodeMaintenance"
POOL_FENCE = "PoolFence"
STORM_TURNS = "StormTurns"
FLEET_GUARD = "FleetGuard"
FLEET_INCIDENT = "FleetIncident"

# -- what the ingest and the activities send ---------------------------------------------------
HEALTH_EVENT = "health_event"
"""DeviceIncident: a device health event (opens the incident as its start signal)."""
RESOLVE = "resolve"
"""DeviceIncident and NodeIncident: the device is fixed (a signal from a vendor's ticket, an update from
an operator)."""
PLUGIN_DEVICE_FAILED = "plugin_device_failed"
"""NodeIncident: a device plugin's device is not Healthy (opens the node incident)."""
PLUGIN_DEVICE_HEALTHY = "plugin_device_healthy"
"""NodeIncident: a device plugin's device is Healthy again."""
NOTICE_CHANGED = "notice_changed"
"""NodeMaintenance: a new reading of the node's maintenance notice (opens the incident)."""
DEVICES_FAILED = "devices_failed"
"""PoolFence: devices of the pool failed within the storm window (opens the fence)."""
SIGHTED = "sighted"
"""FleetGuard: failed devices the ingest saw (they count toward a storm before their incidents ask)."""
POLICY_IN_FORCE = "policy_in_force"
"""FleetGuard: the policy file's ``guard:`` section, as read now."""
ASK_MANY = "ask_many"
"""FleetGuard (update): permit requests, answered in order."""
RELEASE = "release"
"""FleetGuard: a permit given back."""

