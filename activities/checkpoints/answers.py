"""What a workload's HTTP endpoint or a kubelet answered, judged (no I/O)."""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, field
from typing import Literal

State = Literal["saved", "pending", "failed"]


@dataclass(frozen=True)
class Answer:
    """One pod's answer: ``saved`` with an id and location(s), ``pending`` (ask again), or ``failed``."""

    state: State
    checkpoint_id: str | None = None
    locations: list[str] = field(default_factory=list)
    reason: str = ""


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


def _message(text: str) -> str:
    """The ``message`` of a Kubernetes Status or ``error`` of a JSON body, else the text itself."""
    try:
        data = json.loads(text)
    except ValueError:
        return _short(text)
    if isinstance(data, dict):
        return _short(str(data.get("message") or data.get("error") or text))
    return _short(text)


def _json_of_200(text: str, who: str) -> object:
    """The JSON of a 200 answer, or the failed ``Answer`` saying it was not JSON."""
    try:
        return json.loads(text)
    except ValueError:
        return Answer("failed", reason=f"{who} answered 200 but not JSON: {_short(text)!r}")


def http_answer(status: int, text: str, request_id: str) -> Answer:
    """Judge a pod endpoint's answer to ``POST {"request_id": ...}``.

    200 with ``{"request_id", "checkpoint_id", "location"}`` is saved; 202 means the workload
    is still saving (podmedic asks again with the same id); anything else failed.
    """
    if status == 202:
        return Answer("pending", reason="workload is saving")
    if status != 200:
        return Answer("failed", reason=f"endpoint answered {status}: {_message(text)}")
    data = _json_of_200(text, "endpoint")
    if isinstance(data, Answer):
        return data
    if not isinstance(data, dict):
        return Answer("failed", reason="endpoint answered 200 but the body is not a JSON object")
    echoed = data.get("request_id")
    if echoed is not None and echoed != request_id:
        return Answer("failed", reason=f"request_id: answer is for {echoed!r}, not {request_id!r}")
    ckpt, location = data.get("checkpoint_id"), data.get("location")
    if not isinstance(ckpt, str) or not ckpt:
        return Answer("failed", reason="checkpoint_id: missing or not a non-empty string in the answer")
    if location is not None and not isinstance(location, str):
        return Answer("failed", reason="location: not a string in the answer")
    return Answer("saved", ckpt, [location] if location else [])


def kubelet_answer(status: int, text: str, container: str) -> Answer:
    """Judge the kubelet checkpoint API's answer ``{"items": ["/var/lib/kubelet/checkpoints/....tar"]}``."""
    if status != 200:
        return Answer("failed", reason=f"kubelet answered {status} for container {container}: {_message(text)}")
    data = _json_of_200(text, "kubelet")
    if isinstance(data, Answer):
        return data
    items = data.get("items") if isinstance(data, dict) else None
    if not isinstance(items, list) or not items or not all(isinstance(i, str) and i for i in items):
        return Answer("failed", reason="items: the kubelet's answer lists no checkpoint archive")
    first = posixpath.basename(items[0])
    return Answer("saved", first.removesuffix(".tar"), list(items))


def merge(answers: list[Answer]) -> Answer:
    """One pod's answer from its containers' answers (kubelet: one archive per container)."""
    failed = [a for a in answers if a.state != "saved"]
    if failed:
        return Answer("failed", reason="; ".join(a.reason for a in failed))
    ids = [a.checkpoint_id for a in answers if a.checkpoint_id]
    return Answer("saved", ",".join(ids), [loc for a in answers for loc in a.locations])
