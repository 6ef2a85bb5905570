"""``podmedic sim bench``: API server throughput through the unmodified ``kubernetes`` client.

The simulator runs in a child process (as ``sim serve`` does) so that client and server
each get a core; figures are printed and written as JSON.
"""

from __future__ import annotations

import argparse
import http.client
import importlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

DEFAULT_JSON = Path("bench/results/sim.json")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``sim bench`` (defaults: the full 10k-node, 80k-device cluster)."""
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--devices-per-node", type=int, default=8)
    parser.add_argument("--pods", type=int, default=10_000, help="pods created, then listed")
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of the GET phase")
    parser.add_argument("--threads", type=int, default=4, help="client threads")
    parser.add_argument("--watch-events", type=int, default=2_000)
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write results")


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"b": "1"}},
        "spec": {
            "containers": [{"name": "c", "image": "registry.local/app:1"}],
            "nodeName": "bench-ghost",
            "schedulerName": "bench-none",
        },
    }


def _parallel(threads: int, items: list[Any], fn: Callable[[Any], Any]) -> float:
    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(fn, items))
    return time.perf_counter() - start


def _start_server(
    args: argparse.Namespace, kubeconfig: Path
) -> tuple[subprocess.Popen[str], float]:
    cmd = [
        sys.executable,
        "-m",
        "podmedic_sim.command",
        "sim",
        "serve",
        "--nodes",
        str(args.nodes),
        "--devices-per-node",
        str(args.devices_per_node),
        "--kubeconfig",
        str(kubeconfig),
    ]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("kubeconfig:"):
            return proc, time.perf_counter() - start
    raise RuntimeError("the simulator exited before serving")


def run_bench(args: argparse.Namespace) -> dict[str, Any]:
    """Run every phase, print the figures and write them to ``args.json``."""
    # Only the benchmark (a client of the simulator) uses the kubernetes package.
    k8s = importlib.import_module("kubernetes")
    watch_mod = importlib.import_module("kubernetes.watch")
    results: dict[str, Any] = {
        "nodes": args.nodes,
        "devices": args.nodes * args.devices_per_node,
        "pods": args.pods,
        "threads": args.threads,
    }
    with tempfile.TemporaryDirectory() as tmp:
        kubeconfig = Path(tmp) / "kubeconfig"
        proc, startup = _start_server(args, kubeconfig)
        results["startup_s"] = round(startup, 2)
        results["rss_after_start_mib"] = round(_rss_mib(proc.pid), 1)
        try:
            api = k8s.config.new_client_from_config(str(kubeconfig))
            api.configuration.connection_pool_maxsize = args.threads * 2
            api.rest_client.pool_manager.connection_pool_kw["maxsize"] = args.threads * 2
            v1 = k8s.client.CoreV1Api(api)
            v1.create_namespace(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}
            )
            names = [f"p-{i:05d}" for i in range(args.pods)]
            took = _parallel(
                args.threads, names, lambda n: v1.create_namespaced_pod("bench", _pod(n))
            )
            results["create_validated_per_s"] = round(args.pods / took, 1)

            count = [0]
            deadline = time.perf_counter() + args.seconds

            def getter(i: int) -> None:
                while time.perf_counter() < deadline:
                    v1.read_namespaced_pod(names[(i * 7919 + count[0]) % len(names)], "bench")
                    count[0] += 1

            _parallel(args.threads, list(range(args.threads)), getter)
            results["get_per_s"] = round(count[0] / args.seconds, 1)

            results["get_raw_http_per_s"] = _raw_get_rate(api.configuration.host, args.seconds)
            start = time.perf_counter()
            listed = v1.list_namespaced_pod("bench")
            results["list_pods_client_s"] = round(time.perf_counter() - start, 3)
            assert len(listed.items) == args.pods
            start = time.perf_counter()
            with urllib.request.urlopen(
                f"{api.configuration.host}/api/v1/namespaces/bench/pods"
            ) as r:
                r.read()
            results["list_pods_http_s"] = round(time.perf_counter() - start, 3)
            start = time.perf_counter()
            v1.list_node()
            results["list_nodes_client_s"] = round(time.perf_counter() - start, 3)

            results["watch_events_per_s"] = _watch_rate(v1, watch_mod, args.watch_events)
            results["rss_end_mib"] = round(_rss_mib(proc.pid), 1)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(json.dumps(results, indent=2))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2) + "\n")
    return results


def _raw_get_rate(url: str, seconds: float) -> float:
    """GET/s over one keep-alive connection without the client (the server's own ceiling)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port))
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        conn.request("GET", "/api/v1/namespaces/bench/pods/p-00000")
        conn.getresponse().read()
        count += 1
    conn.close()
    return round(count / seconds, 1)


def _watch_rate(v1: Any, watch_mod: Any, events: int) -> float:
    """Events/s a watch delivers (decoded by ``Watch.stream``) while another thread writes."""
    v1.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bw"}})
    rv = v1.list_namespaced_pod("bw").metadata.resource_version
    writer = threading.Thread(
        target=lambda: [v1.create_namespaced_pod("bw", _pod(f"w-{i:05d}")) for i in range(events)]
    )
    seen, start = 0, time.perf_counter()
    writer.start()
    w = watch_mod.Watch()
    for _ in w.stream(v1.list_namespaced_pod, "bw", resource_version=rv, timeout_seconds=120):
        seen += 1
        if seen >= events:
            w.stop()
    writer.join()
    return round(seen / (time.perf_counter() - start), 1)


def main() -> None:
    """``python -m podmedic_sim.bench``."""
    parser = argparse.ArgumentParser(prog="podmedic sim bench")
    add_arguments(parser)
    run_bench(parser.parse_args())


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
