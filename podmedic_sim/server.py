"""The aiohttp application: Kubernetes routes, discovery, errors as ``Status`` objects."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable

from aiohttp import web

from podmedic_sim import handlers_discovery as discovery
from podmedic_sim import openapi, rbac
from podmedic_sim.api_faults import ApiFaults
from podmedic_sim.audit import middlewares_from_env
from podmedic_sim.exec_ws import handle_exec
from podmedic_sim.flow_control import FlowControl
from podmedic_sim.handlers_auth import handle_self_review, handle_token_request
from podmedic_sim.handlers_common import ApiError, error_response, json_response
from podmedic_sim.handlers_pods import handle_eviction
from podmedic_sim.handlers_read import handle_get, handle_list
from podmedic_sim.handlers_request import CONTEXT_KEY, ApiContext, Target, context, parse_target
from podmedic_sim.handlers_write import (
    handle_create,
    handle_delete,
    handle_delete_collection,
    handle_patch,
    handle_replace,
)
from podmedic_sim.ledger import RequestLedger
from podmedic_sim.store import StoreError
from podmedic_sim.watch import handle_watch

log = logging.getLogger(__name__)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
TargetHandler = Callable[[web.Request, Target], Awaitable[web.StreamResponse]]


@web.middleware
async def status_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Answer every failure on a Kubernetes path with a ``Status`` object, never a traceback."""
    try:
        return await handler(request)
    except ApiError as exc:
        return error_response(exc)
    except StoreError as exc:
        return error_response(ApiError(exc.code, exc.message, exc.reason, name=exc.name))
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(ApiError(exc.status, exc.reason or "error"))
    except Exception:
        log.exception("unhandled error serving %s %s", request.method, request.path)
        return error_response(ApiError(500, "an internal error occurred in the simulator"))


def _pick(request: web.Request, target: Target) -> TargetHandler:
    method = request.method
    watch = request.query.get("watch", "").lower() in ("true", "1")
    if target.sub == "eviction":
        if method == "POST":
            return handle_eviction
    elif target.sub == "exec":
        if method in ("GET", "POST"):
            return handle_exec
    elif target.sub == "token":
        if method == "POST":
            return handle_token_request
    elif target.rt.verbs == ("create",):
        if method == "POST" and target.name is None:
            return handle_self_review
    elif target.name is None:
        if method == "GET":
            return handle_watch if watch else handle_list
        if method == "POST" and target.sub is None:
            return handle_create
        if method == "DELETE":
            return handle_delete_collection
    else:
        table: dict[str, TargetHandler] = {
            "GET": handle_get,
            "PUT": handle_replace,
            "PATCH": handle_patch,
        }
        if target.sub is None:
            table["DELETE"] = handle_delete
        if method in table:
            return table[method]
    raise ApiError(
        405, f"the server does not allow this method on the requested resource: {method}"
    )


async def core_dispatch(request: web.Request) -> web.StreamResponse:
    """Every ``/api/v1/...`` request."""
    target = parse_target(context(request).api, "", "v1", request.match_info["rest"])
    return await _pick(request, target)(request, target)


async def group_dispatch(request: web.Request) -> web.StreamResponse:
    """Every ``/apis/<group>/<version>/...`` request."""
    info = request.match_info
    target = parse_target(context(request).api, info["group"], info["version"], info["rest"])
    return await _pick(request, target)(request, target)


async def core_resources(request: web.Request) -> web.Response:
    """GET /api/v1."""
    return json_response(discovery.resource_list(context(request).api, "", "v1"))


async def group_resources(request: web.Request) -> web.Response:
    """GET /apis/<group>/<version>."""
    return json_response(
        discovery.resource_list(
            context(request).api, request.match_info["group"], request.match_info["version"]
        )
    )


def build_app(
    context: ApiContext,
    faults: ApiFaults,
    extra_routes: Iterable[web.RouteDef] = (),
    first_routes: Iterable[web.RouteDef] = (),
    ledger: RequestLedger | None = None,
    flow: FlowControl | None = None,
) -> web.Application:
    """The application serving the Kubernetes API, the fault API and ``extra_routes``;
    ``first_routes`` (proxy subresources) are matched before the generic API routes. The
    ``ledger`` (one is made when not given) counts podmedic's requests with the answers they
    got, injected faults included, so it sits outside the fault middleware; ``flow`` (API Priority
    and Fairness's 429s) sits between them: a throttled request is counted, and no fault is drawn for it."""
    ledger = ledger or RequestLedger()
    flow = flow or FlowControl()
    app = web.Application(
        middlewares=[*middlewares_from_env(), ledger.middleware, flow.middleware, faults.middleware,
                     rbac.middleware(context.tokens, lambda: context.store), status_errors],
        client_max_size=16 * 1024 * 1024,
    )
    app[CONTEXT_KEY] = context
    app.add_routes(list(first_routes))
    app.add_routes(
        [
            web.get("/version", discovery.version),
        web.get("/version/", discovery.version),
        web.get("/api/", discovery.core_versions),
        web.get("/apis/", discovery.groups),
            web.get("/openapi/v3", openapi.index),
            web.get("/openapi/v3/{path:.+}", openapi.document),
            web.get("/healthz", discovery.ok),
            web.get("/readyz", discovery.ok),
            web.get("/livez", discovery.ok),
            web.get("/api", discovery.core_versions),
            web.get("/api/v1", core_resources),
            web.get("/apis", discovery.groups),
            # The real server answers discovery with or without the trailing slash; the generated
            # Python client asks for ``/apis/<group>/`` and ``/apis/<group>/<version>/``.
            web.get("/apis/{group}", discovery.group),
            web.get("/apis/{group}/", discovery.group),
            web.get("/apis/{group}/{version}", group_resources),
            web.get("/apis/{group}/{version}/", group_resources),
            web.get("/api/v1/", core_resources),
            web.route("*", "/api/v1/{rest:.+}", core_dispatch),
            web.route("*", "/apis/{group}/{version}/{rest:.+}", group_dispatch),
        ]
    )
    app.add_routes(faults.routes())
    app.add_routes(flow.routes())
    app.add_routes(ledger.routes())
    app.add_routes(list(extra_routes))
    return app
