"""The settings of ``podmedic admission``: the same-node placement webhook."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, ClassVar

from pydantic import Field, field_validator
from pydantic_settings import NoDecode

from podmedic.settings.base import ProcessSettings, var
from podmedic.settings.groups import parse_host_port


class AdmissionOnly(ProcessSettings):
    """Where the webhook listens and which certificate it serves (the API server only calls HTTPS)."""

    TITLE: ClassVar[str] = "Admission webhook"

    admission_listen: Annotated[tuple[str, int], NoDecode] = var(
        ("0.0.0.0", 9443), "PODMEDIC_ADMISSION_LISTEN",
        description="HOST:PORT of the HTTPS endpoint /mutate-pods (--listen)")
    cert_dir: Path | None = var(None, "PODMEDIC_ADMISSION_CERT_DIR",
                                description="directory with tls.crt and tls.key (a cert-manager or kubernetes.io/tls "
                                            "Secret mounted; --cert-dir); unset: a self-signed certificate is made")
    self_signed_dir: Path = var(Path("/tmp/podmedic-admission"), "PODMEDIC_ADMISSION_SELF_SIGNED_DIR",
                                description="where the self-signed CA and certificate are written and kept")
    service: str = Field("podmedic-admission", min_length=1, validation_alias="PODMEDIC_ADMISSION_SERVICE",
                         description="the webhook's Service: the self-signed certificate names "
                                     "<service>.<namespace>.svc")
    service_namespace: str = var("podmedic", "PODMEDIC_ADMISSION_NAMESPACE", "POD_NAMESPACE",
                                 description="namespace of that Service (the manifests: the pod's own)")
    webhook_configuration: str = var("podmedic-placement", "PODMEDIC_ADMISSION_WEBHOOK_CONFIGURATION",
                                     description="MutatingWebhookConfiguration whose caBundle the self-signed CA "
                                                 "is written to ('' leaves it alone: cert-manager's CA injector "
                                                 "or you set it)")
    extra_names: str = var("", "PODMEDIC_ADMISSION_EXTRA_NAMES",
                           description="more DNS names or IP addresses for the self-signed certificate, comma-"
                                       "separated (e.g. 127.0.0.1 for a webhook called by URL)")

    @field_validator("admission_listen", mode="before")
    @classmethod
    def _listen(cls, value: object) -> tuple[str, int]:
        parsed = parse_host_port(value)
        if parsed is None:
            raise ValueError("HOST:PORT is required")
        return parsed
