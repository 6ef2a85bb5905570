"""The fleet guard's policy: the ``guard:`` section beside ``drivers:`` in the policy file.

Kept apart from the guard's messages (``podmedic/domain/fleet_guard/messages.py``) because every driver's policy
carries it: the loader copies the section into each resolved ``DriverPolicy``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from podmedic.domain.base import ConfigModel
from podmedic.domain.spares import SparesPolicy


class StormPolicy(ConfigModel):
    """A jump in unhealthy devices that points at something other than the devices.

    A detector bug, a power event or a driver crash makes many devices look failed at once;
    acting on all of them would do more harm than the faults. When the share of a driver's
    devices newly unhealthy within ``window_s`` reaches ``share`` (and at least ``min_devices``),
    the guard trips: every disruptive step waits, fleet-wide, and a fleet incident says why.
    """

    enabled: bool = Field(True, description="Trip on storms at all.")
    share: float = Field(0.30, gt=0, le=1, description="Share of a driver's devices newly unhealthy that trips.")
    window_s: float = Field(300.0, gt=0, description="The window the jump is measured in.")
    min_devices: int = Field(10, ge=1, description="Never trip on fewer unhealthy devices than this.")
    clear_s: float = Field(900.0, gt=0, description="Resume by itself once the share stayed under the threshold "
                                                    "this long; an operator can resume sooner.")


class GuardPolicy(ConfigModel):
    """Blast-radius limits, checked before every disruptive step of every incident.

    ``on_limit``: ``wait`` (the incident waits in phase ``Throttled`` until the guard has room)
    or ``ask_operator`` (it waits at an approval gate; an operator's approval lets it past the
    limit). A tripped storm always waits for ``podmedic guard resume`` or ``storm.clear_s``.
    """

    enabled: bool = Field(True, description="Off: incidents act without asking (benchmarks of storms).")
    dry_run: bool = Field(False, description="Engine-wide dry run: decisions recorded, nothing in the cluster "
                                             "changes, no ticket filed (per driver: drivers.<name>.dry_run).")
    on_limit: Literal["wait", "ask_operator"] = "wait"
    max_devices_tainted: int = Field(50, ge=1, description="Devices under remediation (tainted, restarted, "
                                                           "rescheduled) at once, fleet-wide.")
    max_nodes_disrupted: int = Field(10, ge=1, description="Distinct nodes with a device or node under "
                                                           "remediation at once.")
    window_s: float = Field(600.0, gt=0, description="The window the shares below are counted in.")
    max_driver_share: float = Field(0.10, gt=0, le=1, description="Share of a driver's devices remediated "
                                                                  "within the window.")
    max_pool_share: float = Field(0.50, gt=0, le=1, description="Share of one resource pool's devices (a node's, "
                                                                "for per-node pools) remediated within the window.")
    min_devices: int = Field(3, ge=1, description="The shares never hold back fewer devices than this in the "
                                                  "window (10% of 8 GPUs would otherwise be none).")
    retry_s: float = Field(60.0, gt=0, description="A throttled incident asks again at least this often (it is "
                                                   "also woken when room frees).")
    fleet_refresh_s: float = Field(300.0, gt=0, description="How often fleet sizes are read from ResourceSlices.")
    reclaim_s: float = Field(30.0, gt=0, description="How often the guard checks that the incidents holding "
                                                     "permits still run while another waits (at least every "
                                                     "fleet_refresh_s otherwise): a run terminated or reset from "
                                                     "Temporal gives nothing back, so its permit is freed there.")
    sweep_s: float = Field(300.0, gt=0, description="How often the guard sweeps podmedic's DeviceTaintRules for "
                                                   "holders whose runs closed without letting go "
                                                   "(activities/rule_sweep.py).")
    sweep_grace_s: float = Field(120.0, ge=0, description="How long a holder's run must have been closed before "
                                                          "the sweep takes it off a rule.")
    storm: StormPolicy = Field(default_factory=StormPolicy)
    spares: SparesPolicy = Field(default_factory=SparesPolicy)
