"""The API server's proxy subresources: pod proxy to the workload, node proxy to the kubelet.

- ``/api/v1/namespaces/{ns}/pods/{[scheme:]name[:port]}/proxy/{path}`` reaches a port of a
  running pod: an endpoint registered for it (``POST /sim/v1/proxy/endpoints``: a real
  process, e.g. the podmedic.workload helper) or the simulated training workload's
  checkpoint endpoint; nothing listening answers 503 like a refused connection.
- ``/api/v1/nodes/{node}/proxy/checkpoint/{ns}/{pod}/{container}`` is the kubelet's
  checkpoint API (``ContainerCheckpoint``): 404 for unknown pods and containers, like the
  real kubelet, and ``{"items": ["/var/lib/kubelet/checkpoints/checkpoint-<pod>_<ns>-<container>-<time>.tar"]}``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp import web

from podmedic_sim.handlers_common import ApiError, error_response

if TYPE_CHECKING:
    from podmedic_sim.engine import SimEngine

EndpointKey = tuple[str, str, int]
CHECKPOINT_DIR = "/var/lib/kubelet/checkpoints"


def split_pod_target(target: str) -> tuple[str, str, str | None]:
    """``[scheme:]name[:port]`` → (scheme, name, port or ``None``), as the API server reads it."""
    parts = target.split(":")
    if len(parts) == 3:
        return parts[0] or "http", parts[1], parts[2] or None
    if len(parts) == 2:
        return "http", parts[0], parts[1] or None
    return "http", target, None


def _port_number(pod: dict[str, Any], port: str | None) -> int | None:
    """A numeric port, or a named container port resolved in the pod spec; ``None`` if unknown."""
    if port is None:
        return 80
    if port.isdigit():
        return int(port)
    for c in (pod.get("spec") or {}).get("containers") or []:
        for p in c.get("ports") or []:
            if p.get("name") == port and p.get("containerPort"):
                return int(p["containerPort"])
    return None


class Proxy:
    """Pod and node proxy routes of one simulated cluster."""

    def __init__(self, engine: SimEngine) -> None:
        self.engine = engine
        self.endpoints: dict[EndpointKey, str] = {}
        self.kubelet_checkpoints: list[dict[str, str]] = []

    def routes(self) -> list[web.RouteDef]:
        """Routes that must be matched before the generic ``/api/v1/{rest}`` dispatcher."""
        return [
            web.route("*", "/api/v1/namespaces/{ns}/pods/{target}/proxy", self.pod_proxy),
            web.route("*", "/api/v1/namespaces/{ns}/pods/{target}/proxy/{path:.*}", self.pod_proxy),
            web.route("*", "/api/v1/nodes/{node}/proxy", self.node_proxy),
            web.route("*", "/api/v1/nodes/{node}/proxy/{path:.*}", self.node_proxy),
        ]

    def sim_routes(self) -> list[web.RouteDef]:
        """``POST /sim/v1/proxy/endpoints {namespace, pod, port, url}``: a process answers for a pod port."""
        return [web.post("/sim/v1/proxy/endpoints", self.register)]

    async def register(self, request: web.Request) -> web.Response:
        try:
            data = await request.json()
            key = (str(data["namespace"]), str(data["pod"]), int(data["port"]))
            url = str(data["url"])
        except (ValueError, KeyError, TypeError) as err:
            return web.json_response({"error": f"body: needs namespace, pod, port (int) and url: {err}"}, status=400)
        if not url.startswith(("http://", "https://")):
            return web.json_response({"error": "url: must be an http(s) URL"}, status=400)
        self.endpoints[key] = url.rstrip("/")
        return web.json_response({"registered": f"{key[0]}/{key[1]}:{key[2]}", "url": url}, status=201)

    # -- pod proxy ---------------------------------------------------------------------
    async def pod_proxy(self, request: web.Request) -> web.StreamResponse:
        ns = request.match_info["ns"]
        _, name, port_text = split_pod_target(request.match_info["target"])
        path = "/" + request.match_info.get("path", "")
        pod = self.engine.store.find("pods", ns, name)
        if pod is None:
            return error_response(ApiError(404, f'pods "{name}" not found', "NotFound", name=name))
        port = _port_number(pod, port_text)
        ip = (pod.get("status") or {}).get("podIP")
        if port is None or not ip or (pod.get("status") or {}).get("phase") != "Running":
            return error_response(ApiError(503, f"error trying to reach service: pod {name} is not running "
                                           f"or has no port {port_text}", "ServiceUnavailable"))
        raw = await request.read()
        url = self.endpoints.get((ns, name, port))
        if url is not None:
            return await self._forward(request, url + path, raw)
        if request.method != "POST":
            return web.json_response({"error": "method not allowed"}, status=405)
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        status, answer = await self.engine.workloads.http_checkpoint((ns, name), port, path, body)
        if status == 503:
            return error_response(ApiError(503, f"error trying to reach service: {answer.get('error')}",
                                           "ServiceUnavailable"))
        return web.json_response(answer, status=status)

    async def _forward(self, request: web.Request, url: str, raw: bytes) -> web.StreamResponse:
        headers = {k: v for k, v in request.headers.items()
                   if k.lower() in ("content-type", "accept", "idempotency-key")}
        try:
            async with aiohttp.ClientSession() as session, session.request(
                request.method, url, data=raw, headers=headers, params=request.query
            ) as resp:
                body = await resp.read()
                ctype = resp.headers.get("Content-Type", "application/octet-stream").split(";")[0]
                return web.Response(status=resp.status, body=body, content_type=ctype)
        except aiohttp.ClientError as err:
            return error_response(ApiError(503, f"error trying to reach service: {err}", "ServiceUnavailable"))

    # -- node proxy: the kubelet ---------------------------------------------------------
    async def node_proxy(self, request: web.Request) -> web.StreamResponse:
        node = request.match_info["node"].split(":")[0]
        if self.engine.store.find("nodes", None, node) is None:
            return error_response(ApiError(404, f'nodes "{node}" not found', "NotFound", name=node))
        parts = request.match_info.get("path", "").split("/")
        if len(parts) != 4 or parts[0] != "checkpoint" or not all(parts):
            return web.Response(status=404, text="404 page not found\n")
        if request.method != "POST":
            return web.Response(status=405, text="405: Method Not Allowed\n")
        return await self._checkpoint(node, parts[1], parts[2], parts[3])

    async def _checkpoint(self, node: str, ns: str, name: str, container: str) -> web.StreamResponse:
        rt = self.engine.kubelet.pods.get((ns, name))
        if rt is None or rt.node != node or rt.deleting:
            return web.Response(status=404, text=f'pod does not exist: "{ns}/{name}"\n')
        c = next((c for c in rt.containers if c.name == container), None)
        if c is None:
            return web.Response(status=404, text=f'container does not exist: "{container}"\n')
        if c.state != "running":
            return web.Response(status=500, text=f"checkpointing of {ns}/{name}/{container} failed "
                                                 f"(container is {c.state})\n")
        gen = c.gen
        await asyncio.sleep(self.engine.config.timings.checkpoint_save_s)
        if c.gen != gen or c.state != "running":
            return web.Response(status=500, text=f"checkpointing of {ns}/{name}/{container} failed "
                                                 "(container stopped during checkpoint)\n")
        stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        archive = f"{CHECKPOINT_DIR}/checkpoint-{name}_{ns}-{container}-{stamp}.tar"
        job = self.engine.workloads.job_of(rt.uid)
        if job is not None:
            self.engine.workloads.save_now(job, requested=True)  # CRIU captured the process at this step
        self.kubelet_checkpoints.append({"node": node, "namespace": ns, "pod": name, "container": container,
                                         "archive": archive})
        return web.json_response({"items": [archive]})
