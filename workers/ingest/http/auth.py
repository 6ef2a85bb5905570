"""Bearer-token authentication of the HTTP ingest.

The token comes from a file (``http.token_file``, e.g. a mounted Kubernetes Secret) or an
environment variable (``http.token_env``). Without either the service refuses to start,
unless the settings say ``allow_unauthenticated: true`` on purpose: an ingest that anyone
on the network can feed taints devices and evicts pods, so "no token" must never be a
default one can fall into.
"""

from __future__ import annotations

import hmac
import logging
import os
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("podmedic.ingest.http")

CHALLENGE = 'Bearer realm="podmedic-ingest"'


class AuthConfigError(Exception):
    """The token configuration cannot be used; the message says what to change."""


@dataclass(frozen=True)
class BearerAuth:
    """Checks ``Authorization: Bearer <token>``; ``token=None`` lets every request in."""

    token: bytes | None
    origin: str

    def check(self, authorization: str | None) -> str | None:
        """``None`` when the request may pass, else why it may not (for the 401 answer and log)."""
        if self.token is None:
            return None
        if not authorization:
            return "missing Authorization header (expected: Bearer <token>)"
        scheme, _, presented = authorization.partition(" ")
        if scheme.lower() != "bearer" or not presented.strip():
            return "Authorization must use the Bearer scheme"
        # Constant-time, so response timing does not leak how much of a guess was right.
        if not hmac.compare_digest(presented.strip().encode(), self.token):
            return "invalid bearer token"
        return None


def load_auth(token_file: Path | None, token_env: str | None, allow_unauthenticated: bool) -> BearerAuth:
    """The authenticator the settings ask for; raises ``AuthConfigError`` when none can be built.

    A configured ``token_file`` wins over the environment and must exist and be non-empty
    (a typo there must not fall back silently to something else).
    """
    if token_file is not None:
        try:
            token = token_file.read_text().strip()
        except OSError as exc:
            raise AuthConfigError(f"http.token_file {token_file}: cannot read: {exc.strerror}") from exc
        if not token:
            raise AuthConfigError(f"http.token_file {token_file} is empty")
        return BearerAuth(token.encode(), f"file {token_file}")
    if token_env:
        token = os.environ.get(token_env, "").strip()
        if token:
            return BearerAuth(token.encode(), f"environment variable {token_env}")
    if allow_unauthenticated:
        log.warning("!!! HTTP ingest accepts UNAUTHENTICATED requests (http.allow_unauthenticated: true): "
                    "anyone who can reach it can open incidents, taint devices and evict pods !!!")
        return BearerAuth(None, "none (allow_unauthenticated)")
    where = f"the environment variable {token_env}" if token_env else "no environment variable (token_env unset)"
    raise AuthConfigError(
        f"no bearer token for the HTTP ingest: set http.token_file, or {where}; "
        "or set http.allow_unauthenticated: true to run without authentication (not for production)"
    )
