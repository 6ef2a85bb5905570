"""The kubernetes client's credential refresh, run once a second rather than before every request.

The client's kubeconfig and in-cluster loaders install a ``refresh_api_key_hook`` that the client
calls before every request. It re-reads the credential when it is due (an exec plugin's or OIDC
token's expiry less five minutes; the service-account token file every minute) and, due or not,
writes the loader's whole configuration back: host, CA file, client certificate, proxy. Writing
``host`` makes the configuration look its proxy up again from the process environment
(``urllib.request.getproxies``), a walk over every environment variable, and a pod carries one
per Service in its namespace. Against the simulator, with 35 environment variables, that was a
third to a half of a request's client-side CPU (``create_event``: 0.65-0.87 ms of the calling
thread's CPU per request as the client ships, 0.40-0.45 ms with the hook paced; two runs each).

``PacedRefresh`` runs the hook at most once per ``every_s``. A credential is then refreshed at
most that much later than the loader would have, well inside the loaders' own margins: they
refresh five minutes before an expiry, and re-read the service-account token file a minute after
reading it, while kubelet rewrites that file once 80 % of the token's lifetime has passed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

REFRESH_EVERY_S = 1.0
"""How often the client's credential refresh hook runs at most."""

Hook = Callable[[Any], None]


class PacedRefresh:
    """A configuration's ``refresh_api_key_hook``, run at most once per ``every_s``.

    The loaders' hooks install a fresh copy of themselves each time they run; the pacer takes
    that copy as the hook it paces and puts itself back.
    """

    def __init__(self, hook: Hook, every_s: float = REFRESH_EVERY_S) -> None:
        self.hook = hook
        self.every_s = every_s
        self.runs = 0
        self._next_at = 0.0
        self._lock = threading.Lock()

    def __deepcopy__(self, memo: dict[int, Any]) -> PacedRefresh:
        # The client deep-copies a configuration (Configuration.__deepcopy__); a lock does not copy.
        return PacedRefresh(self.hook, self.every_s)

    def __call__(self, configuration: Any) -> None:
        now = time.monotonic()
        if now < self._next_at:
            return
        with self._lock:  # one thread refreshes; the others go on with the credential in place
            if now < self._next_at:
                return
            self.hook(configuration)
            self.runs += 1
            self._next_at = time.monotonic() + self.every_s
            installed = configuration.refresh_api_key_hook
            if installed is not self:
                self.hook = installed
                configuration.refresh_api_key_hook = self


def pace_refresh(configuration: Any, every_s: float = REFRESH_EVERY_S) -> None:
    """Pace ``configuration``'s refresh hook (``PacedRefresh``); nothing when it has none."""
    hook = configuration.refresh_api_key_hook
    if hook is not None and not isinstance(hook, PacedRefresh):
        configuration.refresh_api_key_hook = PacedRefresh(hook, every_s)
