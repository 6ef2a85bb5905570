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

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from temporalio.envconfig import ClientConfigProfile
from temporalio.service import TLSConfig

from podmedic.settings import SettingsError
from podmedic.settings.groups import TemporalCredentials
from podmedic.temporal.codec import CodecKeyError, EncryptionCodec, load_keys


class SecurityError(ValueError):
    """Settings that cannot be used; the message names the variable and the reason."""


def _read(variable: str, path: Path) -> bytes:
    try:
        return path.read_bytes()
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
        try:
            settings = TemporalCredentials.load(env)
        except SettingsError as exc:
            raise SecurityError(str(exc)) from None
        codec = _codec(settings.payload_key_file)
        if not settings.podmedic_security_set:
            return cls._from_temporal_cli(env, codec)
        api_key = settings.temporal_api_key.get_secret_value().strip() or None if settings.temporal_api_key \
            else None
        if (key_file := settings.temporal_api_key_file) is not None:
            api_key = _read("PODMEDIC_TEMPORAL_API_KEY_FILE", key_file).decode().strip()
            if not api_key:
                raise SecurityError(f"PODMEDIC_TEMPORAL_API_KEY_FILE={key_file}: the file is empty")
        ca, cert, key = settings.temporal_tls_ca, settings.temporal_tls_cert, settings.temporal_tls_key
        server_name = settings.temporal_tls_server_name
        wants_tls = settings.temporal_tls is True or bool(ca or cert or server_name) or (
            api_key is not None and settings.temporal_tls is None)
        tls: TLSConfig | bool = False
        if wants_tls and settings.temporal_tls is not False:
            tls = TLSConfig(
                server_root_ca_cert=_read("PODMEDIC_TEMPORAL_TLS_CA", ca) if ca else None,
                client_cert=_read("PODMEDIC_TEMPORAL_TLS_CERT", cert) if cert else None,
                client_private_key=_read("PODMEDIC_TEMPORAL_TLS_KEY", key) if key else None,
                domain=server_name,
            )
        return cls(tls=tls, api_key=api_key, codec=codec)

    @classmethod
    def _from_temporal_cli(cls, env: Mapping[str, str] | None, codec: EncryptionCodec | None) -> TemporalSecurity:
        """TLS and API key as the temporal CLI's environment and profile say (none set: plain)."""
        try:
            profile = ClientConfigProfile.load(override_env_vars=None if env is None else dict(env))
            config = profile.to_client_connect_config()
        except (OSError, ValueError, RuntimeError) as exc:
            raise SecurityError(f"the temporal CLI's settings (TEMPORAL_* or temporal.toml): {exc}") from exc
        tls = config.get("tls", False)
        return cls(tls=tls if isinstance(tls, TLSConfig | bool) else False, api_key=config.get("api_key"),
                   codec=codec)

    def describe(self) -> str:
        """One line for logs: what is on, never a secret."""
        tls = "off" if self.tls is False else "mTLS" if isinstance(self.tls, TLSConfig) and self.tls.client_cert \
            else "TLS"
        return (f"TLS {tls}; API key {'set' if self.api_key else 'not set'}; "
                f"payload encryption {'on' if self.codec else 'off'}")


def _codec(key_file: Path | None) -> EncryptionCodec | None:
    if key_file is None:
        return None
    try:
        return EncryptionCodec(load_keys(key_file))
    except CodecKeyError as exc:
        raise SecurityError(f"PODMEDIC_PAYLOAD_KEY_FILE: {exc}") from exc
