"""What every ticket backend shares: credentials, URL expansion, HMAC signatures, HTTP answers.

Credentials are read here, inside activities, from a file (a mounted Secret) or an
environment variable named by the policy; the workflow only ever carries those names.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import hashlib
import hmac
import os
import string
import time
from pathlib import Path
from typing import Any

import aiohttp
from standardwebhooks import Webhook
from temporalio.exceptions import ApplicationError

from podmedic.domain.ticket_policy import signing_key

TIMEOUT = aiohttp.ClientTimeout(total=15)
LEGACY_SIGNATURE_HEADER = "X-Podmedic-Signature"
MAX_RETRY_AFTER_S = 3600.0  # ServiceNow's limits are per hour: its longest honest wait


class TicketConfigError(ApplicationError):
    """The ticket settings cannot be used on this worker; the message names the field."""

    def __init__(self, message: str) -> None:
        super().__init__(message, type="TicketConfigError", non_retryable=True)


def expand(template: str) -> str:
    """``${VAR}`` from the worker's environment; unset variables make the result empty."""
    try:
        return string.Template(template).substitute(os.environ).strip()
    except (KeyError, ValueError):
        return ""


def base_url(field: str, template: str) -> str:
    """``template`` with ``${VAR}`` expanded, as an http(s) URL without a trailing slash.

    Raises:
        TicketConfigError: the result is not an http(s) URL, naming ``field``.
    """
    base = expand(template).rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise TicketConfigError(f"{field}: {base!r} is not an http(s) URL (after ${{VAR}} expansion)")
    return base


def read_secret(field: str, file: str | None, env: str | None, *, required: bool) -> str | None:
    """The secret from ``file`` (wins) or the environment variable ``env``.

    Args:
        field: The policy field path for error messages, e.g. ``ticket.jira.token``.
        file: Path of a file holding the secret, or ``None``.
        env: Name of an environment variable holding the secret, or ``None``.
        required: Raise when neither yields a value.

    Raises:
        TicketConfigError: The file is unreadable or empty, or a required secret is missing.
    """
    if file:
        try:
            value = Path(file).read_text().strip()
        except OSError as exc:
            raise TicketConfigError(f"{field}_file {file}: cannot read: {exc.strerror}") from exc
        if not value:
            raise TicketConfigError(f"{field}_file {file} is empty")
        return value
    value = os.environ.get(env, "").strip() if env else ""
    if value:
        return value
    if required:
        where = f"environment variable {env} is unset or empty" if env else "neither _file nor _env is set"
        raise TicketConfigError(f"{field}: no credential on this worker ({where}); set {field}_file or {field}_env")
    return None


def sign(secret: str, message_id: str, body: bytes, now: float | None = None) -> dict[str, str]:
    """Standard Webhooks headers for ``body``: ``webhook-id``, ``webhook-timestamp`` (``now``, Unix seconds) and
    ``webhook-signature`` (``v1,`` and the base64 HMAC-SHA256 of ``id.timestamp.body``), so a receiver can
    refuse a request replayed later (the spec: more than 5 minutes off its clock)."""
    seconds = int(time.time() if now is None else now)
    signature = Webhook(signing_key(secret)).sign(message_id, dt.datetime.fromtimestamp(seconds, dt.UTC),
                                                  body.decode())
    return {"webhook-id": message_id, "webhook-timestamp": str(seconds), "webhook-signature": signature}


def legacy_sign(secret: str, body: bytes) -> str:
    """``sha256=<hex>``: HMAC-SHA256 of the exact body bytes, the ``X-Podmedic-Signature`` before Standard
    Webhooks (no timestamp: replayable), sent only with ``ticket.legacy_signature``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def short_key(idempotency_key: str, length: int = 24) -> str:
    """A stable, label-safe digest of an idempotency key (Jira labels and correlation ids are short)."""
    return hashlib.sha256(idempotency_key.encode()).hexdigest()[:length]


def retry_after(resp: aiohttp.ClientResponse) -> float | None:
    """Seconds the backend asks to wait (``Retry-After``: delta-seconds or an HTTP date), if it says.

    Jira Cloud and ServiceNow both send it with a 429 (and Jira with some 503s); asking again
    before it has passed only earns another 429.
    """
    raw = resp.headers.get("Retry-After", "").strip()
    if not raw:
        return None
    if raw.isdigit():
        return float(raw)
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, (when - dt.datetime.now(dt.UTC)).total_seconds())


async def answer(resp: aiohttp.ClientResponse, what: str) -> Any:
    """The JSON answer, or a retryable (5xx, 408, 429) or non-retryable (other 4xx) error.

    A retryable answer with ``Retry-After`` sets the next attempt's delay to it (at most
    ``MAX_RETRY_AFTER_S``) instead of the step's own backoff.
    """
    if resp.status in (408, 429) or resp.status >= 500:
        wait = retry_after(resp)
        if wait is None:
            raise ApplicationError(f"{what}: HTTP {resp.status}, will retry", type="TicketBackendUnavailable")
        wait = min(wait, MAX_RETRY_AFTER_S)
        raise ApplicationError(f"{what}: HTTP {resp.status}, will retry after {wait:g}s (Retry-After)",
                               type="TicketBackendUnavailable", next_retry_delay=dt.timedelta(seconds=wait))
    if resp.status >= 400:
        text = (await resp.text())[:300]
        raise ApplicationError(f"{what}: HTTP {resp.status} {text}", type="TicketRejected", non_retryable=True)
    if resp.status == 204:
        return {}
    return await resp.json(content_type=None)


async def call(session: aiohttp.ClientSession, method: str, url: str, *, missing_ok: bool = False,
               gone: tuple[int, ...] = (), **kwargs: Any) -> Any:
    """One request; connection failures are retryable ``TicketBackendUnavailable``; with
    ``missing_ok`` a 404 answers ``None``, as does any status in ``gone``."""
    what = f"{method} {url.split('?')[0]}"
    try:
        async with session.request(method, url, **kwargs) as resp:
            if (missing_ok and resp.status == 404) or resp.status in gone:
                return None
            return await answer(resp, what)
    except aiohttp.ClientError as exc:
        raise ApplicationError(f"{what}: {exc}", type="TicketBackendUnavailable") from exc
