"""``podmedic admission``: the HTTPS server the API server calls for every new pod.

Routes: ``POST /mutate-pods`` (AdmissionReview v1), ``GET /healthz`` (up), ``GET /v1/stats``.
Stateless: every review reads the holds of the pod's namespace from the cluster, so any number of
replicas behind the Service answer alike.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
from dataclasses import asdict

from aiohttp import web

from podmedic.kube.gateway import KubeGateway
from workers.admission.certs import ServingCert
from workers.admission.review import BadReview, ReviewStats, review

log = logging.getLogger("podmedic.admission")
STATS = web.AppKey("podmedic_admission_stats", ReviewStats)


def build_app(kube: KubeGateway) -> web.Application:
    """The webhook's routes over ``kube`` (which reads the holds)."""
    stats = ReviewStats()

    async def mutate(request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError as err:
            return web.json_response({"error": f"the body is not JSON: {err}"}, status=400)
        loop = asyncio.get_running_loop()

        def read(namespace: str) -> dict[str, str]:
            return kube.read_holds(namespace)

        try:
            # The read is a blocking API call: a thread, so other reviews are not held up.
            answer, done = await loop.run_in_executor(None, lambda: review(body, read, time.time(), stats))
        except BadReview as err:
            return web.json_response({"error": str(err)}, status=400)
        if done:
            obj = body["request"]["object"]["metadata"]
            log.info("new pod %s/%s %s", body["request"].get("namespace"),
                     obj.get("name") or obj.get("generateName", ""), done)
        return web.json_response(answer)

    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def stats_view(_: web.Request) -> web.Response:
        return web.json_response(asdict(stats), dumps=lambda o: json.dumps(o, indent=2))

    app = web.Application()
    app[STATS] = stats
    app.add_routes([web.post("/mutate-pods", mutate), web.get("/healthz", healthz), web.get("/v1/stats", stats_view)])
    return app


def tls_context(cert: ServingCert) -> ssl.SSLContext:
    """The server side of TLS 1.2+ with the serving certificate."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(str(cert.cert), str(cert.key))
    return context


async def serve(kube: KubeGateway, cert: ServingCert, host: str, port: int, stop: asyncio.Event) -> None:
    """Serve until ``stop`` is set."""
    runner = web.AppRunner(build_app(kube), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=tls_context(cert))
    await site.start()
    log.info("admission webhook serving https://%s:%d/mutate-pods", host, port)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
