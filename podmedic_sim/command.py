"""``podmedic sim serve`` and ``podmedic sim bench``: the simulator from the command line."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path


def _serve(args: argparse.Namespace) -> int:
    from podmedic_sim.cluster import SimCluster
    from podmedic_sim.config import DriverPlugin, SimConfig, SimTimings

    drivers = args.driver or ["gpu.nvidia.com"]
    timings = SimTimings.model_validate_json(args.timings) if args.timings else SimTimings()
    cdi = {"plugins": {d: DriverPlugin(cdi_ids=args.cdi_ids) for d in drivers}} if args.cdi_ids else {}
    config = SimConfig(nodes=args.nodes, devices_per_node=args.devices_per_node, drivers=drivers, timings=timings,
                       checkpoint_every_steps=args.checkpoint_every_steps, taint_rule_version=args.taint_rule_version,
                       device_plugins=dict(args.device_plugin or []), feature_gates=dict(args.feature_gate or []),
                       **cdi)
    sim = SimCluster(config, api_only=args.api_only)
    if args.apf_qps:
        sim.flow.configure(args.apf_qps, args.apf_burst)
    kubeconfig = Path(args.kubeconfig) if args.kubeconfig else None
    sim.start(host=args.host, port=args.port, kubeconfig_path=kubeconfig, tls=args.tls)
    stopped = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopped.set())
    print(f"simulator serving on {sim.url}", flush=True)
    print(f"kubeconfig: {sim.kubeconfig_path}", flush=True)
    try:
        stopped.wait()
    finally:
        sim.stop()
    return 0


def _bench(args: argparse.Namespace) -> int:
    from podmedic_sim.bench import run_bench

    run_bench(args)
    return 0


def device_plugin(text: str) -> tuple[str, int]:
    """``RESOURCE=COUNT`` (``nvidia.com/gpu=8``) of ``--device-plugin``."""
    resource, sep, count = text.partition("=")
    if not sep or "/" not in resource or not count.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: expected RESOURCE=COUNT with an extended resource name, "
                                         "e.g. nvidia.com/gpu=8")
    return resource, int(count)


def _feature_gate(text: str) -> tuple[str, bool]:
    """``NAME=true|false`` of ``--feature-gate`` (kube-apiserver's ``--feature-gates`` spelling, one gate)."""
    name, sep, value = text.partition("=")
    if not sep or value.lower() not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=true or NAME=false, e.g. ResourceHealthStatus=false")
    return name, value.lower() == "true"


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``sim serve`` and ``sim bench`` to a parent parser's subcommands."""
    sim = subparsers.add_parser("sim", help="the Kubernetes cluster simulator")
    sub = sim.add_subparsers(dest="sim_command", required=True)
    serve = sub.add_parser("serve", help="serve a simulated cluster until SIGINT/SIGTERM")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=0, help="0 picks a free port")
    serve.add_argument("--nodes", type=int, default=4)
    serve.add_argument("--devices-per-node", type=int, default=8)
    serve.add_argument("--driver", action="append", help="DRA driver name (repeatable)")
    serve.add_argument("--kubeconfig", help="where to write the kubeconfig")
    serve.add_argument("--api-only", action="store_true", help="no simulated behaviours")
    serve.add_argument("--tls", action="store_true",
                       help="serve HTTPS under a self-signed certificate the kubeconfig trusts (kubectl sends a "
                            "token, e.g. one from `kubectl create token`, only over TLS)")
    serve.add_argument("--timings", help='SimTimings as JSON, e.g. \'{"workload_step_s": 0.05}\' (benchmarks)')
    serve.add_argument("--checkpoint-every-steps", type=int, default=0,
                       help="training workloads checkpoint on their own every N steps (0: never)")
    serve.add_argument("--taint-rule-version", choices=["v1", "v1beta2", "v1alpha3", "none"], default="v1",
                       help="where resource.k8s.io serves DeviceTaintRule: v1 (Kubernetes 1.37), v1beta2 (1.36), "
                            "v1alpha3 (1.35), none (DRADeviceTaints gate off); default %(default)s")
    serve.add_argument("--feature-gate", action="append", type=_feature_gate, metavar="NAME=true|false",
                       help="set a feature gate away from the emulated release's default (repeatable), e.g. "
                            "ResourceHealthStatus=false: pods then carry no allocatedResourcesStatus")
    serve.add_argument("--device-plugin", action="append", type=device_plugin, metavar="RESOURCE=COUNT",
                       help="a device plugin serving COUNT devices of an extended resource on every node "
                            "(repeatable), e.g. nvidia.com/gpu=8: node capacity, pod limits, and the devices' "
                            "health in allocatedResourcesStatus; fail one with POST /sim/v1/faults/plugin-device")
    serve.add_argument("--cdi-ids", choices=["none", "per-device", "shared"],
                       help="how every DRA driver's kubelet plugin names its devices in pod status: none "
                            "(<driver>/<pool>/<device>), per-device (<kind>=<claimUID>-<device>, as the "
                            "dra-example-driver) or shared (<kind>=all for a claim's devices); default: "
                            "per-device for gpu.nvidia.com, none for other drivers")
    serve.add_argument("--apf-qps", type=float, metavar="QPS",
                       help="API Priority and Fairness as a client sees it: each user (User-Agent) gets QPS "
                            "requests a second, the rest 429 with Retry-After (default: no limit)")
    serve.add_argument("--apf-burst", type=int, default=10, metavar="N",
                       help="requests a user may make at once above that rate (default %(default)s)")
    serve.set_defaults(func=_serve)
    bench = sub.add_parser("bench", help="measure the simulator's API server")
    from podmedic_sim.bench import add_arguments

    add_arguments(bench)
    bench.set_defaults(func=_bench)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m podmedic_sim.command``."""
    parser = argparse.ArgumentParser(prog="podmedic")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
