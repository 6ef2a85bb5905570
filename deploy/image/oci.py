"""Write an OCI image archive (``oci-archive:``) from a root filesystem tarball, byte for byte reproducibly.

The layout is the OCI image spec's (image-layout, manifest, config, index): one gzip layer made from
the tarball with a zero gzip timestamp, a config whose ``created`` is ``SOURCE_DATE_EPOCH``, and an
archive whose entries are sorted and dated the same. So the same root filesystem always gives the
same manifest digest. ``skopeo copy oci-archive:FILE docker://REGISTRY/NAME:TAG`` pushes it;
``podman load -i FILE`` and ``kind load image-archive`` read it.
"""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import io
import json
import shutil
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
CHUNK = 1 << 20


@dataclass(frozen=True)
class ImageConfig:
    """What the image runs and how it is labelled (the config's ``config`` section)."""

    entrypoint: list[str]
    cmd: list[str]
    user: str
    env: list[str]
    labels: dict[str, str]
    exposed_ports: list[str] = field(default_factory=list)
    working_dir: str = "/"
    architecture: str = "amd64"


@dataclass(frozen=True)
class Built:
    """The archive written and the figures people ask for."""

    archive: Path
    digest: str
    layer_digest: str
    layers: int
    compressed_bytes: int
    uncompressed_bytes: int


def _canonical(data: dict[str, Any]) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":")).encode()


def _gzip_layer(rootfs: Path, out: Path) -> tuple[str, str, int]:
    """``rootfs`` gzipped into ``out`` with no timestamp or name: (diff_id, digest, uncompressed size)."""
    raw = hashlib.sha256()
    size = 0
    with (rootfs.open("rb") as src, out.open("wb") as sink,
          gzip.GzipFile(filename="", mode="wb", fileobj=sink, compresslevel=6, mtime=0) as zipped):
        while chunk := src.read(CHUNK):
            raw.update(chunk)
            size += len(chunk)
            zipped.write(chunk)
    return f"sha256:{raw.hexdigest()}", f"sha256:{_sha256_file(out)}", size


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def write_archive(rootfs: Path, config: ImageConfig, ref_name: str, epoch: int, out: Path,
                  annotations: dict[str, str] | None = None, name: str | None = None) -> Built:
    """Write ``out`` (an OCI image layout in a tar) holding ``rootfs`` as its one layer.

    Args:
        rootfs: An uncompressed tarball of the root filesystem (mmdebstrap's output).
        config: Entrypoint, user, environment and labels.
        ref_name: ``org.opencontainers.image.ref.name`` in the index (``podmedic:0.1.0``: podman and skopeo
            name the image by it).
        name: The full name containerd gives it on import (``io.containerd.image.name``; kind load).
        epoch: ``SOURCE_DATE_EPOCH``: the config's ``created`` and every archive entry's time.
        out: The archive to write.
        annotations: Extra manifest annotations (the labels are repeated there for registries).
    """
    work = out.with_suffix(".layout")
    shutil.rmtree(work, ignore_errors=True)
    blobs = work / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    layer_tmp = work / "layer.tar.gz"
    diff_id, layer_digest, raw_size = _gzip_layer(rootfs, layer_tmp)
    layer_tmp.rename(blobs / layer_digest.removeprefix("sha256:"))
    created = dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    image_config = {
        "created": created, "architecture": config.architecture, "os": "linux",
        "config": {"Entrypoint": config.entrypoint, "Cmd": config.cmd, "User": config.user, "Env": config.env,
                   "Labels": config.labels, "WorkingDir": config.working_dir,
                   "ExposedPorts": {port: {} for port in config.exposed_ports}},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": created, "created_by": "mmdebstrap + deploy/image/install.sh (make image)"}],
    }
    config_bytes = _canonical(image_config)
    config_digest = hashlib.sha256(config_bytes).hexdigest()
    (blobs / config_digest).write_bytes(config_bytes)
    layer_size = (blobs / layer_digest.removeprefix("sha256:")).stat().st_size
    manifest = {
        "schemaVersion": 2, "mediaType": MANIFEST,
        "config": {"mediaType": CONFIG, "digest": f"sha256:{config_digest}", "size": len(config_bytes)},
        "layers": [{"mediaType": LAYER, "digest": layer_digest, "size": layer_size}],
        "annotations": {**config.labels, **(annotations or {})},
    }
    manifest_bytes = _canonical(manifest)
    manifest_digest = hashlib.sha256(manifest_bytes).hexdigest()
    (blobs / manifest_digest).write_bytes(manifest_bytes)
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
             "manifests": [{"mediaType": MANIFEST, "digest": f"sha256:{manifest_digest}",
                            "size": len(manifest_bytes),
                            "annotations": {"org.opencontainers.image.ref.name": ref_name,
                                            **({"io.containerd.image.name": name} if name else {})}}]}
    (work / "index.json").write_bytes(_canonical(index))
    (work / "oci-layout").write_bytes(_canonical({"imageLayoutVersion": "1.0.0"}))
    _tar_sorted(work, out, epoch)
    shutil.rmtree(work)
    return Built(archive=out, digest=f"sha256:{manifest_digest}", layer_digest=layer_digest, layers=1,
                 compressed_bytes=layer_size, uncompressed_bytes=raw_size)


def _tar_sorted(directory: Path, out: Path, epoch: int) -> None:
    """``directory``'s files in a tar, sorted by name, owned by root and dated ``epoch``."""
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(p for p in directory.rglob("*")):
            info = tar.gettarinfo(str(path), arcname=str(path.relative_to(directory)))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = epoch
            info.mode = 0o755 if path.is_dir() else 0o644
            if path.is_file():
                with path.open("rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)


def read_index(archive: Path) -> dict[str, Any]:
    """The ``index.json`` of an archive written here (for tests and ``make image``'s report)."""
    with tarfile.open(archive) as tar:
        member = tar.extractfile("index.json")
        assert member is not None
        return dict(json.load(io.TextIOWrapper(member)))
