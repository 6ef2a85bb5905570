"""HTTP routes of the engine under ``/sim/v1/``: fault injection, workloads and state.

Bad input gets 400 with the offending field and reason; an unknown device gets 404.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Literal, TypeVar

from aiohttp import web
from pydantic import ConfigDict, Field, ValidationError, model_validator

from podmedic.domain.base import ConfigModel
from podmedic_sim.state import device_json
from podmedic_sim.store import StoreError

if TYPE_CHECKING:
    from podmedic_sim.engine import SimEngine


class _Strict(ConfigModel):
    """A request body: unknown fields refused (``ConfigModel``), and no type coercion either."""

    model_config = ConfigDict(strict=True)


class DeviceFault(_Strict):
    """Body of ``POST /sim/v1/faults/device``."""

    driver: str = Field(min_length=1)
    pool: str = Field(min_length=1)
    device: str = Field(min_length=1)
    health: Literal["Healthy", "Unhealthy", "Unknown"]
    reason: str = ""
    code: int | None = None
    message: str = ""
    crash: bool = False
    clears_on_restart: bool = False


class SliceTaint(_Strict):
    """Body of ``POST /sim/v1/faults/slice-taint``."""

    driver: str = Field(min_length=1)
    pool: str = Field(min_length=1)
    device: str = Field(min_length=1)
    key: str = Field(min_length=1)
    value: str = ""
    effect: Literal["None", "NoSchedule", "NoExecute"] = "NoExecute"
    remove: bool = False


class NodeFault(_Strict):
    """Body of ``POST /sim/v1/faults/node``: the node dies (``down``) or is back (docs/simulator.md)."""

    node: str = Field(min_length=1)
    down: bool


class PrepareFault(_Strict):
    """Body of ``POST /sim/v1/faults/prepare``."""

    driver: str = Field(min_length=1)
    pool: str = Field(min_length=1)
    device: str = Field(min_length=1)
    message: str = ""
    clear: bool = False

    @model_validator(mode="after")
    def _message_unless_clear(self) -> PrepareFault:
        if not self.clear and not self.message:
            raise ValueError("message: required unless clear is true")
        return self


class HealthStream(_Strict):
    """Body of ``POST /sim/v1/faults/health-stream``: a driver's health stream to a node's kubelet."""

    driver: str = Field(min_length=1)
    node: str = Field(min_length=1)
    mode: Literal["streaming", "silent", "ended"]


class PluginDeviceHealth(_Strict):
    """Body of ``POST /sim/v1/faults/plugin-device``: what a device plugin's ListAndWatch says of one device."""

    node: str = Field(min_length=1)
    resource: str = Field(min_length=1, description="The extended resource, e.g. nvidia.com/gpu.")
    device: str = Field(min_length=1, description="The plugin's device ID (a GPU UUID).")
    health: Literal["Healthy", "Unhealthy"]


class TrainingJob(_Strict):
    """Body of ``POST /sim/v1/workloads/training``."""

    name: str = Field(min_length=1, max_length=52, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    namespace: str = "default"
    parallelism: int = Field(1, ge=1)
    devices_per_pod: int = Field(1, ge=1)
    driver: str = "gpu.nvidia.com"
    image: str = "registry.local/trainer:1"
    checkpoint_method: str | None = "annotation"
    restart_exit_code: int = Field(85, ge=1, le=255)
    node_name: str | None = None
    backoff_limit: int = Field(100, ge=0)
    checkpoint_answer: str | None = Field(None, pattern=r"^(ok|never|fail|slow:[0-9]+(\.[0-9]+)?)$")
    restart_action: Literal["Restart", "RestartAllContainers"] = "Restart"
    extra_restart_codes: list[int] = Field(default_factory=list)
    sidecar: bool = False
    prefer_node_label: bool = True
    checkpoint_on_sigterm: bool = False
    jobset: bool = False
    in_place_restart: bool = False
    collectives: dict[Literal["peer_exit_s", "collective_timeout_s", "in_job_restarts", "in_job_restart_s",
                              "hang_detect_s"],
                      Annotated[float, Field(ge=0)]] = Field(default_factory=dict)


class Crash(_Strict):
    """Body of ``POST /sim/v1/workloads/crash``: a pod's process dies on its own (a software bug, an NCCL
    watchdog timeout, a fault no device reports): no device health changes, the container exits."""

    name: str = Field(min_length=1)
    namespace: str = "default"
    exit_code: int = Field(1, ge=1, le=255)
    corrupted_checkpoints: int = Field(
        0, ge=0, description="Silent data corruption found late: the job's last N checkpoints are unusable.")


class Rank(_Strict):
    """Body of ``POST /sim/v1/workloads/hang``: a training pod's process hangs (docs/simulator.md)."""

    name: str = Field(min_length=1)
    namespace: str = "default"


class SlowRank(Rank):
    """Body of ``POST /sim/v1/workloads/slow``: a training pod steps ``factor`` times slower for ``for_s``."""

    factor: float = Field(gt=1)
    for_s: float = Field(gt=0)


class Stall(_Strict):
    """Body of ``POST /sim/v1/workloads/training/stall``: freeze (or resume) a Job's progress."""

    name: str = Field(min_length=1)
    namespace: str = "default"
    stalled: bool = True


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


async def _body(request: web.Request, model: type[_Strict]) -> _Strict | web.Response:
    try:
        data = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return _error(400, "request body is not valid JSON")
    if not isinstance(data, dict):
        return _error(400, "request body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in err.errors()
        )
        return _error(400, problems)


Body = TypeVar("Body", bound=_Strict)
DeviceBody = TypeVar("DeviceBody", DeviceFault, SliceTaint, PrepareFault)


def _route(
    model: type[Body], apply: Callable[[Body], object], answer: Callable[[Body], object]
) -> Callable[[web.Request], Awaitable[web.Response]]:
    """A fault route: validate the body, apply it (404 for what does not exist), answer."""

    async def handler(request: web.Request) -> web.Response:
        body = await _body(request, model)
        if isinstance(body, web.Response):
            return body
        assert isinstance(body, model)
        try:
            apply(body)
        except KeyError as err:
            return _error(404, str(err.args[0]))
        return web.json_response(answer(body))

    return handler


def _device_route(
    engine: SimEngine, model: type[DeviceBody], apply: Callable[[DeviceBody], object]
) -> Callable[[web.Request], Awaitable[web.Response]]:
    """A fault route on one device, answering the device's state."""
    return _route(model, apply, lambda b: device_json(engine, (b.driver, b.pool, b.device)))


def make_routes(engine: SimEngine) -> list[web.RouteDef]:
    """Route table bound to ``engine``."""

    device_fault = _device_route(
        engine,
        DeviceFault,
        lambda b: engine.set_device_health(
            b.driver,
            b.pool,
            b.device,
            b.health,
            b.reason,
            b.code,
            b.message,
            b.crash,
            b.clears_on_restart,
        ),
    )
    slice_taint = _device_route(
        engine,
        SliceTaint,
        lambda b: engine.set_slice_taint(
            b.driver, b.pool, b.device, b.key, b.value, b.effect, b.remove
        ),
    )
    prepare_fault = _device_route(
        engine,
        PrepareFault,
        lambda b: engine.set_prepare_failure(b.driver, b.pool, b.device, b.message, b.clear),
    )

    health_stream = _route(
        HealthStream,
        lambda b: engine.set_health_stream(b.driver, b.node, b.mode),
        lambda b: b.model_dump(),
    )

    node_fault = _route(NodeFault, lambda b: engine.nodes.set_down(b.node, b.down), lambda b: b.model_dump())

    plugin_device = _route(
        PluginDeviceHealth,
        lambda b: engine.set_plugin_device_health(b.node, b.resource, b.device, b.health),
        lambda b: b.model_dump(),
    )

    async def training(request: web.Request) -> web.Response:
        body = await _body(request, TrainingJob)
        if isinstance(body, web.Response):
            return body
        assert isinstance(body, TrainingJob)
        try:
            job = engine.create_training_job(**body.model_dump())
        except StoreError as err:
            return _error(err.code, err.message)
        return web.json_response(job, status=201)

    async def stall(request: web.Request) -> web.Response:
        body = await _body(request, Stall)
        if isinstance(body, web.Response):
            return body
        assert isinstance(body, Stall)
        prog = engine.workloads.progress.get((body.namespace, body.name))
        if prog is None:
            return _error(404, f"no training job {body.namespace}/{body.name}")
        prog.stalled = body.stalled
        return web.json_response(prog.to_json())

    def crash_rank(b: Crash) -> None:
        if b.corrupted_checkpoints:
            engine.workloads.discard_checkpoints(engine.workloads.rank(b.namespace, b.name)[0], b.corrupted_checkpoints)
        engine.crash_pod(b.namespace, b.name, b.exit_code)

    crash = _route(Crash, crash_rank, lambda b: b.model_dump())
    hang = _route(Rank, lambda b: engine.workloads.collectives.hang(*engine.workloads.rank(b.namespace, b.name)),
                  lambda b: b.model_dump())
    slow = _route(SlowRank, lambda b: engine.workloads.collectives.slow(
        *engine.workloads.rank(b.namespace, b.name), b.factor, b.for_s), lambda b: b.model_dump())

    async def state(request: web.Request) -> web.Response:
        return web.json_response(engine.state())

    return [
        web.post("/sim/v1/faults/device", device_fault),
        web.post("/sim/v1/faults/slice-taint", slice_taint),
        web.post("/sim/v1/faults/prepare", prepare_fault),
        web.post("/sim/v1/faults/health-stream", health_stream),
        web.post("/sim/v1/faults/plugin-device", plugin_device),
        web.post("/sim/v1/faults/node", node_fault),
        web.post("/sim/v1/workloads/training", training),
        web.post("/sim/v1/workloads/training/stall", stall),
        web.post("/sim/v1/workloads/crash", crash),
        web.post("/sim/v1/workloads/hang", hang),
        web.post("/sim/v1/workloads/slow", slow),
        web.get("/sim/v1/state", state),
    ]
