"""API Priority and Fairness, as far as a client can see it: a request budget per user, and 429s.

Upstream (kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/server/filters/priority-and-fairness.go):
a request its priority level cannot seat or queue is answered ``429`` with the plain-text body of
``http.Error`` ("Too many requests, please try again later."), a ``Retry-After`` header, and the
``X-Kubernetes-PF-FlowSchema-UID`` / ``X-Kubernetes-PF-PriorityLevel-UID`` headers of its
classification. ``Retry-After`` is not fixed: util/flowcontrol/dropped_requests_tracker.go starts it
at 1 s, doubles it while requests keep being dropped (at most 32 s) and lowers it again when they
stop. Watches go through APF too (their initial request).

Here the priority level is a token bucket per user (the User-Agent's product, e.g.
``podmedic-worker``): ``qps`` requests a second, ``burst`` at once. The Retry-After rule is the
tracker's, simplified to whole seconds: doubled when a second with drops follows one, lowered by one
for each second without. Off until configured (``POST /sim/v1/flow-control`` or ``sim serve --apf-qps``).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
MAX_RETRY_AFTER_S = 32
BODY = "Too many requests, please try again later.\n"
FLOW_SCHEMA_UID = "5b1fd2a2-5d4e-4f6b-9c0e-podmedic-sim-fs"
PRIORITY_LEVEL_UID = "0c5e7a11-3f1a-4b8e-8d21-podmedic-sim-pl"


@dataclass
class UserBudget:
    """One user's bucket and what it let through or dropped."""

    qps: float
    burst: int
    tokens: float = 0.0
    at: float = 0.0
    admitted: int = 0
    dropped: int = 0
    retry_after: int = 1
    last_drop_second: int = -10
    per_second: dict[int, int] = field(default_factory=dict)
    """Admitted requests by whole second since the budget was set (for the tests' QPS check)."""

    def admit(self, now: float, second: int) -> bool:
        self.tokens = min(float(self.burst), self.tokens + (now - self.at) * self.qps)
        self.at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            self.admitted += 1
            self.per_second[second] = self.per_second.get(second, 0) + 1
            return True
        self.dropped += 1
        if second == self.last_drop_second + 1:
            self.retry_after = min(MAX_RETRY_AFTER_S, self.retry_after * 2)
        elif second > self.last_drop_second + 1:
            self.retry_after = max(1, self.retry_after - (second - self.last_drop_second - 1))
        self.last_drop_second = max(self.last_drop_second, second)
        return False


class FlowControl:
    """The middleware and its ``/sim/v1/flow-control`` API."""

    def __init__(self) -> None:
        self.qps: float | None = None
        self.burst = 1
        self.users: dict[str, UserBudget] = {}
        self._start = time.monotonic()

    def configure(self, qps: float | None, burst: int = 1) -> None:
        """Budget every user ``qps`` a second and ``burst`` at once; ``None`` switches it off. Counts restart."""
        if qps is not None and (qps <= 0 or burst < 1):
            raise ValueError("qps must be > 0 and burst >= 1")
        self.qps, self.burst, self.users = qps, burst, {}
        self._start = time.monotonic()

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Answer 429 as APF does when the user's budget is spent."""
        path = request.path
        if self.qps is None or not (path.startswith("/api/") or path.startswith("/apis/")):
            return await handler(request)
        user = request.headers.get("User-Agent", "").split("/", 1)[0] or "anonymous"
        budget = self.users.get(user)
        now = time.monotonic()
        if budget is None:
            budget = self.users[user] = UserBudget(self.qps, self.burst, tokens=float(self.burst), at=now)
        if budget.admit(now, int(now - self._start)):
            return await handler(request)
        return web.Response(status=429, text=BODY, content_type="text/plain", headers={
            "Retry-After": str(budget.retry_after), "X-Kubernetes-PF-FlowSchema-UID": FLOW_SCHEMA_UID,
            "X-Kubernetes-PF-PriorityLevel-UID": PRIORITY_LEVEL_UID})

    def state(self) -> dict[str, Any]:
        """The budget in force and, per user, what was admitted and dropped."""
        return {"qps": self.qps, "burst": self.burst,
                "users": {name: {"admitted": u.admitted, "dropped": u.dropped, "retry_after_s": u.retry_after,
                                 "max_per_second": max(u.per_second.values(), default=0)}
                          for name, u in self.users.items()}}

    async def handle_post(self, request: web.Request) -> web.Response:
        """POST /sim/v1/flow-control ``{"qps": Q, "burst": B}`` (``qps`` null: off)."""
        body = await request.json()
        try:
            self.configure(body.get("qps"), int(body.get("burst", 1)))
        except (TypeError, ValueError) as exc:
            return web.json_response({"error": str(exc)}, status=400)
        return web.json_response(self.state())

    async def handle_get(self, request: web.Request) -> web.Response:
        """GET /sim/v1/flow-control."""
        return web.json_response(self.state())

    def routes(self) -> list[web.RouteDef]:
        """The ``/sim/v1/flow-control`` routes."""
        return [web.post("/sim/v1/flow-control", self.handle_post), web.get("/sim/v1/flow-control", self.handle_get)]
