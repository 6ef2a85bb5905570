"""The image recipe without building it: the OCI archive writer against the OCI image spec, the SBOM
against CycloneDX 1.5, and deploy/Dockerfile against `make image` (one content, two builders).

Shapes: OCI image-spec v1.1 image-layout.md (oci-layout, index.json, blobs/sha256), manifest.md and
config.md (mediaTypes, descriptors, rootfs.diff_ids = digests of the uncompressed layers);
CycloneDX 1.5 JSON (bomFormat, specVersion, serialNumber as urn:uuid, components with purl).
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

import cyclonedx.schema
from jsonschema import Draft7Validator
from referencing import Registry, Resource

from tests.image.recipe import ROOT, load

oci = load("oci")
sbom = load("sbom")
build = load("build")


def _rootfs(path: Path, content: bytes = b"#!/bin/sh\necho hi\n") -> Path:
    with tarfile.open(path, "w") as tar:
        info = tarfile.TarInfo("usr/bin/hello")
        info.size, info.mode, info.mtime = len(content), 0o755, 1
        tar.addfile(info, io.BytesIO(content))
    return path


def _config() -> Any:
    return oci.ImageConfig(entrypoint=["/usr/bin/hello"], cmd=[], user="10001:10001", env=["A=1"],
                           labels={"org.opencontainers.image.version": "9"}, exposed_ports=["8088/tcp"])


def _blob(tar: tarfile.TarFile, digest: str) -> bytes:
    member = tar.extractfile(f"blobs/sha256/{digest.removeprefix('sha256:')}")
    assert member is not None
    return member.read()


def test_the_archive_is_an_oci_image_layout_whose_digests_hold(tmp_path: Path) -> None:
    rootfs = _rootfs(tmp_path / "rootfs.tar")
    built = oci.write_archive(rootfs, _config(), "podmedic:9", 1_700_000_000, tmp_path / "image.tar",
                              name="docker.io/library/podmedic:9")
    with tarfile.open(built.archive) as tar:
        assert json.loads(_member(tar, "oci-layout")) == {"imageLayoutVersion": "1.0.0"}
        index = json.loads(_member(tar, "index.json"))
        [entry] = index["manifests"]
        assert entry["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
        assert entry["annotations"] == {"org.opencontainers.image.ref.name": "podmedic:9",
                                        "io.containerd.image.name": "docker.io/library/podmedic:9"}
        manifest_bytes = _blob(tar, entry["digest"])
        assert "sha256:" + hashlib.sha256(manifest_bytes).hexdigest() == entry["digest"] == built.digest
        assert len(manifest_bytes) == entry["size"]
        manifest = json.loads(manifest_bytes)
        assert manifest["schemaVersion"] == 2
        config_bytes = _blob(tar, manifest["config"]["digest"])
        assert manifest["config"]["mediaType"] == "application/vnd.oci.image.config.v1+json"
        assert "sha256:" + hashlib.sha256(config_bytes).hexdigest() == manifest["config"]["digest"]
        [layer] = manifest["layers"]
        assert layer["mediaType"] == "application/vnd.oci.image.layer.v1.tar+gzip"
        layer_bytes = _blob(tar, layer["digest"])
        assert "sha256:" + hashlib.sha256(layer_bytes).hexdigest() == layer["digest"]
        config = json.loads(config_bytes)
        assert config["rootfs"] == {"type": "layers",
                                    "diff_ids": ["sha256:" + hashlib.sha256(rootfs.read_bytes()).hexdigest()]}
        assert config["created"] == "2023-11-14T22:13:20Z" and config["os"] == "linux"
        assert config["config"]["User"] == "10001:10001" and config["config"]["ExposedPorts"] == {"8088/tcp": {}}
        with tarfile.open(fileobj=io.BytesIO(layer_bytes), mode="r:gz") as unpacked:
            assert unpacked.getnames() == ["usr/bin/hello"]


def _member(tar: tarfile.TarFile, name: str) -> bytes:
    member = tar.extractfile(name)
    assert member is not None
    return member.read()


def test_the_same_input_gives_the_same_bytes_and_any_change_a_new_digest(tmp_path: Path) -> None:
    rootfs = _rootfs(tmp_path / "rootfs.tar")
    first = oci.write_archive(rootfs, _config(), "podmedic:9", 1_700_000_000, tmp_path / "a.tar")
    second = oci.write_archive(rootfs, _config(), "podmedic:9", 1_700_000_000, tmp_path / "b.tar")
    assert first.digest == second.digest
    assert (tmp_path / "a.tar").read_bytes() == (tmp_path / "b.tar").read_bytes()
    later = oci.write_archive(rootfs, _config(), "podmedic:9", 1_700_000_001, tmp_path / "c.tar")
    other = oci.write_archive(_rootfs(tmp_path / "other.tar", b"changed"), _config(), "podmedic:9", 1_700_000_000,
                              tmp_path / "d.tar")
    assert len({first.digest, later.digest, other.digest}) == 3


def _cyclonedx_1_5() -> Draft7Validator:
    """A validator of CycloneDX 1.5 JSON from the schemas cyclonedx-python-lib ships (``schema/_res``)."""
    res = Path(cyclonedx.schema.__file__).parent / "_res"
    schemas = {name: json.loads((res / name).read_text()) for name in (
        "bom-1.5.SNAPSHOT.schema.json", "spdx.SNAPSHOT.schema.json", "jsf-0.82.SNAPSHOT.schema.json")}
    bom = schemas["bom-1.5.SNAPSHOT.schema.json"]
    # The BOM refers to the others by file name, resolved against its own $id.
    registry = Registry().with_resources((urljoin(bom["$id"], name), Resource.from_contents(body))
                                         for name, body in schemas.items())
    return Draft7Validator(bom, registry=registry)


def test_the_sbom_is_cyclonedx_with_every_locked_wheel_and_debian_package(tmp_path: Path) -> None:
    debs = tmp_path / "debs.tsv"
    debs.write_text("python3\t3.11.2-1+b1\tamd64\ntini\t0.19.0-1+b3\tamd64\n")
    lock = ROOT / "deploy" / "requirements.lock"
    doc = sbom.build_sbom(digest="sha256:" + "ab" * 32, version="9", epoch=1_700_000_000, lock=lock, debs=debs)
    assert (doc["bomFormat"], doc["specVersion"]) == ("CycloneDX", "1.5")
    assert re.fullmatch(r"urn:uuid:[0-9a-f-]{36}", doc["serialNumber"])
    purls = {c["purl"] for c in doc["components"]}
    pins = [line.split("==") for line in lock.read_text().splitlines() if "==" in line and not line.startswith("#")]
    # The purl spec (github.com/package-url/purl-spec, PURL-SPECIFICATION.rst and PURL-TYPES.rst): a pypi name
    # is lowercased with '_' as '-'; a version is percent-encoded, so Debian's '+' is '%2B'.
    assert {f"pkg:pypi/{name.lower().replace('_', '-')}@{version}" for name, version in pins} <= purls
    assert "pkg:deb/debian/tini@0.19.0-1%2Bb3?arch=amd64&distro=debian-12" in purls
    # The document passes CycloneDX's own 1.5 JSON schema, as cyclonedx-python-lib ships it with the SPDX
    # and JSF schemas it refers to.
    errors = sorted(_cyclonedx_1_5().iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors[:5]]
    assert doc == sbom.build_sbom(digest="sha256:" + "ab" * 32, version="9", epoch=1_700_000_000, lock=lock,
                                  debs=debs)


def _dockerfile_stages() -> list[list[str]]:
    stages: list[list[str]] = []
    text = (ROOT / "deploy" / "Dockerfile").read_text().replace("\\\n", " ")
    for line in text.splitlines():
        if line.startswith("FROM "):
            stages.append([])
        if stages and line.strip() and not line.startswith("#"):
            stages[-1].append(" ".join(line.split()))
    return stages


def test_the_dockerfile_builds_what_make_image_builds() -> None:
    wheels, final = _dockerfile_stages()
    copied = [word for line in wheels if line.startswith("COPY ") for word in line.split()[1:-1]]
    assert copied[1:] == list(build.PROJECT_FILES)  # after the lock: the same files, no more
    installs = [line for line in final if "apt-get install" in line]
    assert installs and set(installs[0].split("--no-install-recommends")[1].split()) == set(build.DEBIAN_PACKAGES)
    assert any("install.sh" in line and "sh /tmp/install.sh /tmp/wheels" in line for line in final)
    assert f"USER {build.USER}" in final
    assert f"ENTRYPOINT {json.dumps(build.ENTRYPOINT)}" in final
    assert {f"{p}/tcp" for line in final if line.startswith("EXPOSE ") for p in line.split()[1:]} == set(build.EXPOSED)
    env_line = next(line for line in final if line.startswith("ENV "))
    assert set(env_line.removeprefix("ENV ").split()) == set(build.ENV)
