"""``python -m benchmarks ...``: the benchmark commands."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

DEFAULT_OUT = Path("bench/results/detection.json")


def _detection(args: argparse.Namespace) -> int:
    from benchmarks.detection import DetectionOptions, run_and_report

    opts = DetectionOptions(events=args.events, devices=args.devices, concurrency=args.concurrency,
                            batch=args.batch, batch_concurrency=args.batch_concurrency, nodes=args.nodes,
                            devices_per_node=args.devices_per_node, burst_concurrency=args.burst_concurrency,
                            temporal_dynamic=args.temporal_dynamic, profile=args.profile)
    run_and_report(opts, args.out)
    return 0


def _recovery(args: argparse.Namespace) -> int:
    from benchmarks.recovery import run_and_report

    run_and_report(args.pull_s, args.train_s, args.periodic_every, args.out)
    return 0


def _faults(args: argparse.Namespace) -> int:
    from benchmarks.faults.suite import SuiteOptions, run_and_report

    command = "python -m benchmarks faults" + (" --quick" if args.quick else "") + \
        "".join(f" --only {name}" for name in args.only)
    opts = SuiteOptions(quick=args.quick, only=tuple(args.only), keep_dir=args.keep_dir)
    # A quick run never overwrites the full suite's page unless --doc names it.
    doc = None if args.no_doc else args.doc or (None if args.quick else Path("docs/RELIABILITY.md"))
    report = run_and_report(opts, args.out, doc, command)
    return 0 if report.ok else 1


def add_bench_parser(subparsers: argparse._SubParsersAction[Any]) -> argparse.ArgumentParser:
    """Add ``bench`` with its benchmarks to a command tree; returns the ``bench`` parser."""
    bench: argparse.ArgumentParser = subparsers.add_parser(
        "bench", prog="python -m benchmarks",
        help="benchmarks: start their own stack, print figures, write JSON")
    which = bench.add_subparsers(dest="bench_command", required=True, metavar="BENCHMARK")
    p = which.add_parser(
        "detection", help="events/s accepted by the HTTP ingest, and event -> running incident latency",
        description="Starts Temporal, the simulator (NODES x DEVICES_PER_NODE GPUs), a worker and the HTTP "
                    "ingest; (a) sends EVENTS events of DEVICES devices repeating, as single events and as "
                    "batches; (b) fails every simulated GPU at once and measures send -> workflow running.")
    p.add_argument("--events", type=int, default=20_000, help="events per throughput run (default %(default)s)")
    p.add_argument("--devices", type=int, default=100, help="distinct devices in (a) (default %(default)s)")
    p.add_argument("--concurrency", type=int, default=64, help="connections for single events (default %(default)s)")
    p.add_argument("--batch", type=int, default=100, help="events per batch request (default %(default)s)")
    p.add_argument("--batch-concurrency", type=int, default=4, help="connections for batches (default %(default)s)")
    p.add_argument("--nodes", type=int, default=125, help="simulated nodes (default %(default)s)")
    p.add_argument("--devices-per-node", type=int, default=8, help="GPUs per node (default %(default)s)")
    p.add_argument("--burst-concurrency", type=int, default=250,
                   help="connections sending the burst (default %(default)s)")
    p.add_argument("--temporal-dynamic", action="append", default=[], metavar="KEY=VALUE",
                   help="extra Temporal dev server dynamic config (repeatable), e.g. "
                        "history.transferProcessorMaxPollRPS=10000")
    p.add_argument("--profile", type=Path, help="write a cProfile (by own time) of the ingest during (a) here")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="JSON results (default %(default)s)")
    p.set_defaults(func=_detection)
    r = which.add_parser(
        "recovery", help="progress a transient GPU fault costs a training job, and the image pull same-node saves",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Starts Temporal, the simulator (2 nodes x 2 GPUs, image pull PULL_S), the worker and the "
                    "ingest's pod-status watch. Runs a training Job twice; each time its GPU turns Unhealthy "
                    "(XID 94, transient):\n"
                    "  same-node:  podmedic checkpoints, evicts, and the replacement lands on the same node "
                    "(image present)\n"
                    "  other-node: the node has no free GPU left; the replacement goes elsewhere and pulls.\n"
                    "Prints, per run: steps at the fault, the podmedic-requested checkpoint's step, steps lost "
                    "(<= steps since that checkpoint), what would be lost without it, the replacement's pull "
                    "and creation-to-Ready times. Takes about 30 s.")
    r.add_argument("--pull-s", type=float, default=3.0, help="simulated image pull time (default %(default)s)")
    r.add_argument("--train-s", type=float, default=3.0,
                   help="training before the fault, at 20 steps/s (default %(default)s)")
    r.add_argument("--periodic-every", type=int, default=0,
                   help="the workload's own checkpoint every N steps, 0 = none (default %(default)s)")
    r.add_argument("--out", type=Path, default=Path("bench/results/recovery.json"),
                   help="JSON results (default %(default)s)")
    r.set_defaults(func=_recovery)
    f = which.add_parser(
        "faults", help="the fault suite: kill the worker, the dev server and the ingest, break the API; "
                       "count duplicated effects and lost events",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Starts the stack as separate processes (Temporal dev server on a SQLite file, simulator, "
                    "vendor desk, worker, ingest) and runs:\n"
                    "  worker-kill:    the worker SIGKILLed at every stage of an incident, then restarted\n"
                    "  server-restart: the dev server stopped (SIGTERM, SIGKILL) and restarted on the same DB\n"
                    "  ingest-kill:    the ingest SIGKILLed right after a 202, and while a device fails\n"
                    "  ingest-leader-kill: two ingest replicas, the watching leader SIGKILLed mid-burst\n"
                    "  api-faults:     latency, 429/500/503 on 30% of calls, 409s, watch disconnects\n"
                    "  fail-fast:      403 and 422 on the taint step fail it at once\n"
                    "Duplicated effects are counted by the simulator's request ledger and the vendor desk. "
                    "Exits 1 unless every scenario has 0 duplicated effects, 0 lost events and every incident "
                    "completed. Full: about 5 minutes; --quick: about 2.")
    f.add_argument("--quick", action="store_true", help="a smaller run of every scenario (make test)")
    f.add_argument("--only", action="append", default=[], metavar="SCENARIO",
                   choices=["worker-kill", "server-restart", "ingest-kill", "ingest-leader-kill", "api-faults",
                            "fail-fast"],
                   help="run only this scenario (repeatable)")
    f.add_argument("--out", type=Path, default=Path("bench/results/faults.json"),
                   help="JSON results (default %(default)s)")
    f.add_argument("--doc", type=Path, help="Markdown table (default docs/RELIABILITY.md; none with --quick)")
    f.add_argument("--no-doc", action="store_true", help="do not write the Markdown table")
    f.add_argument("--keep-dir", type=Path, help="run the stack under this directory and keep its logs")
    f.set_defaults(func=_faults)
    from benchmarks.commands import add_commands

    add_commands(which)
    return bench


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks detection [flags]``."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    sub = parser.add_subparsers(dest="command", required=True, metavar="BENCHMARK")
    add_bench_parser(sub)
    # ``bench`` is implied: ``python -m benchmarks detection``.
    args = parser.parse_args(["bench", *(argv if argv is not None else sys.argv[1:])])
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
