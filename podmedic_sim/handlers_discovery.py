"""Discovery endpoints: ``/version``, ``/api``, ``/apis``, and per group/version resource lists."""

from __future__ import annotations

from aiohttp import web

from podmedic.domain.base import Obj
from podmedic_sim.config import RELEASE_OF_TAINT_RULES
from podmedic_sim.handlers_common import ApiError, json_response
from podmedic_sim.handlers_request import context
from podmedic_sim.resources import ServedApi

VERSION = {
    "major": "1",
    "minor": "37",
    "gitVersion": "v1.37.0-podmedic-sim",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.25",
    "compiler": "gc",
    "platform": "linux/amd64",
}
VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


async def version(request: web.Request) -> web.Response:
    """GET /version: the release the simulator emulates (its DeviceTaintRule version says which)."""
    minor = RELEASE_OF_TAINT_RULES[context(request).api.taint_rules]
    return json_response({**VERSION, "minor": str(minor), "gitVersion": f"v1.{minor}.0-podmedic-sim"})


async def core_versions(request: web.Request) -> web.Response:
    """GET /api."""
    return json_response(
        {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": request.host}
            ],
        }
    )


def _group(api: ServedApi, group: str) -> Obj:
    versions = [
        {"groupVersion": f"{g}/{v}", "version": v} for g, v in api.group_versions() if g == group
    ]
    return {"name": group, "versions": versions, "preferredVersion": versions[0]}


async def groups(request: web.Request) -> web.Response:
    """GET /apis."""
    api = context(request).api
    names = list(dict.fromkeys(g for g, _ in api.group_versions() if g))
    return json_response(
        {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [_group(api, g) for g in names],
        }
    )


async def group(request: web.Request) -> web.Response:
    """GET /apis/<group>."""
    name, api = request.match_info["group"], context(request).api
    if not any(g == name for g, _ in api.group_versions()):
        raise ApiError(404, "the server could not find the requested resource")
    return json_response({"kind": "APIGroup", "apiVersion": "v1", **_group(api, name)})


def resource_list(api: ServedApi, group_name: str, version_name: str) -> Obj:
    """The APIResourceList of one group/version."""
    resources: list[Obj] = []
    for rt in api.resources:
        if (rt.group, rt.version) != (group_name, version_name):
            continue
        resources.append(
            {
                "name": rt.plural,
                "singularName": rt.singular,
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                # A namespace is deleted one at a time (its REST storage has no DeleteCollection).
                "verbs": list(rt.verbs) or ([v for v in VERBS if v != "deletecollection"] if rt.kind == "Namespace"
                                            else VERBS),
                **({"shortNames": list(rt.short_names)} if rt.short_names else {}),
            }
        )
        for sub in rt.subresources:
            kind, verbs = {"eviction": ("Eviction", ["create"]), "exec": ("PodExecOptions", ["create", "get"]),
                           "token": ("TokenRequest", ["create"])}.get(sub, (rt.kind, ["get", "patch", "update"]))
            resources.append(
                {
                    "name": f"{rt.plural}/{sub}",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "kind": kind,
                    "verbs": verbs,
                    **({"group": "policy", "version": "v1"} if sub == "eviction" else
                       {"group": "authentication.k8s.io", "version": "v1"} if sub == "token" else {}),
                }
            )
    if not resources:
        raise ApiError(404, "the server could not find the requested resource")
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group_name}/{version_name}" if group_name else version_name,
        "resources": resources,
    }


async def ok(request: web.Request) -> web.Response:
    """GET /healthz, /readyz, /livez."""
    return web.Response(text="ok")
