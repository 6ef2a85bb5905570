"""Alertmanager webhook payloads (version 4) into health events and maintenance notices, by a mapping.

Prometheus alerts on a GPU (typically rules over NVIDIA dcgm-exporter metrics) carry the
device in their labels: the node (``Hostname``, ``kubernetes_node``, ``node`` or ``instance``)
and the GPU index (``gpu``). ``AlertmanagerMapping`` says how labels become a DRA device
(driver, pool, device) and what each alertname means (health, code, metric); an alertname the mapping
lists under ``maintenance`` announces the node's maintenance, its deadline in an annotation (a firing
alert) or over (resolved): a deadline that cannot be read is delivered with what was wrong, as the node
label's is, so that the incident says so. A payload that
is not the webhook shape is refused with an ``EventError`` naming the field; a well-formed
alert that does not name a device is *skipped* with the reason, because Alertmanager never
retries a 4xx answer and one unmapped alert must not drop the others of its group.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
)

from podmedic.domain.maintenance import MaintenanceNotice, announced, read_deadline, unreadable, withdrawn
from podmedic.domain.models import DeviceHealthEvent, DeviceRef, Health
from workers.ingest.errors import EventError, from_validation
from workers.ingest.http.alertmanager_mapping import AlertmanagerMapping, AlertRule, MaintenanceRule

SOURCE = "alertmanager"
_MESSAGE_MAX = 2000
_NULL_TIME = dt.datetime(1, 1, 1, tzinfo=dt.UTC)  # Alertmanager's "not ended" endsAt


_TIME = TypeAdapter(AwareDatetime)


def _parse_time(text: str) -> dt.datetime:
    return _TIME.validate_python(text)


def _check_time(text: str) -> str:
    try:
        _parse_time(text)
    except ValidationError:
        raise ValueError(f"{text[:40]!r} is not an RFC 3339 time with an offset (2025-01-31T12:00:00Z)") from None
    return text


# Kept as the sender's text: the event id must not change with how a time is re-rendered.
Time = Annotated[str, Field(strict=True), AfterValidator(_check_time)]


class _Alert(BaseModel):
    """One alert of the webhook payload; unknown fields are kept by Alertmanager's evolution."""

    model_config = ConfigDict(extra="allow")

    status: Literal["firing", "resolved"]
    labels: dict[str, str]
    annotations: dict[str, str]
    startsAt: Time  # the wire names
    endsAt: Time | None = None
    fingerprint: str = Field(min_length=1)

    def observed_at(self, received_at: dt.datetime) -> dt.datetime:
        """startsAt for a firing alert; endsAt (else the arrival time) for a resolved one."""
        if self.status == "firing":
            return _parse_time(self.startsAt)
        ends = _parse_time(self.endsAt) if self.endsAt is not None else _NULL_TIME
        return ends if ends > _NULL_TIME else received_at


class _Payload(BaseModel):
    model_config = ConfigDict(extra="allow")

    version: Literal["4"]
    status: Literal["firing", "resolved"]
    alerts: list[_Alert]


@dataclass
class AlertmanagerResult:
    """Events and notices made from a payload, and the alerts skipped with ``(where, why)``."""

    events: list[DeviceHealthEvent | MaintenanceNotice] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)


class _Skip(Exception):
    """A well-formed alert that does not become an event; the message says why."""


def _node(labels: dict[str, str], mapping: AlertmanagerMapping) -> str:
    for name in mapping.node_labels:
        value = labels.get(name, "").strip()
        if value:
            if value.startswith("["):  # [ipv6]:port
                return value[1:].split("]", 1)[0]
            host, sep, port = value.rpartition(":")
            return host if sep and port.isdigit() and ":" not in host else value
    raise _Skip(f"no node label (looked for {', '.join(mapping.node_labels)})")


def _render(template: str, fields: dict[str, str], what: str) -> str:
    try:
        return template.format_map(fields)
    except KeyError as exc:
        raise _Skip(f"label {exc.args[0]} is missing ({what} {template!r}): not a GPU alert") from exc


def _read(places: list[str], alert: _Alert) -> tuple[str, str] | None:
    for place in places:
        kind, _, name = place.partition(":")
        value = (alert.labels if kind == "label" else alert.annotations).get(name, "").strip()
        if value:
            return place, value
    return None


def _number(place: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise _Skip(f"{place} {text[:40]!r} is not a number") from None
    if not math.isfinite(value):
        raise _Skip(f"{place} {text[:40]!r} is not a finite number")
    return value


def _code(rule: AlertRule, alert: _Alert) -> int | None:
    found = _read(rule.code_from, alert)
    if found is None:
        return rule.code
    value = _number(*found)
    if not value.is_integer():
        raise _Skip(f"{found[0]} {found[1][:40]!r} is not an integer code")
    return int(value)


def _message(name: str, alert: _Alert) -> str:
    text = alert.annotations.get("description") or alert.annotations.get("summary") or ""
    uuid = alert.labels.get("UUID") or alert.labels.get("uuid")
    message = f"{name}: {text}".rstrip(": ") + (f" (uuid {uuid})" if uuid else "")
    return message[:_MESSAGE_MAX]


def _notice(alert: _Alert, rule: MaintenanceRule, mapping: AlertmanagerMapping,
            received_at: dt.datetime) -> MaintenanceNotice:
    name, node = alert.labels.get("alertname", ""), _node(alert.labels, mapping)
    source, now = f"Alertmanager alert {name}", alert.observed_at(received_at)
    if alert.status == "resolved":
        return withdrawn(node, source, now, f"{SOURCE}/{alert.fingerprint}/{alert.startsAt}")
    found = _read(rule.deadline_from, alert)
    if found is None:
        return unreadable(node, "no-deadline", source, now,
                          f"alert {name} on {node}: none of {', '.join(rule.deadline_from)} is set (its deadline)")
    try:
        return announced(node, read_deadline(found[1]), source, now)
    except ValueError as err:
        return unreadable(node, found[1][:64], source, now, f"alert {name} on {node}: {found[0]} {err}")


def _event(alert: _Alert, mapping: AlertmanagerMapping,
           received_at: dt.datetime) -> DeviceHealthEvent | MaintenanceNotice:
    name = alert.labels.get("alertname", "")
    if name in mapping.ignore:
        raise _Skip(f"alertname {name!r} is ignored by the mapping")
    if name in mapping.maintenance:
        return _notice(alert, mapping.maintenance[name], mapping, received_at)
    rule = mapping.rules.get(name, mapping.default_rule)
    if rule is None:
        raise _Skip(f"alertname {name!r} has no rule in the mapping and default_rule is null")
    node = _node(alert.labels, mapping)
    driver = (alert.labels.get(mapping.driver_label, "") if mapping.driver_label else "") or mapping.driver
    fields = {**alert.labels, "node": node, "driver": driver}
    pool = _render(mapping.pool_template, fields, "pool_template")
    device = _render(mapping.device_template, fields, "device_template")
    try:
        ref = DeviceRef(driver=driver, pool=pool, device=device)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))} {e['msg']}" for e in exc.errors())
        raise _Skip(f"labels do not make a device name: {problems}") from None
    resolved = alert.status == "resolved"
    metrics: dict[str, float] = {}
    code: int | None = None
    if not resolved:
        code = _code(rule, alert)
        if rule.metric:
            found = _read(rule.value_from, alert)
            if found is None:
                raise _Skip(f"{name} feeds {rule.metric} but none of {', '.join(rule.value_from)} is set "
                            "(add `value: '{{ $value }}'` to the alert rule's annotations)")
            metrics[rule.metric] = _number(*found)
    return DeviceHealthEvent(
        device=ref,
        health=Health.HEALTHY if resolved else Health(rule.health),
        node=node,
        reason=rule.reason or name,
        code=code,
        message=_message(name, alert),
        source=SOURCE,
        observed_at=alert.observed_at(received_at),
        event_id=f"{SOURCE}/{alert.fingerprint}/{alert.status}/{alert.startsAt}",
        metrics=metrics,
        occurrence="" if resolved else f"{alert.fingerprint}@{alert.startsAt}",  # one firing, however often re-sent
    )


def _kind(value: object) -> str:
    return "null" if value is None else {list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), "a number")


def alerts_to_observations(
    payload: object, mapping: AlertmanagerMapping, received_at: dt.datetime
) -> AlertmanagerResult:
    """Health events and maintenance notices from an Alertmanager webhook payload (version 4).

    Args:
        payload: The decoded JSON body.
        mapping: How labels become devices and what alertnames mean.
        received_at: Arrival time: the observed time of a resolved alert without endsAt.

    Returns:
        The events and notices, in alert order, and the alerts skipped with ``(where, why)``.

    Raises:
        EventError: ``payload`` is not the webhook shape; each problem names its place
            (``alerts[3].labels.gpu``) and the reason.
    """
    if not isinstance(payload, dict):
        raise EventError([("(body)", f"expected the Alertmanager webhook object (version 4), got {_kind(payload)}")])
    try:
        parsed = _Payload.model_validate(payload)
    except ValidationError as exc:
        refusal = from_validation("", exc)
        # pydantic prefixes our own messages with "Value error, "; the sender needs only the reason.
        raise EventError([(where, what.removeprefix("Value error, ")) for where, what in refusal.problems]) from None
    result = AlertmanagerResult()
    for i, alert in enumerate(parsed.alerts):
        try:
            result.events.append(_event(alert, mapping, received_at))
        except _Skip as skip:
            result.skipped.append((f"alerts[{i}]", f"{alert.labels.get('alertname', '(no alertname)')}: {skip}"))
    return result
