"""One `podmedic up` stack for the operator tests (CLI, pod Events, report, browser).

The policy gates NoExecute taints on every driver, so a permanent fault waits for an
operator; the vendor desk never resolves tickets by itself, so `incidents resolve` does.
Devices in pools ``rack-8`` (browser) and ``rack-9`` (CLI) exist in no node: incidents about
them find no pods, which keeps them clear of the training jobs the Events test starts. Each
pool sees at most two failures, below the node correlation's three: a third device of one pool
would open a node incident that covers the devices, and they would get no gated taint.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e_operators.stack import Ops
from workers.stack.up import Stack, StackOptions

POLICY = """
guard: {enabled: false}
drivers:
  default:
    repeat_offenders: {incidents: 0}
    checkpoint: {timeout_s: 10, poll_s: 0.3}
    recovery:
      transient:
        - {action: in_place_restart, attempts: 1, timeout_s: 15}
        - {action: same_node, attempts: 1, timeout_s: 60}
      permanent:
        - {action: same_node, attempts: 1, timeout_s: 60}
      verify_poll_s: 0.3
    close: {heal_wait_s: 5, anti_flap_s: 1, poll_s: 0.5}
    ticket: {url: "${PODMEDIC_TICKET_URL}", poll_s: 1, wait_resolution_s: 600}
    approvals: {gates: [{action: taint_no_execute}], timeout_s: 900, on_timeout: abort}
  gpu.nvidia.com:
    detection: {corroborate_s: 15}   # the XID comes from the node agent, not pod status
    checkpoint: {timeout_s: 10}
    classification:
      codes: {permanent: [79, 48], container_code: [13, 31, 43], ignore: [109]}
"""
# Laid over the embedded policy (as every policy file is): the guard and the repeat-offender rule are
# turned off explicitly, and gpu.nvidia.com's own checkpoint timeout (180 s embedded) is set here.


@pytest.fixture(scope="package")
def ops(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ops]:
    state_dir = tmp_path_factory.mktemp("ops")
    policy = state_dir / "policy.yaml"
    policy.write_text(POLICY)
    options = StackOptions(state_dir=state_dir / "up", policy=policy, nodes=2, devices_per_node=4,
                           vendor_resolve_s=3600)
    with Stack(options) as stack:
        yield Ops(stack=stack, state_dir=state_dir / "up")
