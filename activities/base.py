"""What every activity class that talks to the cluster shares: the gateway, and its calls on the event loop."""

from __future__ import annotations

from activities.heartbeat import kept_alive
from podmedic.kube.gateway import KubeGateway
from podmedic.kube.loop_calls import LoopCalls


class KubeActivities:
    """Base of activity classes that talk to the cluster through one ``KubeGateway``: ``api`` is its calls
    as coroutines (``podmedic/kube/loop_calls.py``), awaited on the worker's event loop, each keeping
    its activity alive while it waits (``kept_alive``)."""

    def __init__(self, kube: KubeGateway) -> None:
        self.kube = kube
        self.api = LoopCalls(kube, around=kept_alive)
