"""CloudEvents 1.0 (JSON format, structured, batch and binary HTTP modes) into health events and
maintenance notices.

The data contracts are podmedic's own (docs/detection.md): ``type`` ``io.podmedic.device.health.v1``
with a ``data`` object naming the device and its health, and ``io.podmedic.node.maintenance.v1`` with
the node and the ``deadline`` its maintenance begins at (null: over or withdrawn), what a bridge from
a cloud's own notice sends (Azure Scheduled Events' ``NotBefore``, an EC2 scheduled event's start
time). The envelope is
lenient where the CloudEvents spec is (unknown extension attributes are kept and ignored);
``data`` is strict, so a typo in a field name is refused rather than silently dropped.
Every refusal is an ``EventError`` whose ``where`` points into the input: ``[12].data.health``
in a batch, ``id`` in a single event, ``(body)`` for JSON that does not parse.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from podmedic.domain.maintenance import MaintenanceNotice, announced, withdrawn
from podmedic.domain.models import DeviceHealthEvent, DeviceName, DeviceRef, DriverName, Health, PodKey, PoolName
from workers.ingest.errors import EventError, path_of

EVENT_TYPE = "io.podmedic.device.health.v1"
MAINTENANCE_TYPE = "io.podmedic.node.maintenance.v1"
STRUCTURED = "application/cloudevents+json"
BATCH = "application/cloudevents-batch+json"
BINARY = "application/json"
SOURCE = "http"

# Hints appended to pydantic's generic messages where a sender most likely needs one.
_HINTS = {
    "datetime_type": "an RFC 3339 time such as 2025-01-31T12:00:00Z",
    "datetime_parsing": "an RFC 3339 time such as 2025-01-31T12:00:00Z",
    "timezone_aware": "RFC 3339 times need an offset (Z or +hh:mm)",
}


class PodData(BaseModel):
    """The pod that reported the device, when the detector knows it."""

    model_config = ConfigDict(extra="forbid", strict=True)

    namespace: str = Field(min_length=1, max_length=63)
    name: str = Field(min_length=1, max_length=253)
    uid: str = ""


class HealthData(BaseModel):
    """``data`` of an ``io.podmedic.device.health.v1`` event."""

    model_config = ConfigDict(extra="forbid", strict=True)

    driver: DriverName
    pool: PoolName
    device: DeviceName
    node: str | None = Field(None, max_length=253)
    health: Health
    reason: str = Field("", max_length=256)
    code: int | None = Field(None, description="Driver error code, e.g. the NVIDIA XID.")
    message: str = Field("", max_length=4096)
    observed_at: AwareDatetime | None = Field(None, description="Default: the event's time, else arrival.")
    metrics: dict[str, float] = Field(default_factory=dict, description="Readings behind a degradation report.")
    pod: PodData | None = None


class MaintenanceData(BaseModel):
    """``data`` of an ``io.podmedic.node.maintenance.v1`` event."""

    model_config = ConfigDict(extra="forbid", strict=True)

    node: str = Field(min_length=1, max_length=253, description="The Kubernetes node that goes.")
    deadline: AwareDatetime | None = Field(description="When the maintenance begins; null: over or withdrawn "
                                                       "(required: a withdrawal is said, never implied).")


class Envelope(BaseModel):
    """The CloudEvents 1.0 context attributes podmedic reads."""

    # Extension attributes are allowed by the spec: kept, never interpreted.
    model_config = ConfigDict(extra="allow", strict=True)

    specversion: Literal["1.0"]
    id: str = Field(min_length=1, max_length=512)
    source: str = Field(min_length=1, max_length=1024)
    type: Literal["io.podmedic.device.health.v1", "io.podmedic.node.maintenance.v1"]
    time: AwareDatetime | None = None
    datacontenttype: Literal["application/json"] | None = None
    dataschema: str | None = None
    subject: str | None = None


class CloudEvent(Envelope):
    """A structured-mode CloudEvent carrying ``HealthData``."""

    type: Literal["io.podmedic.device.health.v1"]
    data: HealthData


class MaintenanceEvent(Envelope):
    """A structured-mode CloudEvent carrying ``MaintenanceData``."""

    type: Literal["io.podmedic.node.maintenance.v1"]
    data: MaintenanceData


AnyEvent = Annotated[CloudEvent | MaintenanceEvent, Field(discriminator="type")]
Told = DeviceHealthEvent | MaintenanceNotice
"""What an event tells: a device's health, or a node's maintenance."""

_ONE: TypeAdapter[CloudEvent | MaintenanceEvent] = TypeAdapter(AnyEvent)
_MANY: TypeAdapter[list[CloudEvent | MaintenanceEvent]] = TypeAdapter(list[AnyEvent])
_ENVELOPE = TypeAdapter(Envelope)
_DATA: dict[str, TypeAdapter[HealthData] | TypeAdapter[MaintenanceData]] = {
    EVENT_TYPE: TypeAdapter(HealthData), MAINTENANCE_TYPE: TypeAdapter(MaintenanceData)}
_TYPES = (EVENT_TYPE, MAINTENANCE_TYPE)
_MAX_PROBLEMS = 20  # a batch of a thousand bad events needs a readable answer, not a megabyte


def _refusal(prefix: str, exc: ValidationError) -> EventError:
    problems: list[tuple[str, str]] = []
    for err in exc.errors(include_url=False)[:_MAX_PROBLEMS]:
        message = err["msg"]
        hint = _HINTS.get(err["type"])
        if hint:
            message = f"{message} ({hint})"
        if err["type"] in ("union_tag_invalid", "union_tag_not_found"):  # the event's type picks its data
            err["loc"] = (*err["loc"], "type")
            message = f"type must be one of {', '.join(_TYPES)}"
        err["loc"] = tuple(part for part in err["loc"] if part not in _TYPES)  # the union's tag is no place
        problems.append((path_of(prefix, tuple(err["loc"])), message))
    if exc.error_count() > _MAX_PROBLEMS:
        problems.append(("(more)", f"{exc.error_count() - _MAX_PROBLEMS} further problems not listed"))
    return EventError(problems)


def to_event(ce: Envelope, d: HealthData, arrived: dt.datetime) -> DeviceHealthEvent:
    """The observation a validated CloudEvent carries; ``event_id`` is ``ce/<source>/<id>``."""
    return DeviceHealthEvent(
        device=DeviceRef(driver=d.driver, pool=d.pool, device=d.device),
        health=d.health,
        node=d.node,
        reason=d.reason,
        code=d.code,
        message=d.message,
        source=SOURCE,
        observed_at=d.observed_at or ce.time or arrived,
        event_id=f"ce/{ce.source}/{ce.id}",
        pod=PodKey(namespace=d.pod.namespace, name=d.pod.name, uid=d.pod.uid) if d.pod else None,
        metrics=d.metrics,
        occurrence=d.observed_at.isoformat() if d.observed_at else "",
    )


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def to_told(ce: CloudEvent | MaintenanceEvent, arrived: dt.datetime) -> Told:
    """What a validated event tells: a health event (``to_event``) or a node's maintenance notice (one per
    node and deadline, whichever source told it: ``podmedic/domain/maintenance.py``)."""
    if isinstance(ce, CloudEvent):
        return to_event(ce, ce.data, arrived)
    source, now = f"CloudEvent from {ce.source}", ce.time or arrived
    if ce.data.deadline is None:
        return withdrawn(ce.data.node, source, now, f"ce/{ce.source}/{ce.id}")
    return announced(ce.data.node, ce.data.deadline, source, now)


def parse_structured(body: bytes) -> Told:
    """One structured-mode event (``application/cloudevents+json``); raises ``EventError``."""
    try:
        ce = _ONE.validate_json(body)
    except ValidationError as exc:
        raise _refusal("", exc) from None
    return to_told(ce, _now())


def parse_batch(body: bytes) -> list[Told]:
    """A batch (``application/cloudevents-batch+json``): all events, or ``EventError`` naming
    every bad one by index; an empty batch is refused (it is always a sender's bug)."""
    try:
        events = _MANY.validate_json(body)
    except ValidationError as exc:
        raise _refusal("", exc) from None
    if not events:
        raise EventError([("(body)", "empty batch: send at least one event")])
    arrived = _now()
    return [to_told(ce, arrived) for ce in events]


def parse_binary(headers: Mapping[str, str], body: bytes) -> Told:
    """A binary-mode event: attributes in ``ce-*`` headers, ``data`` as the JSON body.

    Problems are located as ``header ce-<name>`` or ``(body).<field>``.
    """
    attributes = {name.lower()[3:]: value for name, value in headers.items() if name.lower().startswith("ce-")}
    problems: list[tuple[str, str]] = []
    envelope: Envelope | None = None
    data: HealthData | MaintenanceData | None = None
    try:
        # Through JSON so that header strings validate exactly like structured-mode values.
        envelope = _ENVELOPE.validate_json(json.dumps(attributes))
    except ValidationError as exc:
        problems += [(f"header ce-{where}", what) for where, what in _refusal("", exc).problems]
    try:
        data = _DATA[envelope.type if envelope is not None else EVENT_TYPE].validate_json(body)
    except ValidationError as exc:
        problems += _refusal("(body)", exc).problems
    if problems or envelope is None or data is None:
        raise EventError(problems)
    if isinstance(data, HealthData):
        return to_event(envelope, data, _now())
    return to_told(MaintenanceEvent(**envelope.model_dump(), data=data), _now())
