"""The ``python -m benchmarks`` commands of the published figures: orchestration, single, storm, goodput,
memory and report (``docs/BENCHMARKS.md``). Each prints a table and writes JSON under ``bench/results/``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from benchmarks.goodput_faults import INTERVAL_H, MIX
from benchmarks.results import RESULTS

SERVER_CHOICES = ("default", "tuned")
POLICY_CHOICES = ("podmedic", "k8s-only", "k8s-only+taints", "in-job", "podmedic+in-job", "cordon-drain",
                  "control")  # benchmarks.goodput.RUN: what a table runs unless told
# benchmarks.goodput_run.ABLATIONS: run only when named
ABLATION_CHOICES = ("podmedic-no-hang", "podmedic-no-stall", "podmedic-no-fail-fast")
KNOBS = ("collective_timeout_real_s", "checkpoint_save_real_s")  # benchmarks.goodput_sensitivity.SWEEPS


def _servers(value: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    bad = [n for n in names if n not in SERVER_CHOICES]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"{','.join(bad) or value!r} is not one of "
                                         f"{', '.join(SERVER_CHOICES)} (comma-separated)")
    return names


def _per_node(value: str) -> int:
    from benchmarks.settings import DEVICES_PER_NODE

    try:
        n = int(value)
    except ValueError:
        n = 0
    if not 1 <= n <= DEVICES_PER_NODE:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number from 1 to {DEVICES_PER_NODE} "
                                         f"(the simulated nodes have {DEVICES_PER_NODE} GPUs)")
    return n


def _orchestration(args: argparse.Namespace) -> int:
    from benchmarks.orchestration import run_and_print

    run_and_print("orchestration", args.incidents, args.servers, args.json, per_node=args.per_node,
                  rounds=args.rounds)
    return 0


def _cost(args: argparse.Namespace) -> int:
    from benchmarks.cost import run_and_print

    run_and_print(args.incidents, args.server, args.json, runs=args.runs)
    return 0


def _single(args: argparse.Namespace) -> int:
    from benchmarks.orchestration import run_and_print

    run_and_print("single", args.incidents, args.servers, args.json)
    return 0


def _storm(args: argparse.Namespace) -> int:
    from benchmarks.api_budget import ApiBudget
    from benchmarks.storm import run_and_print

    run_and_print(args.nodes, args.devices_per_node, args.server, args.json, node_quarantine=args.node_quarantine,
                  storm_fence=args.storm_fence, wait_s=args.wait_s,
                  budget=ApiBudget(kube_qps=args.kube_qps, kube_burst=args.kube_burst))
    return 0


def _storm_guard(args: argparse.Namespace) -> int:
    from benchmarks.storm_guard import run_and_print

    run_and_print(args.nodes, args.devices_per_node, args.server, args.json, observe_s=args.observe_s)
    return 0


def _goodput(args: argparse.Namespace) -> int:
    from benchmarks.goodput import run_and_print

    run_and_print(args.jobs, args.faults, args.seed, args.seeds, args.duration_s, args.interval_h, args.json,
                  ranks=args.ranks, policies=tuple(args.policy or POLICY_CHOICES), merge=args.merge,
                  jobset=args.jobset, collective_timeout_real_s=args.collective_timeout_min * 60,
                  merge_from=tuple(args.merge_from or ()), causes=tuple(args.cause or ()),
                  in_place_restart=args.in_place_restart)
    return 0


def _goodput_sensitivity(args: argparse.Namespace) -> int:
    from benchmarks.goodput_sensitivity import run_and_print

    run_and_print(args.jobs, args.faults, args.seed, args.seeds, args.duration_s, args.knob or list(KNOBS),
                  args.json, ranks=args.ranks)
    return 0


def _at_least_one(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number of 1 or more")
    return n


def _memory(args: argparse.Namespace) -> int:
    from benchmarks.memory import run_and_print

    run_and_print(args.incidents, args.nodes, args.json)
    return 0


def _report(args: argparse.Namespace) -> int:
    from benchmarks.report import regenerate

    regenerate(quick=args.quick, only_docs=args.only_docs)
    return 0


def add_commands(which: argparse._SubParsersAction[Any]) -> None:
    """Add this module's benchmarks to ``python -m benchmarks``."""
    servers: dict[str, Any] = {"type": _servers, "default": list(SERVER_CHOICES),
                               "help": "Temporal dev server settings, comma-separated (default default,tuned)"}
    p = which.add_parser("orchestration", help="N incidents through the full pipeline vs bare Temporal, per server")
    p.add_argument("--incidents", type=int, default=500, help="incidents at once (default %(default)s)")
    p.add_argument("--per-node", type=_per_node, default=1, metavar="N",
                   help="failing devices per node, 1 to 8 (default %(default)s: independent device incidents; "
                        "3 or more make each node a node incident, as in a storm)")
    p.add_argument("--rounds", type=_at_least_one, default=3, metavar="R",
                   help="bare and podmedic rounds, alternating, each on incidents of its own; the ratio is their "
                        "median (default %(default)s)")
    p.add_argument("--servers", **servers)
    p.add_argument("--json", type=Path, default=RESULTS / "orchestration.json")
    p.set_defaults(func=_orchestration)
    p = which.add_parser("cost", help="one incident's cost, process by process (CPU, API requests, history "
                                      "events), against bare Temporal workflows of as many activities")
    p.add_argument("--incidents", type=_at_least_one, default=200, help="incidents, and bare workflows "
                                                                         "(default %(default)s)")
    p.add_argument("--server", choices=SERVER_CHOICES, default="tuned")
    p.add_argument("--runs", type=_at_least_one, default=1, metavar="R",
                   help="whole runs, each on a fresh stack (about 4 minutes each at 200 incidents); the figures "
                        "are the run with the median CPU ratio, every run's ratio beside them (default %(default)s)")
    p.add_argument("--json", type=Path, default=RESULTS / "cost.json")
    p.set_defaults(func=_cost)
    p = which.add_parser("single", help="one incident at a time: event -> taint latency, per server")
    p.add_argument("--incidents", type=int, default=30, help="incidents, one after the other (default %(default)s)")
    p.add_argument("--servers", **servers)
    p.add_argument("--json", type=Path, default=RESULTS / "single.json")
    p.set_defaults(func=_single)
    p = which.add_parser("storm", help="every GPU of NODES nodes fails at once: time until all tainted, recovered")
    p.add_argument("--nodes", type=int, default=125)
    p.add_argument("--devices-per-node", type=int, default=8)
    p.add_argument("--server", choices=SERVER_CHOICES, default="tuned")
    p.add_argument("--node-quarantine", action="store_true",
                   help="the default policy's node quarantine on: nodes whose devices fail together are cordoned "
                        "and tainted as one, and that counts as their devices' taint (default off: a "
                        "DeviceTaintRule per device)")
    p.add_argument("--no-storm-fence", dest="storm_fence", action="store_false",
                   help="the default policy's storm fence off: no pool is fenced ahead of its devices' incidents, "
                        "each device waits for its own rule (default on: from 50 devices a minute, the ingest "
                        "fences each pool with a failed device first)")
    p.add_argument("--wait-s", type=float, default=900,
                   help="how long to wait for every incident to close before the figures are read (default 900); "
                        "an incident still running then counts as unfinished, its fence read from its history")
    p.add_argument("--kube-qps", type=float, default=0.0, metavar="Q",
                   help="the worker's Kubernetes API requests a second at most (PODMEDIC_KUBE_QPS; the manifests "
                        "set 50), and an API Priority and Fairness budget a fifth above it on the simulator: "
                        "reports what the server admitted and refused (429) of the worker's requests "
                        "(default 0: no limit, no budget)")
    p.add_argument("--kube-burst", type=int, default=100, metavar="B",
                   help="requests the worker may make at once above Q (PODMEDIC_KUBE_BURST; default %(default)s)")
    p.add_argument("--json", type=Path, default=RESULTS / "storm.json")
    p.set_defaults(func=_storm)
    p = which.add_parser(
        "storm-guard", help="every GPU of NODES nodes fails for good under the shipped fleet guard: how soon the "
                            "fleet incident opens, how many NoExecute rules at once",
        description="Fails every device at once (XID 79, permanent) with the embedded default policy's fleet guard "
                    "as it ships. Prints the time from crossing the storm threshold (worked out from the shipped "
                    "storm share and the simulated fleet) to the fleet incident's start, and the most NoExecute "
                    "DeviceTaintRules seen at once (listed every 0.5 s) before the trip, while tripped and after "
                    "`guard resume`, against guard.max_devices_tainted.")
    p.add_argument("--nodes", type=int, default=125)
    p.add_argument("--devices-per-node", type=int, default=8)
    p.add_argument("--server", choices=SERVER_CHOICES, default="tuned")
    p.add_argument("--observe-s", type=float, default=120.0,
                   help="seconds watched while tripped, and again after the resume (default %(default)s)")
    p.add_argument("--json", type=Path, default=RESULTS / "storm-guard.json")
    p.set_defaults(func=_storm_guard)
    p = which.add_parser("goodput", help="training jobs under Llama 3's interruptions: podmedic against the baselines")
    p.add_argument("--jobs", type=int, default=4, help="training jobs per run (default %(default)s)")
    p.add_argument("--ranks", type=_at_least_one, default=1, metavar="N",
                   help="8-GPU pods per job, a node each (default %(default)s: single-node jobs)")
    p.add_argument("--jobset", action="store_true",
                   help="with --ranks N: each job a JobSet of N one-pod Jobs (backoffLimit 0, failurePolicy "
                        "RestartJobSet: one failed pod restarts them all)")
    p.add_argument("--in-place-restart", action="store_true",
                   help="with --jobset: the JobSets restart in place (restartStrategy InPlaceRestart, KEP-467: a "
                        "failed pod recreated alone, the others restarted in place); write it to its own --json")
    p.add_argument("--faults", type=int, default=4, help="faults per run (default %(default)s)")
    p.add_argument("--seed", type=int, default=1, help="first seed (default %(default)s)")
    p.add_argument("--seeds", type=int, default=8, help="seeds run, from --seed on (default %(default)s; 0 with "
                                                        "--merge-from: only merge)")
    p.add_argument("--interval-h", type=float, default=INTERVAL_H,
                   help="real hours between one job's interruptions; sets the run's length (default: Llama 3's, "
                        "466 in 54 days = %(default).2f h)")
    p.add_argument("--duration-s", type=float, default=None,
                   help="simulated seconds per run instead (then the interval follows from it)")
    p.add_argument("--collective-timeout-min", type=float, default=10.0,
                   help="the trainer's NCCL timeout in real minutes (default %(default)s, PyTorch's)")
    p.add_argument("--policy", action="append", choices=POLICY_CHOICES + ABLATION_CHOICES,
                   help="run only this policy (repeatable; default: all, and the fault-free control); the "
                        "ablations, each run only when named: podmedic-no-hang (checkpoint.hang_s 0), "
                        "podmedic-no-stall (detection.stall.after_s 0), podmedic-no-fail-fast (both 0)")
    p.add_argument("--merge", action="store_true",
                   help="keep the runs already in --json (same setup) and add or replace these: a table measured "
                        "a few seeds at a time")
    p.add_argument("--merge-from", type=Path, action="append", metavar="FILE",
                   help="also keep the runs of FILE (same setup and model; repeatable): seeds measured by "
                        "processes side by side, made one table (with --seeds 0, nothing is run)")
    p.add_argument("--cause", action="append", choices=sorted(MIX), metavar="CAUSE",
                   help="draw only this of Llama 3's causes (repeatable; a targeted run of one kind of fault, "
                        "e.g. nccl_watchdog: a hang no device reports); write it to its own --json")
    p.add_argument("--json", type=Path, default=RESULTS / "goodput.json")
    p.set_defaults(func=_goodput)
    p = which.add_parser("goodput-sensitivity",
                         help="goodput with each chosen value varied: the collective timeout, the checkpoint cost")
    p.add_argument("--jobs", type=int, default=8, help="training jobs per run (default %(default)s)")
    p.add_argument("--faults", type=int, default=16, help="faults per run (default %(default)s)")
    p.add_argument("--duration-s", type=float, default=45.0,
                   help="simulated seconds per run (default %(default)s: with the defaults, 8x Llama 3's rate)")
    p.add_argument("--seed", type=int, default=1, help="first seed (default %(default)s)")
    p.add_argument("--seeds", type=int, default=2, help="seeds per point (default %(default)s)")
    p.add_argument("--knob", action="append", choices=KNOBS, help="vary only this (repeatable; default: all)")
    p.add_argument("--ranks", type=_at_least_one, default=1, metavar="N", help="as for goodput")
    p.add_argument("--json", type=Path, default=RESULTS / "goodput-sensitivity.json")
    p.set_defaults(func=_goodput_sensitivity)
    p = which.add_parser("memory", help="RSS of the worker and the ingest with open incidents and a large cluster")
    p.add_argument("--incidents", type=int, default=1000)
    p.add_argument("--nodes", type=int, default=10_000)
    p.add_argument("--json", type=Path, default=RESULTS / "memory.json")
    p.set_defaults(func=_memory)
    p = which.add_parser("report", help="run every benchmark above and regenerate docs/BENCHMARKS.md and its plots")
    p.add_argument("--quick", action="store_true", help="tiny sizes (a minute): checks the command, not the figures")
    p.add_argument("--only-docs", action="store_true", help="no runs: rebuild the doc and plots from the JSON")
    p.set_defaults(func=_report)
