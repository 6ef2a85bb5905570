"""How podmedic's processes reach a production Temporal: TLS, mTLS, API keys, payload encryption.

Every process (worker, ingest, CLI, demo) connects through ``podmedic.temporal.connect.connect``,
which reads these settings from the environment, so one set of variables (e.g. from a
Kubernetes Secret mounted as files) secures them all:

=================================  ============================================================
``PODMEDIC_TEMPORAL_TLS``          ``1``: TLS with the system's roots; ``0``: plain, even with an API key
``PODMEDIC_TEMPORAL_TLS_CA``       PEM file of the server's CA (turns TLS on)
``PODMEDIC_TEMPORAL_TLS_CERT``     PEM client certificate for mTLS (with ``..._KEY``)
``PODMEDIC_TEMPORAL_TLS_KEY``      PEM client private key for mTLS (with ``..._CERT``)
``PODMEDIC_TEMPORAL_TLS_SERVER_NAME``  name to verify in the server's certificate
``PODMEDIC_TEMPORAL_API_KEY_FILE`` file holding an API key (Temporal Cloud); TLS unless ``TLS=0``
``PODMEDIC_TEMPORAL_API_KEY``      the API key itself (prefer the file)
``PODMEDIC_PAYLOAD_KEY_FILE``      AES-256 key file: encrypt every payload (see ``podmedic/temporal/codec.py``)
=================================  ============================================================

Without any ``PODMEDIC_TEMPORAL_*`` security variable, the temporal CLI's own settings apply, read
by the SDK's ``temporalio.envconfig`` as the CLI reads them: ``TEMPORAL_API_KEY``, ``TEMPORAL_TLS``,
``TEMPORAL_TLS_CLIENT_CERT_PATH``/``_KEY_PATH``, ``TEMPORAL_TLS_SERVER_CA_CERT_PATH``,
``TEMPORAL_TLS_SERVER_NAME`` and the profile of ``temporal.toml`` (``TEMPORAL_CONFIG_FILE``,
``TEMPORAL_PROFILE``). So a shell set up for ``temporal`` is set up for ``podmedic``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from temporalio.envconfig import ClientConfigProfile
from temporalio.service import TLSConfig

from podmedic.temporal.codec import CodecKeyError, EncryptionCodec, load_keys

PREFIX = "PODMEDIC_TEMPORAL_"


class SecurityError(ValueError):
    """Settings that cannot be used; the message names the variable and the reason."""


def _read(variable: str, path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise SecurityError(f"{variable}={path}: cannot read: {exc.strerror}") from exc


@dataclass(frozen=True)
class TemporalSecurity:
    """The resolved settings: what ``Client.connect`` gets for ``tls``, ``api_key`` and the codec."""

    tls: TLSConfig | bool = False
    api_key: str | None = None
    codec: EncryptionCodec | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> TemporalSecurity:
        """Read and check every variable; raises ``SecurityError`` naming the first bad one."""
        env = os.environ if env is None else env
        if not any(k.startswith(PREFIX) for k in env):
            return cls._from_temporal_cli(env)
        flag = env.get(PREFIX + "TLS", "").strip().lower()
        if flag not in ("", "0", "1", "true", "false"):
            raise SecurityError(f"{PREFIX}TLS={flag!r}: use 1 or 0")
        ca, cert, key = (env.get(PREFIX + name, "") for name in ("TLS_CA", "TLS_CERT", "TLS_KEY"))
        if bool(cert) != bool(key):
            raise SecurityError(f"{PREFIX}TLS_CERT and {PREFIX}TLS_KEY go together (mTLS needs both)")
        api_key = env.get(PREFIX + "API_KEY", "").strip() or None
        if env.get(PREFIX + "API_KEY_FILE"):
            api_key = _read(PREFIX + "API_KEY_FILE", env[PREFIX + "API_KEY_FILE"]).decode().strip()
            if not api_key:
                raise SecurityError(f"{PREFIX}API_KEY_FILE={env[PREFIX + 'API_KEY_FILE']}: the file is empty")
        server_name = env.get(PREFIX + "TLS_SERVER_NAME") or None
        wants_tls = flag in ("1", "true") or bool(ca or cert or server_name) or (api_key is not None and flag == "")
        tls: TLSConfig | bool = False
        if wants_tls and flag not in ("0", "false"):
            tls = TLSConfig(
                server_root_ca_cert=_read(PREFIX + "TLS_CA", ca) if ca else None,
                client_cert=_read(PREFIX + "TLS_CERT", cert) if cert else None,
                client_private_key=_read(PREFIX + "TLS_KEY", key) if key else None,
                domain=server_name,
            )
        return cls(tls=tls, api_key=api_key, codec=_codec(env))

    @classmethod
    def _from_temporal_cli(cls, env: Mapping[str, str]) -> TemporalSecurity:
        """TLS and API key as the temporal CLI's environment and profile say (none set: plain)."""
        try:
            profile = ClientConfigProfile.load(override_env_vars=dict(env))
            config = profile.to_client_connect_config()
        except (OSError, ValueError, RuntimeError) as exc:
            raise SecurityError(f"the temporal CLI's settings (TEMPORAL_* or temporal.toml): {exc}") from exc
        tls = config.get("tls", False)
        return cls(tls=tls if isinstance(tls, TLSConfig | bool) else False, api_key=config.get("api_key"),
                   codec=_codec(env))

    def describe(self) -> str:
        """One line for logs: what is on, never a secret."""
        tls = "off" if self.tls is False else "mTLS" if isinstance(self.tls, TLSConfig) and self.tls.client_cert \
            else "TLS"
        return (f"TLS {tls}; API key {'set' if self.api_key else 'not set'}; "
                f"payload encryption {'on' if self.codec else 'off'}")


def _codec(env: Mapping[str, str]) -> EncryptionCodec | None:
    if not env.get("PODMEDIC_PAYLOAD_KEY_FILE"):
        return None
    try:
        return EncryptionCodec(load_keys(Path(env["PODMEDIC_PAYLOAD_KEY_FILE"])))
    except CodecKeyError as exc:
        raise SecurityError(f"PODMEDIC_PAYLOAD_KEY_FILE: {exc}") from exc
