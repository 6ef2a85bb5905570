"""Settings of the ingest service (``podmedic ingest --settings FILE``), validated by pydantic.

Every field has a default, so no file at all is a valid configuration (except that the
HTTP front then needs a token in ``$PODMEDIC_INGEST_TOKEN``). A bad file is refused with
one line per problem naming the field path and the reason, like the policy file.

Example::

    http:
      host: 0.0.0.0
      port: 8088
      token_file: /var/run/secrets/podmedic/ingest-token
      max_batch: 1000
    dedup: {ttl_s: 300}
    alertmanager:
      ...            # see workers/ingest/http/alertmanager.py
    state_dir: /var/lib/podmedic/ingest
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, model_validator

from podmedic.domain.base import ConfigModel
from podmedic.domain.config_file import ConfigFileError, parse_yaml, read_text
from workers.ingest.errors import path_of
from workers.ingest.http.alertmanager_mapping import AlertmanagerMapping

DEFAULT_TOKEN_ENV = "PODMEDIC_INGEST_TOKEN"




class HttpSettings(ConfigModel):
    """The HTTP front: where it listens, who may post, how much."""

    host: str = Field("127.0.0.1", description="Address to listen on; 0.0.0.0 for every interface.")
    port: int = Field(8088, ge=0, le=65535, description="TCP port; 0 picks a free one.")
    token_file: Path | None = Field(None, description="File holding the bearer token (wins over token_env).")
    token_env: str | None = Field(DEFAULT_TOKEN_ENV, description="Environment variable holding the bearer token.")
    allow_unauthenticated: bool = Field(False, description="Accept requests without a token. Never in production.")
    max_body_bytes: int = Field(1024 * 1024, ge=1024, le=64 * 1024 * 1024,
                                description="Largest request body; larger ones get 413.")
    max_batch: int = Field(1000, ge=1, le=100_000, description="Most events in one batch; more get 413.")
    deliver_timeout_s: float = Field(30.0, gt=0, description="Longest wait for Temporal before answering 503.")
    retry_after_s: int = Field(5, ge=1, description="Retry-After of a 503 (Temporal unreachable).")
    tls_cert_file: Path | None = Field(None, description="PEM certificate chain: serve HTTPS (with tls_key_file).")
    tls_key_file: Path | None = Field(None, description="PEM private key of tls_cert_file.")

    @model_validator(mode="after")
    def _tls_pair(self) -> HttpSettings:
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError("tls_cert_file and tls_key_file go together: set both or neither")
        return self


class DedupSettings(ConfigModel):
    """Dedup in front of Temporal: repeats of a device's last delivered state cost no round trip."""

    ttl_s: float = Field(300.0, ge=0, description="How long a delivered state is remembered.")
    max_entries: int = Field(200_000, ge=1, description="Most devices remembered; the oldest are forgotten first.")


class IngestSettings(ConfigModel):
    """Everything the ingest service reads from its settings file."""

    http: HttpSettings = Field(default_factory=HttpSettings)
    dedup: DedupSettings = Field(default_factory=DedupSettings)
    alertmanager: AlertmanagerMapping = Field(default_factory=AlertmanagerMapping)
    state_dir: Path | None = Field(None, description="Where watch cursors (resourceVersions) are kept.")


class SettingsError(ConfigFileError):
    """A settings file that cannot be used; ``errors`` lists ``(field path, reason)``."""

    kind = "ingest settings"


def parse_ingest_settings(text: str, source: str = "<settings>") -> IngestSettings:
    """Parse and validate settings YAML; raises ``SettingsError`` listing every problem."""
    raw: Any = parse_yaml(text, source, SettingsError)
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise SettingsError(source, [("(top)", "must be a mapping (http, dedup, alertmanager, state_dir)")])
    try:
        return IngestSettings.model_validate(raw)
    except ValidationError as exc:
        errors = [(path_of("", tuple(err["loc"])).replace("(body)", "(top)"), err["msg"])
                  for err in exc.errors(include_url=False)]
        raise SettingsError(source, errors) from None


def load_ingest_settings(path: Path | None) -> IngestSettings:
    """Load a settings file, or the defaults when ``path`` is ``None``."""
    if path is None:
        return IngestSettings()
    return parse_ingest_settings(read_text(path, SettingsError), str(path))
