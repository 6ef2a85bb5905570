"""The simulated training script's HTTP checkpoint endpoint (method ``http``) and how it answers.

Reached through the API server's pod proxy (``podmedic_sim.proxy``). It listens on the port
of ``podmedic.io/checkpoint-port`` (default 8471) at ``podmedic.io/checkpoint-path`` (default
``/podmedic/checkpoint``) only while the container runs and the pod declares method ``http``.
``sim.podmedic.io/checkpoint-answer`` on the pod (or its Job template) makes it answer
normally (``ok``), take longer (``slow:<seconds>``), never answer (``never``) or fail (``fail``),
for the annotation method too.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from podmedic_sim.kubelet_status import PodKey
from podmedic_sim.workload_protocol import (
    CKPT_ANSWER,
    CKPT_METHOD,
    CKPT_PATH,
    CKPT_PORT,
    DEFAULT_CKPT_PATH,
    DEFAULT_CKPT_PORT,
)

if TYPE_CHECKING:
    from podmedic_sim.workload import Workloads

HttpAnswer = tuple[int, dict[str, Any]]


def answer_mode(annotations: dict[str, str], save_s: float) -> tuple[str, float]:
    """How the workload answers checkpoint requests (``sim.podmedic.io/checkpoint-answer``):
    ``(mode, save time)`` with mode ``ok``, ``never`` or ``fail``; a bad value fails loudly."""
    raw = annotations.get(CKPT_ANSWER, "ok").strip()
    if raw in ("ok", "never", "fail"):
        return raw, save_s
    if raw.startswith("slow:"):
        try:
            return "ok", max(float(raw[5:]), 0.0)
        except ValueError:
            pass
    return "fail", 0.0


async def http_checkpoint(w: Workloads, pkey: PodKey, port: int, path: str, body: Any) -> HttpAnswer:
    """The training script's checkpoint endpoint as the pod proxy reaches it: ``(status, JSON body)``."""
    pod = w._store.find("pods", *pkey)
    uid = (pod or {}).get("metadata", {}).get("uid", "")
    ann = ((pod or {}).get("metadata") or {}).get("annotations") or {}
    work = w._work.get(uid)
    try:
        declared = int(ann.get(CKPT_PORT, DEFAULT_CKPT_PORT))
    except ValueError:
        declared = -1
    if work is None or ann.get(CKPT_METHOD) != "http" or port != declared or not w._running(pkey, uid):
        return 503, {"error": f"dial tcp :{port}: connect: connection refused"}
    if path != ann.get(CKPT_PATH, DEFAULT_CKPT_PATH):
        return 404, {"error": f"no handler for {path}"}
    request = body.get("request_id") if isinstance(body, dict) else None
    if not isinstance(request, str) or not request:
        return 400, {"error": "request_id: required, a non-empty string"}
    if request in work.answers:
        ckpt_id, location = work.answers[request]
        return 200, {"request_id": request, "checkpoint_id": ckpt_id, "location": location}
    mode, delay = answer_mode(ann, w._t.checkpoint_save_s)
    if mode == "fail" and request not in work.answered:
        return 500, {"request_id": request, "error": f"save failed ({CKPT_ANSWER}: fail)"}
    if work.saving is not None and work.saving != request:
        return 202, {"request_id": request, "status": "busy saving another request"}
    fut: asyncio.Future[HttpAnswer] = asyncio.get_running_loop().create_future()
    work.waiters.setdefault(request, []).append(fut)
    if mode != "never" and work.saving is None:
        work.saving = request
        running = w._running(pkey, uid)
        gen = running[1].gen if running else -1
        w._timers.call_later(delay, lambda: w._save(pkey, uid, request, gen, "http"))
    try:
        return await fut
    finally:
        if fut in work.waiters.get(request, []):
            work.waiters[request].remove(fut)
