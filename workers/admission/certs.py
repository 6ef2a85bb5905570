"""The webhook's serving certificate: mounted (cert-manager, a TLS Secret) or self-signed at start.

The API server calls admission webhooks over HTTPS only, and trusts exactly the CA in the
configuration's ``caBundle``. Without a mounted certificate, the webhook makes its own CA and a
serving certificate for ``<service>.<namespace>.svc`` (and the names given), keeps both in a
directory so a restart serves the same ones, and publishes the CA into the
MutatingWebhookConfiguration (as kube-webhook-certgen and Kueue's internal cert manager do).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 365


@dataclass(frozen=True)
class ServingCert:
    """Files of a serving certificate and the CA that signed it (``ca`` is ``None`` when mounted)."""

    cert: Path
    key: Path
    ca: Path | None


def mounted(cert_dir: Path) -> ServingCert:
    """``tls.crt``/``tls.key`` (and ``ca.crt`` if there) of a mounted Secret; ``FileNotFoundError`` naming
    the missing file."""
    cert, key, ca = cert_dir / "tls.crt", cert_dir / "tls.key", cert_dir / "ca.crt"
    for path in (cert, key):
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such file (the Secret must hold tls.crt and tls.key)")
    return ServingCert(cert, key, ca if ca.is_file() else None)


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _alt_names(names: list[str]) -> list[x509.GeneralName]:
    alt: list[x509.GeneralName] = []
    for name in names:
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            alt.append(x509.DNSName(name))
    return alt


def self_signed(directory: Path, names: list[str]) -> ServingCert:
    """A CA and a serving certificate for ``names`` in ``directory``; made once, reused while they
    cover ``names`` and stay valid for another day."""
    directory.mkdir(parents=True, exist_ok=True)
    files = ServingCert(directory / "tls.crt", directory / "tls.key", directory / "ca.crt")
    assert files.ca is not None
    now = dt.datetime.now(dt.UTC)
    if all(p.is_file() for p in (files.cert, files.key, files.ca)):
        cert = x509.load_pem_x509_certificate(files.cert.read_bytes())
        have = {str(n.value) for n in cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value}
        if set(names) <= have and cert.not_valid_after_utc - now > dt.timedelta(days=1):
            return files
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (x509.CertificateBuilder().subject_name(_name("podmedic-admission-ca"))
               .issuer_name(_name("podmedic-admission-ca")).public_key(ca_key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=5))
               .not_valid_after(now + dt.timedelta(days=VALID_DAYS))
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                            content_commitment=False, key_encipherment=False,
                                            data_encipherment=False, key_agreement=False, encipher_only=False,
                                            decipher_only=False), critical=True)
               .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(_name(names[0])).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5)).not_valid_after(now + dt.timedelta(days=VALID_DAYS))
            .add_extension(x509.SubjectAlternativeName(_alt_names(names)), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    files.key.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption()))
    files.key.chmod(0o600)
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.ca.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    return files
