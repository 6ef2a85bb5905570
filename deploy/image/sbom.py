"""A CycloneDX 1.5 SBOM of the image: its Debian packages (read from its dpkg database) and its
Python distributions (deploy/requirements.lock and podmedic's own wheel).

Written beside the image archive; deterministic (the serial number is derived from the image digest,
the timestamp is ``SOURCE_DATE_EPOCH``), so the same image always gets the same SBOM.
Package URLs are built by ``packageurl-python``, the purl spec's reference library: it normalizes
``pypi`` names and percent-encodes what the spec says (a Debian version's ``+``, say), which
string formatting did not.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path
from typing import Any

from packageurl import PackageURL


def _lock(lock: Path) -> list[tuple[str, str]]:
    pins = []
    for line in lock.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            pins.append((name, version))
    return pins


def _debs(listing: Path) -> list[tuple[str, str, str]]:
    """``dpkg-query -W -f '${Package}\\t${Version}\\t${Architecture}\\n'`` output as tuples."""
    rows = []
    for line in listing.read_text().splitlines():
        if line.strip():
            name, version, arch = line.split("\t")
            rows.append((name, version, arch))
    return rows


def build_sbom(digest: str, version: str, epoch: int, lock: Path, debs: Path) -> dict[str, Any]:
    """The SBOM of the image ``digest`` (podmedic ``version``) as a CycloneDX 1.5 document."""
    components: list[dict[str, Any]] = []
    for name, ver in sorted(_lock(lock)):
        purl = PackageURL(type="pypi", name=name, version=ver).to_string()
        components.append({"type": "library", "name": name, "version": ver, "purl": purl, "bom-ref": purl})
    own = PackageURL(type="pypi", name="podmedic", version=version).to_string()
    components.append({"type": "application", "name": "podmedic", "version": version, "purl": own,
                       "bom-ref": own})
    for name, ver, arch in sorted(_debs(debs)):
        purl = PackageURL(type="deb", namespace="debian", name=name, version=ver,
                          qualifiers={"arch": arch, "distro": "debian-12"}).to_string()
        components.append({"type": "library", "name": name, "version": ver, "purl": purl, "bom-ref": purl})
    return {
        "bomFormat": "CycloneDX", "specVersion": "1.5", "version": 1,
        "serialNumber": f"urn:uuid:{uuid.uuid5(uuid.NAMESPACE_URL, f'podmedic-image:{digest}')}",
        "metadata": {
            "timestamp": dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "tools": {"components": [{"type": "application", "name": "podmedic deploy/image/sbom.py"}]},
            "component": {"type": "container", "name": "podmedic", "version": version,
                          "purl": PackageURL(type="oci", name="podmedic", version=digest).to_string(),
                          "bom-ref": "image"},
        },
        "components": components,
    }


def write_sbom(out: Path, **kwargs: Any) -> int:
    """Write the SBOM to ``out``; returns the number of components."""
    sbom = build_sbom(**kwargs)
    out.write_text(json.dumps(sbom, indent=2, sort_keys=True) + "\n")
    return len(sbom["components"])
