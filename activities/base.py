"""What every activity class shares: the gateway, run off the event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from activities.kube import KubeGateway

P = ParamSpec("P")
T = TypeVar("T")


class KubeActivities:
    """Base of activity classes that talk to the cluster through one ``KubeGateway``."""

    def __init__(self, kube: KubeGateway) -> None:
        self.kube = kube

    async def run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run a blocking gateway call in a thread so the worker's loop keeps heartbeating."""
        return await asyncio.to_thread(fn, *args, **kwargs)
